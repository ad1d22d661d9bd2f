"""``payload-intact``: a bad byte, an end that could not run or finish, and a check
never made each fail, naming the connection, the op, the size and the bytes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from cmtimelines import Builder, connect, connected, listener_destroyed
from contractcheck import breaks, conforms, violations

from hil.agent.protocol import PAYLOAD_OPS
from hil.judge import payload
from hil.judge.profiles import SIW
from hil.judge.timeline import Timeline

RULE = "payload-intact"
SIZES = [1, 1499, 1501, 65536]


def checks(**bad: dict[str, int]) -> list[dict[str, Any]]:
    """Every op at every size, right but those in ``bad`` (``"write_1501": {...}``)."""
    out = []
    for op in payload.PAYLOAD_OPS:
        for n in SIZES:
            wrong = bad.get(f"{op}_{n}")
            c = {"op": op, "size": n, "ok": wrong is None, "offset": -1, "expected": -1, "got": -1}
            out.append({**c, **(wrong or {})})
    return out


def payload_on(
    t: Builder,
    ids: tuple[str, str],
    t_ms: float,
    a: dict[str, Any] | None = None,
    b: dict[str, Any] | None = None,
) -> Builder:
    """Each end's ``payload`` action on the connection of ``ids`` (a's, b's) at ``t_ms``
    (params: a clean run, updated by ``a``/``b``)."""
    for side, cm_id, extra in zip("ab", ids, (a or {}, b or {}), strict=True):
        params = {"seed": 9, "mtu": 1500, "sizes": SIZES, "checks": checks(), "error": None}
        params.update(extra)
        result = str(params.pop("result", "ok"))
        t.act(side, "payload", cm_id, t_ms, result, 80, **params)
    return t


def checked(a: dict[str, Any] | None = None, b: dict[str, Any] | None = None) -> Builder:
    """c1 connected, then each end's ``payload`` action (:func:`payload_on`), then the
    test's close."""
    t = payload_on(connected(), ("a:1", "b:2"), 20, a, b)
    t.act("a", "disconnect", "a:1", 200)
    t.ev("a", "DISCONNECTED", "a:1", 202).ev("b", "DISCONNECTED", "b:2", 203)
    return t


def test_a_clean_run_on_both_ends_passes_the_whole_contract() -> None:
    conforms(checked().build(), SIW)


def test_a_flipped_byte_names_the_connection_op_size_offset_and_bytes() -> None:
    bad = {"write_1501": {"ok": False, "offset": 1448, "expected": 0x3C, "got": 0xC3}}
    breaks(
        checked(b={"checks": checks(**bad)}).build(),
        SIW,
        RULE,
        "connection c1, side b (lab-b) b:2: RDMA WRITE of 1501 bytes into side b: first bad "
        "byte at offset 1448, expected 0x3c, got 0xc3",
    )


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (
            {"send_1499": {"ok": False, "offset": 1448, "expected": 7, "got": -1}},
            "SEND of 1499 bytes into side a: only 1448 bytes arrived",
        ),
        (
            {"send_1": {"ok": False, "offset": 1, "expected": -1, "got": 0}},
            "SEND of 1 bytes into side a: more bytes arrived than sent (byte 1 is 0x00)",
        ),
        (
            {"read_65536": {"ok": False, "offset": 4096, "expected": 1, "got": 2}},
            "RDMA READ of 65536 bytes by side a: first bad byte at offset 4096",
        ),
    ],
    ids=["short send", "long send", "bad read"],
)
def test_each_kind_of_bad_message_is_told(wrong: dict[str, dict[str, int]], says: str) -> None:
    breaks(checked(a={"checks": checks(**wrong)}).build(), SIW, RULE, says)


def test_every_bad_message_is_a_finding_of_its_own() -> None:
    wrong = {"ok": False, "offset": 1500, "expected": 1, "got": 2}
    bad = {"send_65536": wrong, "write_65536": wrong}
    got = violations(checked(a={"checks": checks(**bad)}).build(), SIW, RULE)
    assert [v.message.split(": ")[1] for v in got] == [
        "SEND of 65536 bytes into side a",
        "RDMA WRITE of 65536 bytes into side a",
    ]


