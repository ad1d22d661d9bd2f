"""The judge leaves a test's own hand-made TCP connections (``raw_tcp``) out, on either family.

The siw regression 53a3f7770497 sends malformed MPA requests from a plain socket
(hil/cm/regressions/siw.py); its action names the ends as the agent and the
sequence write them: ``local`` as ``[v6]:port`` (hil/agent/remote/probe.py),
``remote`` as the address and port joined by a colon, unbracketed.  tshark prints
IPv6 addresses compressed and without a scope.  Packets are typed by hand.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hil.judge.profiles import SIW
from hil.judge.timeline import RAW_TCP, Action, ClockOffset, Timeline
from hil.wire.judge import judge
from hil.wire.model import Connection, Endpoint, Exchange, Mpa, Packet

A6: Endpoint = ("fd00:198:18:3::1", 40000)
P6: Endpoint = ("fd00:198:18:3::2", 7174)
# A malformed MPA request as the probe sends it: revision 1, markers asked for.
PROBE = Mpa("request", 1, True, False, False, False, "", "")


def probe_connection(
    active: Endpoint, passive: Endpoint, t0_us: int = 1000, frames: int = 0
) -> Connection:
    """A probe's connection (frames ``frames`` + 1..5, from ``t0_us`` on, placed)."""

    def pkt(n: int, src: Endpoint, flags: str, mpa: Mpa | None = None) -> Packet:
        dst = passive if src == active else active
        t_us = t0_us + n * 100
        f = frozenset(flags.split(","))
        return Packet(frames + n, "hA", t_us, src, dst, f, t_us=t_us, mpa=mpa)

    packets = (
        pkt(1, active, "SYN"),
        pkt(2, passive, "SYN,ACK"),
        pkt(3, active, "ACK"),
        pkt(4, active, "ACK,PSH", PROBE),
        pkt(5, active, "RST,ACK"),
    )
    return Connection(active, passive, packets)


def raw(local: str, remote: str, t_us: int = 900, took_us: int = 1000) -> Action:
    return Action(t_us, "a", RAW_TCP, None, {"local": local, "remote": remote}, "reset", took_us)


def timeline(*actions: Action) -> Timeline:
    offsets = (ClockOffset("hA", 0, 50), ClockOffset("hB", 0, 50))
    return Timeline("t", "siw", ("hA", "hB"), actions, (), offsets)


def exchange(*conns: Connection) -> Exchange:
    return Exchange(conns, ("hA",), {"hA": 100})


@pytest.mark.parametrize(
    ("local", "remote"),
    [
        ("[fd00:198:18:3::1]:40000", "fd00:198:18:3::2:7174"),  # as the regression writes them
        ("[fd00:198:18:3::1]:40000", "[fd00:198:18:3::2]:7174"),
        ("[fd00:198:18:3:0:0:0:1]:40000", "[FD00:198:18:3::2]:7174"),  # not compressed, case
        ("[fd00:198:18:3::1%data0]:40000", "fd00:198:18:3::2%2:7174"),  # with a scope
    ],
)
def test_an_ipv6_probe_is_left_out_whatever_form_its_addresses_take(
    local: str, remote: str
) -> None:
    ex = exchange(probe_connection(A6, P6))
    assert not judge(ex, [timeline()], SIW).ok  # a CM connection: judged, broken
    verdict = judge(ex, [timeline(raw(local, remote))], SIW)
    assert verdict.ok, verdict.to_text()
    assert any(
        "(raw_tcp): [fd00:198:18:3::1]:40000 > [fd00:198:18:3::2]:7174" in n for n in verdict.notes
    )


def test_an_ipv4_probe_in_ipv6_mapped_form_is_left_out() -> None:
    ex = exchange(probe_connection(("198.18.0.1", 40000), ("198.18.0.2", 7174)))
    verdict = judge(ex, [timeline(raw("[::ffff:198.18.0.1]:40000", "198.18.0.2:7174"))], SIW)
    assert verdict.ok, verdict.to_text()


def test_a_probe_leaves_a_later_connection_on_its_4_tuple_judged() -> None:
    """A CM connect that reused a probe's 4-tuple after it ended is still judged."""
    probe, later = probe_connection(A6, P6), probe_connection(A6, P6, 50_000, frames=10)
    ex = exchange(probe, later)
    verdict = judge(ex, [timeline(raw("[fd00:198:18:3::1]:40000", "fd00:198:18:3::2:7174"))], SIW)
    failed = {r.rule for r in verdict.failed}
    assert failed == {"mpa-revision-and-flags"}, verdict.to_text()
    assert "#14@hA" in verdict.to_text()
    assert "#4@hA" not in verdict.to_text()


def test_a_probe_with_unreadable_ends_excludes_nothing() -> None:
    ex = exchange(probe_connection(A6, P6))
    verdict = judge(ex, [timeline(raw("nonsense", "fd00::2:port"))], SIW)
    assert not verdict.ok
    assert not any("raw_tcp" in n for n in verdict.notes)


def test_an_unplaced_exchange_leaves_out_every_connection_on_the_probes_4_tuple() -> None:
    conns = (probe_connection(A6, P6), probe_connection(A6, P6, 50_000, frames=10))
    unplaced = tuple(
        replace(c, packets=tuple(replace(p, t_us=None) for p in c.packets)) for c in conns
    )
    ex = replace(exchange(*unplaced), uncertainty_us={})
    verdict = judge(ex, [timeline(raw("[fd00:198:18:3::1]:40000", "[fd00:198:18:3::2]:7174"))], SIW)
    assert verdict.ok, verdict.to_text()
