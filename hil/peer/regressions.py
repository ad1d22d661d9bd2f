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

The run is judged as the wire suite's are (the peer verdict against the
provider's expectation, :mod:`hil.judge.peerproviders`); :func:`terminate_evidence`
adds the ``reached_*`` metrics of :mod:`hil.cm.regressions.evidence`
to the DUT's timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm.regressions.evidence import noted
from hil.judge.timeline import Timeline
from hil.peer.builtin import CONNECTED, PROMPT_S
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
