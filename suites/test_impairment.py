"""Impaired paths: connects and data under loss, a dropped MPA request, reordering,
duplication and corruption, a delay past the MPA timer (nightly only), a link flapping
under traffic and a middlebox clamping the MSS (a middlebox lab only: the nightly's).

Each test impairs the path from the active host to the passive one at the link's
impairment point (its inventory ``impair:``: netem on the sender's own port for siw,
a middlebox for an offloading pair; docs/impairment.md), which first proves itself on
the path with ping probes or fails "impairment not effective".  Inside it one
connection is made and its payload checked byte for byte both ways (docs/payload.md);
the contract judges the timeline (``payload-intact`` among its rules) and the wire
rules the capture.  The impairment is journaled before it is applied and undone after
the test, or by the next reservation's replay when the run dies.

One direction (a-b) and one family (IPv4): the impairment sits on the IP path below
TCP, which carries both families alike.  The active host's segments are the ones
impaired (MPA request, data, and the ACKs of the passive host's data), except under
reordering (below).  The budget
(docs/impairment.md, Cost) keeps every test to one connection (the flap's adds a
reconnect, as link_pull's does).  Corruption with the MPA CRC negotiated is the reference
peer's ``send-bad-crc`` (suites/test_wire_conformance.py): netem's never reaches MPA
(docs/impairment.md).
"""

from __future__ import annotations

import pytest

from hil.cm import sequences, steps
from hil.cm.session import CMSession
from hil.host.impairkinds import Impairment
from hil.judge.profiles import Profiles
from hil.judge.timeline import FLAP, Timeline
from hil.plugin.api import Contract, explain, seen

pytestmark = [
    pytest.mark.parametrize("direction", ["a-b"]),
    pytest.mark.parametrize("family", ["ipv4"]),
]

# Data intact under each of these (the payload check's bytes, both ways).  Corruption:
# siw never negotiates the MPA CRC itself (mpa_crc_required is a const false, not a
# module parameter: siw_main.c:45, Linux 6.1), so a corrupted segment is caught by
# TCP's checksum and retransmitted; netem computes a CHECKSUM_PARTIAL segment's sum
# before flipping the bit (sch_netem.c netem_enqueue, 6.1), so the receiver sees it.
# Reordering holds most segments back by its delay, and the ends' tcpdump sees a
# host's frames only after its qdisc (dev_queue_xmit_nit runs in xmit_one, past the
# qdisc: net/core/dev.c, 6.1): the impaired host's FIN or MPA reply shows on the wire
# up to that delay after the event it caused.  CMSession.impaired records the delay as
# the sender's hold_egress, which the wire rules allow for (as a race's hold).
# The reorder's delay is 40 ms: its proof tells a probe sent ahead by a round trip under
# half the delay, and under CI's load the lab's undelayed round trips passed 5 ms
# (2026-12-07, delay 10 ms: 3 of 80 probes under 5 ms, expected about 20).
IMPAIRED_DATA = {
    "reorder": (Impairment("reorder", percent=25, delay_ms=40), "passive"),
    "duplicate": (Impairment("duplicate", percent=10), "active"),
    "corrupt": (Impairment("corrupt", percent=20), "active"),
}


def _impaired_connect(
    cm: CMSession, impairments: list[Impairment], sender: str = "active"
) -> Timeline:
    """One connection, its payload checked, then closed, with the path from the
    ``sender`` (active or passive) host impaired (proven first)."""
    link = cm.pair.link
    side = cm.active if sender == "active" else cm.passive
    way = cm.way_from(side)
    with cm.impaired(way, impairments) as probes:
        for probe in probes:
            print(f"{link.name} {way}: {probe.to_text()}")
        return cm.run(sequences.connect, private_data=b"hil-impaired")


def _established(tl: Timeline, cm: CMSession) -> None:
    for side in (cm.active, cm.passive):
        assert len(seen(tl, "ESTABLISHED", side)) == 1, explain(
            tl, f"expected one ESTABLISHED on side {side} through the impaired path"
        )


