"""An abortive close flushes what was posted, once each: the rule ``abort-flushes``.

A QP moved to ERR completes every work request still queued on it with the
status Flushed in Error (InfiniBand Architecture Specification vol. 1,
section 10.3.1, QP state Error; ``IBV_WC_WR_FLUSH_ERR``, 5, ibv_poll_cq(3)),
as siw does: on the move from RTS to ERR ``siw_qp_nextstate_from_rts``
calls ``siw_sq_flush`` and ``siw_rq_flush``, each completing every queued
entry once (linux 6.1.192, siw_qp.c lines 738-755, 1188 and 1264).  A
request that completed before the move completed with its own status, and
the drain does not see it again.

The ``abort`` sequence with ``how=qp_err`` drains the aborting side's CQ
after its DISCONNECTED (:meth:`hil.cm.endpoint.Endpoint.flushed`): one
``flushed`` action whose params hold the work requests ``posted`` and not
yet completed when the drain began (the receives the connection's payload
check left posted), every completion the CQ then gave (``wr_id``,
``status``), and the ``error`` that stopped the drain.  The rule fails on a
posted request with no completion, one completed twice, a completion of a
request never posted, and a completion other than success or flushed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from hil.judge.payload import action_where
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, rule
from hil.judge.timeline import Action, Timeline

WC_SUCCESS, WC_WR_FLUSH_ERR = 0, 5  # enum ibv_wc_status, ibv_poll_cq(3)


@rule(
    "abort-flushes",
    None,
    "After an abortive close (QP to ERR) every work request posted completes exactly once, "
    "with IBV_WC_WR_FLUSH_ERR unless it completed before",
    "[src] InfiniBand Architecture Specification vol. 1 section 10.3.1 (QP state Error: "
    "queued work requests complete Flushed in Error); ibv_poll_cq(3) (IBV_WC_WR_FLUSH_ERR); "
    "linux 6.1.192 siw_qp.c lines 738-755 (RTS to ERR: siw_sq_flush, siw_rq_flush)",
)
def abort_flushes(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in (a for a in tl.actions if a.name == "flushed"):
        yield from _findings(tl, a)


def _findings(tl: Timeline, a: Action) -> Iterator[Finding]:
    """What is wrong with one ``flushed`` action."""
    where = action_where(tl, a)
    if not a.ok:
        yield Finding(f"{where}: the CQ was not drained: {a.result}", (), (a,))
        return
    posted = set(a.params.get("posted") or [])
    completions: list[dict[str, Any]] = list(a.params.get("completions") or [])
    times = Counter(c.get("wr_id") for c in completions)
    for wr_id, n in sorted(times.items(), key=lambda t: str(t[0])):
        if wr_id not in posted:
            yield Finding(f"{where}: wr {wr_id} completed but was not posted", (), (a,))
        elif n > 1:
            yield Finding(f"{where}: wr {wr_id} completed {n} times", (), (a,))
    for c in completions:
        if c.get("status") not in (WC_SUCCESS, WC_WR_FLUSH_ERR):
            yield Finding(
                f"{where}: wr {c.get('wr_id')} completed with status {c.get('status')}, "
                f"not IBV_WC_WR_FLUSH_ERR ({WC_WR_FLUSH_ERR}) or success",
                (),
                (a,),
            )
    never = sorted(posted - set(times))
    if never:
        stop = a.params.get("error")
        why = f" ({stop})" if stop else ""
        wrs = ", ".join(str(w) for w in never)
        yield Finding(f"{where}: posted wr {wrs} never completed{why}", (), (a,))


RULES = (abort_flushes,)
