"""``connection-stays-up``: a DISCONNECTED that no action explains fails, naming the
connection and the last action before it; every cause the sequences record passes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from cmtimelines import (
    Builder,
    connected,
    link_pull,
    listener_destroyed,
    orderly_close,
    qp_err_close,
    rejected,
)
from contractcheck import breaks, violations

from hil.judge.profiles import SIW
from hil.judge.timeline import Timeline

RULE = "connection-stays-up"


def dropped(cause: tuple[str, str, str | None, dict[str, Any]] | None = None) -> Builder:
    """c1 (a:1 <-> b:2, ESTABLISHED at 6-7 ms) with ``cause`` (side, name, id, params)
    at 100 ms, then both DISCONNECTED at 200-203 ms and the test's own close at 400 ms."""
    b = connected()
    if cause is not None:
        side, name, cm_id, params = cause
        b.act(side, name, cm_id, 100, params.pop("result", "ok"), **params)
    b.ev("a", "DISCONNECTED", "a:1", 200).ev("b", "DISCONNECTED", "b:2", 203)
    b.act("a", "disconnect", "a:1", 400)
    return b


def test_a_connection_dropped_by_itself_breaks_it_naming_it_and_the_last_action() -> None:
    verdict = breaks(
        dropped().build(),
        SIW,
        RULE,
        "connection c1, side a (lab-a) a:1, got DISCONNECTED(0) 193.0 ms after its "
        "ESTABLISHED with no close, abort, pull or peer action before it; last action "
        "before it: b:accept b:2 -> ok @4.000ms",
    )
    assert [v.events[0].id for v in verdict.violations] == ["a:1", "b:2"]


def test_the_last_action_on_the_connection_and_in_the_timeline_are_both_named() -> None:
    """A listener destroy that drops an accepted connection: both actions are named."""
    verdict = breaks(
        listener_destroyed(accepted_lost=True),
        SIW,
        RULE,
        "last action on it: b:accept b:2 -> ok @4.000ms; last action before it: "
        "b:destroy b:1 -> ok @30.000ms",
    )
    assert [a.name for a in verdict.violations[0].actions] == ["accept", "destroy"]


CAUSES = {
    "own disconnect": ("a", "disconnect", "a:1", {}),
    "peer disconnect": ("b", "disconnect", "b:2", {}),
    "own qp_err": ("a", "qp_err", "a:1", {}),
    "peer qp_err": ("b", "qp_err", "b:2", {}),
    "peer destroy": ("b", "destroy", "b:2", {}),
    "peer kill": ("b", "kill", "b:2", {"pid": 7}),
    "a kill naming no id": ("b", "kill", None, {"pid": 7}),
    "a failed disconnect": ("a", "disconnect", "a:1", {"result": "EINVAL"}),
    "a refused write": ("a", "write", "a:1", {"how": "bad_rkey", "wc_status": 0}),
    "a write posted only": ("a", "write", "a:1", {"result": "ETIMEDOUT", "length": 64}),
    "a pull on either end": ("b", "pull", None, {"mode": "carrier", "traffic": False}),
    "a flap on either end": ("a", "flap", None, {"mode": "admin", "every_s": 2, "down_s": 1}),
    "the device removed": ("a", "delete_netdev", None, {"netdev": "hilveth0"}),
    "a channel closed": ("b", "close_channel", None, {"round": 0}),
    "a tool peer's start": ("b", "tool_peer", None, {"argv": "rping -s -a 198.18.0.2"}),
}


@pytest.mark.parametrize("cause", CAUSES.values(), ids=CAUSES.keys())
def test_every_cause_a_sequence_records_passes(
    cause: tuple[str, str, str | None, dict[str, Any]],
) -> None:
    assert not violations(dropped(cause).build(), SIW, RULE)


NOT_CAUSES = {
    "a completed write": ("a", "write", "a:1", {"wc_status": 0}),
    "a close of another connection": ("b", "destroy", "b:9", {}),
    "a listener destroy": ("b", "destroy", "b:1", {}),
    "a reject": ("b", "reject", "b:2", {}),
    "a qp_state read": ("a", "qp_state", "a:1", {"qpn": 3, "state": "RTS"}),
}