def test_an_end_that_could_not_run_or_stopped_is_a_violation() -> None:
    breaks(
        checked(a={"result": "EBUSY"}).build(),
        SIW,
        RULE,
        "side a (lab-a) a:1: the payload check did not run: EBUSY",
    )
    stopped = checked(b={"error": "no completion within 10s waiting for send of 1501 bytes"})
    breaks(stopped.build(), SIW, RULE, "the payload check stopped: no completion within 10s")


def test_a_check_the_plan_names_but_the_end_never_made_is_a_violation() -> None:
    short = [c for c in checks() if (c["op"], c["size"]) != ("read", 1501)]
    breaks(checked(b={"checks": short}).build(), SIW, RULE, "never checked RDMA READ of 1501")
    breaks(checked(a={"sizes": []}).build(), SIW, RULE, "never checked every size (none agreed)")


def test_the_judge_names_the_ops_the_protocol_declares() -> None:
    assert payload.PAYLOAD_OPS == PAYLOAD_OPS


# The sequences that establish without open_conn check their connections too
# (docs/payload.md): the rule judges every payload action, whatever the scenario.


def after_the_listener_destroy(tl: Timeline, **b: Any) -> Timeline:
    """``tl`` (a listener destroy at 30 ms) with c1's payload checked at 40 ms, after it,
    as ``listener_destroy`` does; b's params updated by ``b``."""
    extra = payload_on(Builder(tl.scenario), ("a:1", "b:2"), 40, b=b).actions
    return replace(tl, actions=tl.actions + tuple(extra)).sorted()


def test_an_accepted_connection_checked_after_its_listeners_destroy_conforms() -> None:
    conforms(after_the_listener_destroy(listener_destroyed()), SIW)


def test_an_accepted_connection_the_listener_destroy_closed_fails_its_payload_check() -> None:
    """A destroy that closed c1 (its passive DISCONNECTED at 34 ms): the check after it
    stops on the flushed receive."""
    stopped = "completion IBV_WC_WR_FLUSH_ERR (wr 17) during the peer's MTU"
    tl = after_the_listener_destroy(listener_destroyed(accepted_lost=True), error=stopped)
    breaks(
        tl, SIW, RULE, f"connection c1, side b (lab-b) b:2: the payload check stopped: {stopped}"
    )


def test_of_two_connections_only_the_broken_one_is_named() -> None:
    """Two connections checked one after the other (listener_addresses, the regressions'
    load connections): a bad byte on c2 is c2's finding alone."""
    t = payload_on(connected(), ("a:1", "b:2"), 20)
    connect(t, "c2", "a:3", "b:4", t0=120)
    bad = {"send_1499": {"ok": False, "offset": 1424, "expected": 0xCF, "got": 0x30}}
    payload_on(t, ("a:3", "b:4"), 140, a={"checks": checks(**bad)})
    got = violations(t.build(), SIW, RULE)
    assert [v.message for v in got] == [
        "connection c2, side a (lab-a) a:3: SEND of 1499 bytes into side a: first bad byte at "
        "offset 1424, expected 0xcf, got 0x30"
    ]


def _received_by_b(check: dict[str, Any]) -> Timeline:
    """c1 connected, then side b's ``received`` action holding ``check``, then the close."""
    t = connected()
    t.act("b", "received", "b:2", 20, "ok", 80, status=0, byte_len=8192, checks=[check])
    t.act("a", "disconnect", "a:1", 200)
    t.ev("a", "DISCONNECTED", "a:1", 202).ev("b", "DISCONNECTED", "b:2", 203)
    return t.build()


def test_a_received_message_checked_whole_passes_and_a_bad_byte_in_it_fails() -> None:
    right = {"op": "send", "size": 8192, "ok": True, "offset": -1, "expected": -1, "got": -1}
    conforms(_received_by_b(right), SIW)
    bad = {**right, "ok": False, "offset": 4096, "expected": 0x1F, "got": 0}
    breaks(
        _received_by_b(bad),
        SIW,
        RULE,
        "connection c1, side b (lab-b) b:2: SEND of 8192 bytes into side b: first bad byte "
        "at offset 4096, expected 0x1f, got 0x00",
    )