def test_connect_under_loss_establishes_within_the_mpa_timer_and_data_is_intact(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """10 % of the active host's frames lost: the SYN, the MPA request and the data are
    retransmitted by TCP, the connect completes before the provider's MPA timer would
    end it, and every byte arrives."""
    tl = _impaired_connect(cm, [Impairment("loss", percent=10)])
    contract(tl)
    _established(tl, cm)
    _within_the_mpa_timer(tl, cm, profile)


def _within_the_mpa_timer(tl: Timeline, cm: CMSession, profile: Profiles) -> None:
    timer = profile.of(cm.host(cm.active)).conn_sent_destroy_min_s
    took = tl.metrics.get("connect_us", 0) / 1e6
    assert took > 0, explain(tl, "no connect time measured")
    if timer is not None:
        assert took < timer, explain(
            tl, f"the connect took {took:.1f} s, past the MPA timer's {timer:.1f} s"
        )


def test_a_dropped_mpa_request_is_retransmitted_and_the_connect_establishes_in_time(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """The active host's first MPA request dropped once on the path (kind
    ``drop-mpa-request``: nftables at the passive host's ingress, docs/impairment.md):
    TCP retransmits it, which the wire rule ``mpa-request-retransmitted`` requires at the
    active host's capture (the original and a copy of its sequence number and length;
    sent once: "impairment not effective"), the connect completes before the profile's
    MPA timer (siw arms MPAREQ_TIMEOUT once the request is sent, siw_cm.c:1497, Linux
    6.1.192, so the retransmission must come within it) and every byte arrives."""
    tl = _impaired_connect(cm, [Impairment("drop-mpa-request")])
    contract(tl)
    _established(tl, cm)
    _within_the_mpa_timer(tl, cm, profile)


@pytest.mark.parametrize("kind", list(IMPAIRED_DATA))
def test_data_is_intact_through_an_impaired_path(
    cm: CMSession, contract: Contract, kind: str
) -> None:
    """Reordered, duplicated or corrupted segments: TCP delivers the stream in order and
    whole, so the payload check finds every byte (contract rule ``payload-intact``)."""
    impairment, sender = IMPAIRED_DATA[kind]
    tl = _impaired_connect(cm, [impairment], sender)
    contract(tl)
    _established(tl, cm)


# An MSS clamp: a common middlebox setting (a PPPoE or tunnel path clamps to its MTU);
# 536 is the default MSS a host must assume without the option (RFC 9293 section 3.7.1),
# well below the payload check's MTU-sized and 64 KiB messages, so that each is cut into
# more, smaller segments (siw sizes its FPDUs from the socket's MSS, a multiple of it
# under GSO: siw_qp_tx.c:687-700 siw_update_tcpseg, Linux 6.1.192).
CLAMPED_MSS = 536


def test_data_is_intact_through_a_middlebox_that_clamps_the_mss(
    cm: CMSession, contract: Contract
) -> None:
    """A middlebox rewrites the passive host's SYN to announce a 536-byte MSS: the
    active host's segments are cut to it, and every byte still arrives (the contract's
    ``payload-intact``); the wire rule ``segments-within-the-clamped-mss`` shows the
    clamp took (the passive host sent a larger MSS, the active host saw 536) and that
    no segment was longer, or fails "impairment not effective"."""
    mode = cm.pair.link.impair.mode
    if mode != "middlebox":
        pytest.skip(
            f"MSS clamping needs a middlebox on the path (impair: {mode}): `hil lab up "
            "--middlebox`, `ci/nightly --middlebox` (docs/impairment.md)"
        )
    tl = _impaired_connect(cm, [Impairment("mss", mss=CLAMPED_MSS)])
    contract(tl)
    _established(tl, cm)


# A delay above siw's MPA timer: MPAREQ_TIMEOUT, HZ * 10 (siw_cm.h:74), armed once the
# MPA request is sent (siw_cm.c:1497, Linux 6.1.192).  The passive host's frames are held
# back, so its SYN-ACK (rdma_connect blocks until it: siw_connect's kernel_bindconnect)
# and its MPA reply each come LATE_REPLY_MS late: the reply 12 s after the request, past
# the timer by more than the controller's accept takes.  Its proof (10 ping probes, each
# waiting -W 2 s + the delay: ImpairControl.ping) holds the test another 12 s.
LATE_REPLY_MS = 12_000


def test_a_delay_above_the_mpa_timer_ends_the_connect_unreachable_within_its_bound(
    cm: CMSession, contract: Contract, profile: Profiles, request: pytest.FixtureRequest
) -> None:
    """The passive host's frames held back 12 s: its MPA reply reaches the active side
    after the MPA timer, which ends the connect UNREACHABLE (siw_cm.c:1125-1138 upcalls
    CONNECT_REPLY -ETIMEDOUT, which cma_iw_handler alone makes UNREACHABLE: cma.c:2511,
    Linux 6.1.192; its status the contract's, corestatus.py) no sooner than the profile's
    ``conn_sent_destroy_min_s`` after rdma_connect returned and within its
    ``conn_sent_destroy_bound_s``; the accepted passive side is closed, nothing leaks
    (the contract's resource rules)."""
    if request.config.getoption("hil_race_sweeps") != "full":
        pytest.skip("nightly only (--hil-race-sweeps full): a 12 s delay, about 40 s a run")
    active = profile.of(cm.host(cm.active))
    if active.conn_sent_destroy_min_s is None:
        pytest.skip(f"profile {active.name} names no MPA timer (conn_sent_destroy_min_s)")
    late = Impairment("delay", delay_ms=LATE_REPLY_MS)
    way = cm.way_from(cm.passive)
    with cm.impaired(way, [late]) as probes:
        print(f"{cm.pair.link.name} {way}: {probes[0].to_text()}")
        tl = cm.run(sequences.late_mpa_reply)
    contract(tl)
    replies = [e for e in tl.events if e.side == cm.active and e.type in steps.REPLY_TYPES]
    assert [e.type for e in replies] == ["UNREACHABLE"], explain(
        tl, "expected the connect to end UNREACHABLE (the MPA timer), and only that"
    )
    took = tl.metrics["mpa_timer_us"] / 1e6
    low, high = active.conn_sent_destroy_min_s, active.conn_sent_destroy_bound_s
    assert low <= took <= high, explain(
        tl, f"UNREACHABLE {took:.2f} s after rdma_connect returned, not in [{low}, {high}] s"
    )


# Flapping: the active host's path down 1 s every 2 s, three times.  On host netem the
# flapped port is the active host's own (docs/impairment.md, flap): siw ends every QP at
# its netdev's NETDEV_DOWN (siw_netdev_down, siw_main.c:396-415, 447, Linux 6.1.192), so
# the connection ends at the first down within the profile's admin bound.  Through a
# middlebox the ends' netdevs stay up: a 1 s outage is far shorter than TCP's give-up
# time (the lab's tcp_retries2 5: 12.6 s), so the connection lives on
# (Profile.flap_bound_s).
FLAP_EVERY_S, FLAP_DOWN_S, FLAPS = 2.0, 1.0, 3


def test_a_link_flapping_under_traffic_keeps_or_ends_its_connection_as_the_profile_says(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """A connection carrying RDMA WRITEs (link_pull's traffic) while its link flaps: it
    ends within the flapped host's bound of the first down, or it lives through every
    down and its payload then arrives intact and it closes orderly; either way a new
    connection follows and nothing leaks (the contract's resource rules)."""
    tl = cm.run(sequences.link_flap, every_s=FLAP_EVERY_S, down_s=FLAP_DOWN_S, flaps=FLAPS)
    contract(tl)
    flap = next(a for a in tl.actions if a.name == FLAP)
    host = cm.host(flap.side)
    bound = profile.of(host).flap_bound_s(str(flap.params["mode"]), FLAP_DOWN_S)
    c1 = [e for e in tl.events_of_conn("c1") if e.type == "DISCONNECTED"]
    if bound is None:
        close = min(a.t_us for a in tl.actions if a.name == "disconnect")
        assert all(e.t_us >= close for e in c1), explain(
            tl,
            f"profile {profile.of(host).name} promises the connection outlives "
            f"{FLAP_DOWN_S:g} s downs, and it ended before its close",
        )
        after = [a for a in tl.actions if a.name == "payload" and a.t_us > flap.t_us]
        assert after, explain(tl, "no payload check after the flaps")
        return
    took = tl.metrics.get("detection_us")
    assert took is not None and took <= bound * 1e6, explain(
        tl,
        f"profile {profile.of(host).name} ends the connection within {bound:.2f} s of "
        f"the first {flap.params['mode']} down; DISCONNECTED "
        + ("never came" if took is None else f"came {took / 1e6:.2f} s after it"),
    )
    assert len(seen(tl, "ESTABLISHED")) == 4, explain(tl, "expected c1 and the reconnect c2")
