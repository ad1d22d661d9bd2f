"""siw regressions of a connection's QP: the read queues it gets.

- ``regress_siw_zero_ird_ord`` guards 661f385961f0 "RDMA/siw: Fix handling
  of zero-sized Read and Receive Queues." (Bernard Metzler, December 2020;
  in 6.1 from its release): a connection negotiating IRD and ORD 0 made
  siw_qp_readq_init() call roundup_pow_of_two(0), a shift out of bounds
  (Kamal Heib's blktests report).  6.1.192 sizes the queues only when
  non-zero (siw_qp.c 200-221, from siw_qp_modify at 675, with siw_cm.c's
  IRD/ORD at 880-881 and 1651-1652).  Without the fix, x86 masks the shift
  count, so the queues would get one slot each and ibv_query_qp report 1,
  not 0 (siw_verbs.c 520-521): the contract's ``ird-ord-qp-depths`` would
  see that (reasoned from the sources, not run on a revert kernel); a UBSAN
  kernel reports the shift itself (the lab's debug kernel has no UBSAN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm.registry import sequence
from hil.cm.regressions.evidence import noted
from hil.cm.sequences.irdord import ird_ord
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides


@sequence
def regress_siw_zero_ird_ord(s: PairSides) -> Timeline:
    """661f385961f0: one connection negotiating IRD and ORD 0 on both sides (the
    ``ird_ord`` sequence), its QPs' read queue depths read."""
    return zero_evidence(ird_ord(s, ird=0, ord=0, accept_ird=0, accept_ord=0))


def zero_evidence(tl: Timeline) -> Timeline:
    """``tl`` with what the case saw: both sides ESTABLISHED reporting IRD and ORD 0 (so
    both QPs went to RTS with zero-sized read queues, siw_qp.c 675) and both QPs'
    depths read.  The depths themselves are the contract's to judge."""
    est = [e for e in tl.events if e.type == "ESTABLISHED"]
    zero = [e for e in est if e.responder_resources == 0 and e.initiator_depth == 0]
    queried = [a for a in tl.actions if a.name == "query_qp" and a.ok]
    both_zero = len(est) == len(zero) == 2
    return noted(
        tl,
        {
            "both_sides_established_with_ird_and_ord_0": both_zero,
            "both_qps_read_queue_depths_read": len(queried) == 2,
        },
        # The fix's window: a QP moved to RTS with IRD/ORD 0, where siw sized its read
        # queues with roundup_pow_of_two(0).
        {"qp_to_rts_with_zero_read_queues": both_zero},
    )