@pytest.mark.parametrize("cause", NOT_CAUSES.values(), ids=NOT_CAUSES.keys())
def test_actions_that_end_no_connection_are_no_cause(
    cause: tuple[str, str, str | None, dict[str, Any]],
) -> None:
    breaks(dropped(cause).build(), SIW, RULE, "connection c1")


def test_a_close_on_the_other_host_within_the_clocks_uncertainty_is_a_cause() -> None:
    """b's DISCONNECTED at 203 ms, a's disconnect stamped 0.4 ms later (clocks +/- 0.6 ms)."""
    b = connected().act("a", "disconnect", "a:1", 203.4)
    b.ev("a", "DISCONNECTED", "a:1", 204).ev("b", "DISCONNECTED", "b:2", 203)
    assert not violations(b.build(), SIW, RULE)
    late = connected().act("a", "disconnect", "a:1", 205)
    late.ev("a", "DISCONNECTED", "a:1", 206).ev("b", "DISCONNECTED", "b:2", 203)
    breaks(late.build(), SIW, RULE, "side b (lab-b) b:2")


def _unlabelled(peer: str, peer_local: str) -> Timeline:
    """An unlabelled connection a:1 <-> b:2 with 4-tuples; ``peer`` destroyed at 100 ms
    (``peer_local``: b:2's own address in its events)."""
    b = Builder("storm").act("b", "destroy", peer, 100)
    b.ev("a", "ESTABLISHED", "a:1", 7, conn=None).ev("b", "ESTABLISHED", "b:2", 6, conn=None)
    b.ev("a", "DISCONNECTED", "a:1", 102, conn=None)
    ends = {"a": ("10.0.0.1:40000", "10.0.0.2:4791"), "b": (peer_local, "10.0.0.1:40000")}
    tl = b.build()
    events = tuple(replace(e, local=ends[e.side][0], remote=ends[e.side][1]) for e in tl.events)
    return replace(tl, events=events)


def test_an_unlabelled_connection_is_tied_to_its_peer_by_the_4_tuple() -> None:
    assert not violations(_unlabelled("b:2", "10.0.0.2:4791"), SIW, RULE)
    breaks(
        _unlabelled("b:9", "10.0.0.2:4791"),
        SIW,
        RULE,
        "an unlabelled connection, side a (lab-a) a:1 10.0.0.1:40000 <-> 10.0.0.2:4791,",
    )
    # No mirrored 4-tuple: the peer is unknown, and any close on its side may be it.
    assert not violations(_unlabelled("b:9", "10.0.0.2:4792"), SIW, RULE)


def test_the_hand_made_runs_of_each_scenario_pass() -> None:
    for tl in (
        orderly_close(),
        qp_err_close("siw", 0, 0),
        rejected(),
        listener_destroyed(),
        link_pull(5_000),
        link_pull(5_000, mode="admin"),
    ):
        assert not violations(tl, SIW, RULE), tl.scenario


def test_a_disconnected_before_the_link_pull_breaks_it() -> None:
    """An idle connection that drops before the pull: the pull explains nothing."""
    breaks(link_pull(-50), SIW, RULE, "last action before it: b:accept b:2")


def _late_reply(failed: str | None) -> Timeline:
    """b accepted c1, whose connect on a then ended ``failed`` (None: it did not); b then
    got DISCONNECTED (the MPA timer's end releases a's socket, siw_cm.c:1125-1138)."""
    b = Builder("late-mpa-reply")
    b.act("b", "listen", "b:1", 0, backlog=8)
    b.act("a", "connect", "a:1", 1, listener=True)
    b.ev("b", "CONNECT_REQUEST", "b:2", 3, listen_id="b:1")
    b.act("b", "accept", "b:2", 4)
    b.ev("b", "ESTABLISHED", "b:2", 6)
    if failed is not None:
        b.ev("a", failed, "a:1", 10_000, status=-110)
    b.ev("b", "DISCONNECTED", "b:2", 10_001)
    return b.build()


def test_a_connect_that_failed_after_its_peer_accepted_explains_the_peers_close() -> None:
    assert not violations(_late_reply("UNREACHABLE"), SIW, RULE)
    assert violations(_late_reply(None), SIW, RULE)
