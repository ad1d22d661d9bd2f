"""IRD/ORD negotiation per RFC 6581 (issue 25 item 4): rdma_connect and rdma_accept asking
asymmetric IRD/ORD, 0, the device's maximum and one past it.

One connection per test, in one direction (a-b): both lab hosts run the same
kernel.  The contract judges what CONNECT_REQUEST and ESTABLISHED report
(``ird-ord-request-reported``, ``ird-ord-negotiated``), the refusal past the
maximum (``ird-ord-over-limit-refused``), the QPs' depths (``ird-ord-qp-depths``)
and the active side's concurrent RDMA READs within and one past its ORD
(``ird-ord-reads``); the wire rule ``mpa-ird-ord-words`` compares the MPA v2
words with the events.  Each test states its own outcome too.  The values and
their sources: docs/ird-ord.md.
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.session import CMSession
from hil.judge.profiles import Profiles
from hil.judge.rule import errno_name
from hil.plugin.api import Contract, explain, seen

# (ird, ord, accept_ird, accept_ord); "max" is the acting host's limit, "max+1" one past.
CASES: dict[str, tuple[int | str, ...]] = {
    # The responder raises its IRD to the initiator's ORD (4 -> 8 kept: it asked more)
    # and lowers its ORD to the initiator's IRD (1 kept); the initiator mirrors: IRD 1,
    # ORD 8: eight concurrent READs, then nine.
    "asymmetric-raise": (2, 4, 8, 1),
    # The responder asked IRD 1 under the initiator's ORD 2 and ORD 8 over its IRD 4:
    # negotiated IRD 2 / ORD 4 there, the initiator IRD 4 / ORD 2.
    "asymmetric-lower": (4, 2, 1, 8),
    "zero": (0, 0, 0, 0),
    "max": ("max", "max", "max", "max"),
    "connect-over-max": ("max+1", 1, 1, 1),
    "accept-over-max": (1, 1, 1, "max+1"),
}


def _value(v: int | str, limit: int) -> int:
    """``v``, with "max" and "max+1" read against ``limit``."""
    return v if isinstance(v, int) else {"max": limit, "max+1": limit + 1}[v]


@pytest.mark.parametrize("direction", ["a-b"])
@pytest.mark.parametrize("case", CASES)
def test_ird_ord_negotiation(
    cm: CMSession, contract: Contract, profile: Profiles, case: str
) -> None:
    """One connection asking the case's IRD/ORD on connect and accept: the events, the
    wire, the QPs and the READs show the negotiated values; a value past the device's
    maximum is refused by the call."""
    promise = profile.of(cm.host(cm.active)).ird_ord
    if promise is None:
        pytest.skip("the profile promises no IRD/ORD negotiation (docs/ird-ord.md)")
    limits = (promise.max_ird, promise.max_ord) * 2
    ird, ord_, accept_ird, accept_ord = (
        _value(v, most) for v, most in zip(CASES[case], limits, strict=True)
    )
    tl = cm.run(sequences.ird_ord, ird=ird, ord=ord_, accept_ird=accept_ird, accept_ord=accept_ord)
    contract(tl)
    refused = "connect" if case == "connect-over-max" else "accept" if "over" in case else None
    if refused:
        act = next(a for a in tl.actions if a.name == refused)
        assert errno_name(act.result) == promise.refusal, explain(
            tl, f"{refused} past the maximum should fail {promise.refusal}"
        )
        assert not seen(tl, "ESTABLISHED"), explain(tl, f"a refused {refused} was ESTABLISHED")
        return
    assert len(seen(tl, "ESTABLISHED")) == 2, explain(tl, "expected ESTABLISHED on both sides")
    assert len([a for a in tl.actions if a.name == "query_qp" and a.ok]) == 2, explain(
        tl, "expected both QPs' depths read"
    )
    if case.startswith("asymmetric"):
        reads = [a for a in tl.actions if a.name == "reads" and a.params.get("reader")]
        assert len(reads) == 2, explain(tl, "expected READs within and one past the ORD")
