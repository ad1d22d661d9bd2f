"""PairSides' address family: which data addresses a session's sequences use, and the
error when the pair has none of the asked family (the agents faked: fake_cm)."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
from collections.abc import Iterator

import pytest
from fake_cm import FakeCMWorld

from hil.cm.session import CMSession
from hil.errors import InputError
from hil.host.impairkinds import Impairment
from hil.inventory.model import Pair
from hil.judge.profiles import SIW
from hil.judge.timeline import MPA_REQUEST_DROP, MSS_CLAMP


def _dual(pair: Pair) -> Pair:
    """``pair`` with an address6 on both ports (2001:db8:5::1 and ::2)."""
    hosts = [
        dataclasses.replace(
            h,
            rnics=(
                dataclasses.replace(
                    h.rnics[0], address6=ipaddress.IPv6Interface(f"2001:db8:5::{n + 1}/64")
                ),
            ),
        )
        for n, h in enumerate(pair.hosts)
    ]
    return Pair(pair.link, hosts[0], hosts[1])


def _session(world: FakeCMWorld, pair: Pair, **kw: object) -> CMSession:
    return CMSession(world, pair, profile=SIW, **kw)  # type: ignore[arg-type]


def test_the_ipv6_family_listens_and_connects_on_the_ports_address6() -> None:
    world = FakeCMWorld()
    s = _session(world, _dual(world.pair), family="ipv6")
    assert (s.family, s.address("a"), s.address("b")) == ("ipv6", "2001:db8:5::1", "2001:db8:5::2")
    tl = s.run("connect")
    connect = next(a for a in tl.actions if a.name == "connect")
    assert connect.params["dst"] == "2001:db8:5::2"
    # The fake agent gives the listener's and the connect's source address back as is.
    request = next(e for e in tl.events if e.type == "CONNECT_REQUEST")
    assert request.local.startswith("2001:db8:5::2:") and request.remote.startswith(
        "2001:db8:5::1:"
    )


def test_without_a_family_a_session_takes_the_first_the_pair_offers() -> None:
    world = FakeCMWorld()
    s = _session(world, _dual(world.pair))
    assert (s.family, s.address("a")) == ("ipv4", str(world.pair.rnic_a.address.ip))  # type: ignore[union-attr]


def test_a_family_the_pair_does_not_offer_says_what_each_port_has() -> None:
    world = FakeCMWorld()
    with pytest.raises(InputError) as e:
        _session(world, world.pair, family="ipv6")
    assert str(e.value) == (
        "pair l01: CM sequences need an ipv6 address on both ports (address, or address6 "
        "for IPv6), and the inventory gives port p0 of h0: ipv4; port p0 of h1: ipv4"
    )


def test_a_standing_hold_is_recorded_by_every_run_inside_it_and_by_none_after() -> None:
    """An impairment's delay (PairSides.impaired) holds a side's frames back for every run
    in its block: each run's timeline says so, so the wire rules expect them late."""
    world = FakeCMWorld()
    s = _session(world, world.pair)
    with s.holding("b", 10_000):
        first, second = s.run("connect"), s.run("connect")
    for tl in (first, second):
        assert tl.holds() == {s.address("b"): 10_000}
        hold = next(a for a in tl.actions if a.name == "hold_egress")
        assert (hold.side, hold.params["by"]) == ("b", "impairment")
    assert s.run("connect").holds() == {}


def test_loss_holds_the_senders_frames_by_tcps_resends_and_a_delay_adds_to_it() -> None:
    """A frame lost before the sender's capture tap is seen only in its resend, up to
    three retransmission timeouts later (hil.host.impair.RESENT_LATE_MS)."""
    world = FakeCMWorld()
    s = _session(world, world.pair)
    s.impair_control = _Applied  # type: ignore[assignment, method-assign]
    loss = Impairment("loss", percent=10)
    with s.impaired(s.way_from("a"), [loss]):
        assert s.run("connect").holds() == {s.address("a"): 1_400_000}
    with s.impaired(s.way_from("a"), [loss, Impairment("delay", delay_ms=20)]):
        assert s.run("connect").holds() == {s.address("a"): 1_420_000}
    with s.impaired(s.way_from("a"), [Impairment("duplicate", percent=10)]):
        assert s.run("connect").holds() == {}


def test_corruption_holds_the_senders_frames_by_tcps_resends() -> None:
    """A corrupted FIN can be unreadable as its connection's to the sender's own capture
    (the flip lands in its headers), so it too shows only in its resend
    (hil.host.impair.RESENT_KINDS)."""
    world = FakeCMWorld()
    s = _session(world, world.pair)
    s.impair_control = _Applied  # type: ignore[assignment, method-assign]
    with s.impaired(s.way_from("a"), [Impairment("corrupt", percent=20)]):
        assert s.run("connect").holds() == {s.address("a"): 1_400_000}


class _Applied:
    """An ImpairControl that applies nothing: the impairment is the caller's concern here."""

    @contextlib.contextmanager
    def impaired(self, link: object, way: str, impairments: object) -> Iterator[list[object]]:
        yield []


def test_an_mss_clamp_is_recorded_as_the_senders_action_by_every_run_inside_it() -> None:
    """The wire rule segments-within-the-clamped-mss judges the runs that record it."""
    world = FakeCMWorld()
    s = _session(world, world.pair)
    s.impair_control = _Applied  # type: ignore[assignment, method-assign]
    with s.impaired(s.way_from("a"), [Impairment("mss", mss=536)]):
        tl = s.run("connect")
    clamp = next(a for a in tl.actions if a.name == MSS_CLAMP)
    assert (clamp.side, clamp.params) == ("a", {"mss": 536, "by": "impairment"})
    assert not s.standing_clamps()
    assert not [a for a in s.run("connect").actions if a.name == MSS_CLAMP]


def test_an_mpa_request_drop_is_recorded_as_the_senders_action_by_every_run_inside_it() -> None:
    """The wire rule mpa-request-retransmitted judges the runs that record it."""
    world = FakeCMWorld()
    s = _session(world, world.pair)
    s.impair_control = _Applied  # type: ignore[assignment, method-assign]
    with s.impaired(s.way_from("a"), [Impairment("drop-mpa-request")]):
        tl = s.run("connect")
    drop = next(a for a in tl.actions if a.name == MPA_REQUEST_DROP)
    assert (drop.side, drop.params) == ("a", {"by": "impairment"})
    assert not s.standing_drops()
    assert not [a for a in s.run("connect").actions if a.name == MPA_REQUEST_DROP]
