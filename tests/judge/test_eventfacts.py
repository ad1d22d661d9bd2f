"""``event-status-in-profile`` and ``event-addresses-are-the-ids``: a status outside the
reporting host's set, a type with no set, and an event whose addresses are not its id's
(nor its listener's port, nor the mirror of the other end) each fail."""

from __future__ import annotations

import errno
from dataclasses import replace

import pytest
from cmtimelines import Builder, connected, listener_destroyed, orderly_close, rejected
from contractcheck import breaks, conforms, violations

from hil.judge.profiles import IW_CXGB4, SIW, PairProfile, siw_profile
from hil.judge.timeline import Event, Timeline

STATUS = "event-status-in-profile"
ADDRESSES = "event-addresses-are-the-ids"
A_END, B_END = "198.18.0.1:40000", "198.18.0.2:7174"


def with_event(tl: Timeline, cm_id: str, type_: str, **change: object) -> Timeline:
    """``tl`` with ``cm_id``'s event of ``type_`` changed."""
    events = tuple(
        replace(e, **change) if (e.id, e.type) == (cm_id, type_) else e  # type: ignore[arg-type]
        for e in tl.events
    )
    return replace(tl, events=events)


@pytest.mark.parametrize(
    ("cm_id", "type_", "status"),
    [
        ("b:2", "CONNECT_REQUEST", -errno.ECONNRESET),
        ("a:1", "ESTABLISHED", -errno.EIO),
        ("b:2", "ESTABLISHED", -errno.ECONNRESET),
        ("a:1", "ADDR_RESOLVED", -errno.ETIMEDOUT),
        ("b:2", "DISCONNECTED", -errno.ECONNRESET),
    ],
)
def test_a_status_outside_the_profiles_set_breaks_it(cm_id: str, type_: str, status: int) -> None:
    tl = with_event(orderly_close(), cm_id, type_, status=status)
    breaks(tl, SIW, STATUS, f"{cm_id} {type_}({status}) on lab-")


def test_the_rejected_of_a_request_pending_at_a_listener_destroy_is_judged() -> None:
    tl = with_event(listener_destroyed(), "a:3", "REJECTED", status=-errno.ECONNREFUSED)
    breaks(tl, SIW, STATUS, "a:3 REJECTED(-111) on lab-a: profile siw allows one of [-104]")
    conforms(listener_destroyed(), SIW)


def test_an_event_type_the_profile_has_no_set_for_is_a_profile_error() -> None:
    bare = replace(siw_profile(), event_statuses=())
    breaks(orderly_close(), bare, STATUS, "profile error: profile siw has no status set for")


def test_a_type_that_never_comes_on_iwarp_says_so() -> None:
    b = Builder("route-error").act("a", "connect", "a:1", 1, "EHOSTUNREACH", listener=True)
    b.ev("a", "ROUTE_ERROR", "a:1", 0.5, -errno.EHOSTUNREACH)
    breaks(b.build(), SIW, STATUS, "no ROUTE_ERROR at all on iWARP")


def test_each_event_is_judged_by_the_profile_of_the_host_that_reported_it() -> None:
    """cxgb4's REJECTED(-111) is siw's violation only on the siw host."""
    tl = rejected("iw_cxgb4", status=-errno.ECONNREFUSED)
    mixed = PairProfile((("lab-a", SIW), ("lab-b", IW_CXGB4)))
    assert [v.events[0].host for v in violations(tl, mixed, STATUS)] == ["lab-a"]
    assert not violations(tl, PairProfile((("lab-a", IW_CXGB4), ("lab-b", SIW))), STATUS)


def addressed() -> Timeline:
    """c1 with every event's addresses, and the ids' addresses that connect and accept read."""
    b = connected()
    b.actions[0].params["port"] = 7174  # the listener's
    tl = b.build()
    ends = {"a": (A_END, B_END), "b": (B_END, A_END)}
    events = tuple(replace(e, local=ends[e.side][0], remote=ends[e.side][1]) for e in tl.events)
    actions = tuple(
        replace(a, params={**a.params, "local": ends[a.side][0], "remote": ends[a.side][1]})
        if a.name in ("connect", "accept")
        else a
        for a in tl.actions
    )
    return replace(tl, events=events, actions=actions)


def test_events_that_carry_their_ids_addresses_pass() -> None:
    conforms(addressed(), SIW)


def test_an_event_whose_addresses_are_not_its_ids_breaks_it() -> None:
    tl = with_event(addressed(), "a:1", "ESTABLISHED", local=B_END, remote=A_END)
    verdict = breaks(
        tl,
        SIW,
        ADDRESSES,
        f"a:1 ESTABLISHED on lab-a carries {B_END} <-> {A_END}, but its id's "
        f"rdma_get_local_addr/rdma_get_peer_addr after connect are {A_END} <-> {B_END}",
    )
    assert verdict.violations[0].actions[0].name == "connect"


def test_a_connect_request_not_on_its_listeners_port_breaks_it() -> None:
    """The mutant event-addr-swapped: siw swaps the ports of a CONNECT_REQUEST."""
    swapped = ("198.18.0.2:40000", "198.18.0.1:7174")
    tl = addressed()
    for type_ in ("CONNECT_REQUEST", "ESTABLISHED"):
        tl = with_event(tl, "b:2", type_, local=swapped[0], remote=swapped[1])
    tl = replace(tl, actions=tuple(a for a in tl.actions if a.name != "accept"))
    breaks(
        tl,
        SIW,
        ADDRESSES,
        "b:2 CONNECT_REQUEST on lab-b says its local end is 198.18.0.2:40000, but it came "
        "through listener b:1, bound to port 7174",
    )
    breaks(tl, SIW, ADDRESSES, "connection c1: a:1 on lab-a is 198.18.0.1:40000 <-> ")


def test_events_without_addresses_are_not_judged() -> None:
    """A destroyed id's event carries none (its memory is freed): nothing to compare."""
    tl = with_event(addressed(), "a:1", "ESTABLISHED", local="", remote="")
    assert not violations(tl, SIW, ADDRESSES)


def test_an_event_is_what_it_is_when_an_id_has_no_recorded_addresses() -> None:
    events = tuple(
        Event(e.host, e.side, e.t_us, e.host_t_us, e.type, e.status, e.id, e.listen_id)
        for e in addressed().events
    )
    assert not violations(replace(addressed(), events=events), SIW, ADDRESSES)
