"""Regression cases where the reference peer plays the DUT's other end: a bug's window is
a frame only a peer that writes its own frames can send (the regression corpus:
:mod:`hil.cm.regressions`, ``suites/test_regressions.py``).

- :func:`peer_terminate` guards d219face9059 "RDMA/iw_cxgb4: initiate CLOSE
  when entering TERM" (Krishnamraju Eraparaju, February 2020, stable 5.4 and
  5.5; read at linux-rdma, message 20200204091230.7210-1-krishna2@chelsio.com):
  "As per draft-hilland-iwarp-verbs-v1.0, sec 6.2.3, always initiate a CLOSE
  when entering into TERM state"; its cm.c half makes terminate(), the handler
  of CPL_RDMA_TERMINATE (the adapter's word that a TERMINATE came in), abort
  the connection after moving the QP to TERMINATE.  6.1.192 has it (cm.c
  3024-3050: c4iw_ep_disconnect(ep, 1) after C4IW_QP_STATE_TERMINATE).  The
  peer connects to the DUT's listener and, once the DUT's MPA reply came,
  sends a TERMINATE; the DUT must close the stream within the scenario's
  bound.
- :func:`reply_in_pieces` guards 3056fc6c32e6 "RDMA/siw: Fix duplicated reported
  IW_CM_EVENT_CONNECT_REPLY event" (Cheng Xu, July 2022, v6.0; CVE-2022-50136;
  read at lore.kernel.org, message
  dae34b5fd5c2ea2bd9744812c1d2653a34a94c67.1657706960.git.chengyou@linux.alibaba.com).
  siw_proc_mpareply() reported CONNECT_REPLY(-EINVAL) also when siw_recv_mpa_rr()
  had read only part of the reply (-EAGAIN), and then again once the rest came: iw_cm
  has left CONN_SENT at the first, so the second hits cm_conn_rep_handler's
  BUG_ON (iwcm.c:896, 6.1.192).  6.1.192 has the fix (siw_cm.c:745-749, 915-917).
  The DUT connects to the peer, which writes its MPA reply's first 8 bytes, waits
  1.5 s (under siw's 5 s MPAREP_TIMEOUT, siw_cm.h:75) and writes the rest; the DUT
  must be ESTABLISHED once and receive a SEND sent 2 s later.

The run is judged as the wire suite's are (the peer verdict against the
provider's expectation, :mod:`hil.judge.peerproviders`); :func:`terminate_evidence`
adds the ``reached_*`` metrics of :mod:`hil.cm.regressions.evidence`
to the DUT's timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm.regressions.evidence import noted
from hil.cm.regressions.ktrace import SIW_WORK, Trace, runs_before
from hil.judge.timeline import Timeline
from hil.peer.builtin import CONNECTED, DUT_CONNECTS, PROMPT_S, RECV_HIL, SEND_HIL
from hil.peer.run import PeerRun, run_scenario
from hil.peer.scenario import parse

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

PEER_TERMINATE = parse(
    {
        "name": "regress-peer-terminate",
        "role": "active",
        "expectation": "peer_terminate",
        "description": "a TERMINATE from the peer on a connection in RDMA mode: the DUT closes",
        "steps": [
            *CONNECTED,
            {"step": "send", "frame": "fpdu", "opcode": "terminate"},
            {"step": "expect", "frame": "close", "within": PROMPT_S},
        ],
    },
    "hil.peer.regressions",
)


def peer_terminate(s: PairSides) -> PeerRun:
    """d219face9059: the passive side (the DUT) is sent a TERMINATE once connected."""
    return run_scenario(s, s.passive, PEER_TERMINATE)


def terminate_evidence(run: PeerRun) -> Timeline:
    """The DUT's timeline with what the case saw of its scenario: the DUT's MPA reply
    came (its QP in RDMA mode) and the peer's TERMINATE went after it."""
    record = run.result.record
    replied = next(
        (i for i, e in enumerate(record) if e["dir"] == "rx" and e["frame"] == "mpa_reply"), None
    )
    term = next(
        (
            i
            for i, e in enumerate(record)
            if e["dir"] == "tx" and e.get("fields", {}).get("opcode") == "terminate"
        ),
        None,
    )
    after = replied is not None and term is not None and term > replied
    return noted(
        run.timeline,
        {"dut_in_rdma_mode": replied is not None, "terminate_sent_in_rdma_mode": after},
        {"terminate_arrives_in_rdma_mode": after},  # the fix's window: TERM entered from RTS
    )


# The reply's first piece: part of its 20-byte header, so siw's header read returns
# -EAGAIN (siw_recv_mpa_rr, siw_cm.c:526-535); the rest 1.5 s later, well inside siw's
# 5 s MPAREP_TIMEOUT (siw_cm.h:75), whose expiry would answer the connect itself.
REPLY_PIECE = 8
REPLY_GAP_S = 1.5
# The SEND waits until the DUT has read the reply: siw reads 4 bytes past a reply's
# private data (siw_cm.c:583-591, the known finding of reply_and_fpdu_one_segment), so
# an FPDU that reached it first failed the connect (CONNECT_ERROR(-22) on the lab's
# 6.1.192 with the SEND 2.6 ms after the rest, 2026-12-06).
SEND_AFTER_S = 2.0
REPLY_IN_PIECES = parse(
    {
        "name": "regress-reply-in-pieces",
        "role": "passive",
        "expectation": "reply_in_pieces",
        "description": "the DUT connects; its MPA reply comes in two pieces 1.5 s apart",
        "steps": [
            *DUT_CONNECTS,
            {
                "step": "send",
                "frame": "mpa_reply",
                "rev": 2,
                "segments": [REPLY_PIECE],
                "gap": REPLY_GAP_S,
            },
            {"step": "sleep", "seconds": SEND_AFTER_S},
            SEND_HIL,
            RECV_HIL,
        ],
    },
    "hil.peer.regressions",
)


def reply_in_pieces(s: PairSides) -> tuple[PeerRun, Timeline]:
    """3056fc6c32e6: the active side (the DUT) gets its MPA reply in two pieces; the run,
    and the DUT's timeline with what it saw.  The window is a run of siw's connection
    work that read the first piece and made no upcall: two runs begun before the
    connection's ESTABLISHED reached rdma_cm, where a reply in one piece takes one (the
    event tracing of the debug lab; not observable on a kernel without it)."""
    with Trace(s.agent(s.active)) as trace:
        run = run_scenario(s, s.active, REPLY_IN_PIECES)
    reads = runs_before(trace.events(), SIW_WORK, "ESTABLISHED") if trace.available else None
    record = run.result.record
    asked = any(e["dir"] == "rx" and e["frame"] == "mpa_request" for e in record)
    replied = any(e["dir"] == "tx" and e["frame"] == "mpa_reply" for e in record)
    return run, noted(
        run.timeline,
        {"dut_sent_its_request": asked, "reply_sent_in_pieces": replied},
        {"reply_header_read_in_part": None if reads is None else reads >= 2},
    )
