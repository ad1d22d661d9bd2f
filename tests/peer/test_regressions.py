"""The regression cases the reference peer plays (hil/peer/regressions.py): what they count
as their scenario having happened, from peer records and DUT events made up here; the
cases themselves run in suites/test_regressions.py."""

from __future__ import annotations

from typing import Any

from hil.agent.peerrun import PeerResult
from hil.cm.regressions.evidence import missing, unobservable
from hil.cm.regressions.widen import MARKER, Widen
from hil.judge.peerproviders import expect
from hil.judge.timeline import Event, Timeline
from hil.peer.judge import Observed, judge
from hil.peer.regressions import PEER_TERMINATE, malformed_evidence, terminate_evidence
from hil.peer.run import PeerRun


def peer_run(record: list[dict[str, Any]], *events: Event) -> PeerRun:
    """A reference-peer run with ``record`` on the peer and ``events`` on the DUT (side a)."""
    tl = Timeline("peer-x", "siw", ("ha", "hb"), events=events)
    seen = Observed(tuple(record), (), ())
    verdict = judge("x", "peer_terminate", "siw", seen)
    result = PeerResult(record, None, None, "10.0.0.2:5", "10.0.0.1:6")  # type: ignore[arg-type]
    return PeerRun(PEER_TERMINATE, "ha", "hb", result, tl, verdict, seen)


def entry(direction: str, frame: str, **fields: Any) -> dict[str, Any]:
    return {"t_ns": 0, "dir": direction, "frame": frame, "fields": fields}


def test_a_terminate_counts_only_once_the_duts_reply_came() -> None:
    term = entry("tx", "fpdu", opcode="terminate")
    after = [entry("tx", "mpa_request"), entry("rx", "mpa_reply"), term]
    assert missing(terminate_evidence(peer_run(after))) is None
    before = [entry("tx", "mpa_request"), term, entry("rx", "mpa_reply")]
    assert "terminate sent in rdma mode" in (missing(terminate_evidence(peer_run(before))) or "")
    no_reply = missing(terminate_evidence(peer_run([entry("tx", "mpa_request"), term])))
    assert (
        no_reply == "scenario not reached (peer-x): dut in rdma mode, terminate sent in rdma mode"
    )


def test_iw_cxgb4_closes_abortively_after_a_peers_terminate() -> None:
    got = expect("iw_cxgb4", "peer_terminate")
    assert (got.terminate, got.close, got.cm_events) == (None, "rst", ("disconnected",))
    assert any("cm.c:3024-3046" in s for s in got.sources)


def widen(available: bool, opened: int) -> Widen:
    """ea4f6f6c5357's widening as a run left it: on a widened kernel or not, its markers."""
    w = Widen(None, "siw", "ea4f6f6c5357", 50)  # type: ignore[arg-type]  # never entered
    w.available, w.said = available, [MARKER.format(fix="ea4f6f6c5357")] * opened
    return w


def test_a_malformed_request_case_needs_one_request_failed_on_the_immediate_path() -> None:
    sent = [peer_run([entry("tx", "mpa_request")]) for _ in range(3)]
    assert missing(malformed_evidence(sent, [False, True, False], widen(False, 0))) is None
    later = malformed_evidence(sent, [False, False, False], widen(False, 0))
    assert missing(later) == "window not reached (peer-x): request failed on the immediate path"
    # A widened kernel's markers decide, whatever the trace says.
    assert missing(malformed_evidence(sent, [True] * 3, widen(True, 0))) is not None
    assert missing(malformed_evidence(sent, [None] * 3, widen(True, 2))) is None
    blind = malformed_evidence(sent, [None, True, None], widen(False, 0))
    assert missing(blind) is None and "request failed on the immediate path" in (
        unobservable(blind) or ""
    )
    silent = [*sent, peer_run([])]
    assert "malformed requests sent" in (
        missing(malformed_evidence(silent, [True] * 4, widen(False, 0))) or ""
    )
