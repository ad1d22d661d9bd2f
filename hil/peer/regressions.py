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
- :func:`malformed_requests` guards ea4f6f6c5357 "RDMA/siw: Fix endpoint/socket
  association handling" (CVE-2026-74345): a malformed MPA request that fails on
  siw_accept_newconn's immediate path (the request already queued when the listener's
  ACCEPT work runs, siw_cm.c:981-999, 6.1.192) takes the error path whose write into
  the freed endpoint the fix removed.  Each scenario run is traced on the DUT: the
  immediate path is one run of siw's CM work for the connection (the ACCEPT work that
  took the request and failed it), the later path a second one (the work that read the
  request).  A widened kernel (bench/reverts/widen/ea4f6f6c5357.patch) waits
  :data:`WIDEN_EA4F6F6C5357_MS` before its look, so that every at-once request is on
  that path, and says so in its kernel log.

The run is judged as the wire suite's are (the peer verdict against the
provider's expectation, :mod:`hil.judge.peerproviders`); :func:`terminate_evidence`
adds the ``reached_*`` metrics of :mod:`hil.cm.regressions.evidence`
to the DUT's timeline.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hil.cm.regressions.evidence import noted
from hil.cm.regressions.ktrace import SIW_WORK, Trace, runs, runs_before
from hil.cm.regressions.widen import Widen
from hil.judge.timeline import Timeline
from hil.peer.builtin import CONNECTED, DUT_CONNECTS, PROMPT_S, RECV_HIL, SCENARIOS, SEND_HIL
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


# ea4f6f6c5357's widened window: siw_accept_newconn waits this long before it looks for
# a queued request; the peer's request leaves right after its connect completes.
WIDEN_EA4F6F6C5357_MS = 50
MALFORMED_ROUNDS = 4  # unwidened, (5/6)**24: about one case in 80 still misses the window


def malformed_requests(
    s: PairSides, plan: tuple[tuple[str, int], ...]
) -> tuple[list[PeerRun], Timeline]:
    """ea4f6f6c5357: run each built-in scenario of ``plan`` (name, times) against the
    active side (the DUT), each traced there; the runs, and the last run's timeline with
    what the case saw: every run sent its request, and one of them failed on the
    immediate path (the widening's word on a widened kernel, else the trace; not
    observable on a kernel with neither).  Unwidened, the trace showed that path in
    about one run of six (1 of 6 on the fixed debug kernel, 2026-12-06): the plan is
    run again, up to MALFORMED_ROUNDS times, until a traced run took it."""
    dut = s.agent(s.active)
    done: list[PeerRun] = []
    paths: list[bool | None] = []
    with Widen.on(s, s.active, "siw", "ea4f6f6c5357", WIDEN_EA4F6F6C5357_MS) as widen:
        for _ in range(1 if widen.available else MALFORMED_ROUNDS):
            for name, times in plan:
                for _ in range(times):
                    with Trace(dut) as trace:
                        done.append(run_scenario(s, s.active, SCENARIOS[name]))
                    paths.append(runs(trace.events(), SIW_WORK) == 1 if trace.available else None)
            if None in paths or any(paths):
                break
    return done, malformed_evidence(done, paths, widen)


def malformed_evidence(done: list[PeerRun], paths: list[bool | None], widen: Widen) -> Timeline:
    """The last run's timeline with what :func:`malformed_requests` saw: ``paths`` says
    per run whether the trace showed the immediate path (None: no trace), ``widen`` the
    widening's markers (on a widened kernel they decide)."""
    sent = bool(done) and all(any(e["dir"] == "tx" for e in r.result.record) for r in done)
    traced = None if None in paths else any(paths)
    timeline = done[-1].timeline
    metrics = {**timeline.metrics, "widened_windows_opened": float(widen.opened)}
    if traced is not None:
        metrics["immediate_path_runs"] = float(sum(map(bool, paths)))
    return noted(
        replace(timeline, metrics=metrics),
        {"malformed_requests_sent": sent},
        {"request_failed_on_the_immediate_path": widen.window(traced)},
    )
