"""The reference peer against siw on the virtual lab (marker ``lab``): the DUT on guest
A listens with the normal CM endpoint, the peer on guest B connects with MPA v2 and
sends one SEND, which the DUT's posted receive gets byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
from cmlab import CMPair

from hil.agent.peerrun import run_peer
from hil.agent.remote.cm.payload import LAST_SLICE, pattern
from hil.cm import steps

pytestmark = pytest.mark.lab

SEED = 26


def test_a_siw_listener_receives_the_peers_send_after_an_mpa_v2_handshake(
    cm_pair: CMPair,
) -> None:
    s = cm_pair.run.session()
    data = pattern(SEED, LAST_SLICE)  # what last_receives checks for one SEND (payload.py)
    scenario: list[dict[str, Any]] = [
        {"step": "send", "frame": "mpa_request", "rev": 2, "c": 1, "ird": 1, "ord": 1},
        {"step": "expect", "frame": "mpa_reply", "fields": {"r": 0, "rev": 2}, "within": 15},
        # Apart from the reply and from the FIN: this test is about the peer's framing.
        # Sent at once, in one fresh-clone .ci/run, siw flushed the posted receive
        # (status 5) instead of placing the SEND. Why is not known yet: an FPDU right
        # behind a passive siw's own reply, or the FIN right behind the FPDU.
        {"step": "sleep", "seconds": 0.5},
        {"step": "send", "frame": "fpdu", "opcode": "send", "payload": data.hex()},
        {"step": "sleep", "seconds": 0.5},
        {"step": "send", "frame": "fin"},
        {"step": "expect", "frame": "close", "within": 15},
    ]
    with s.recording("peer-send") as rec:
        listener = steps.listen(rec, "a", auto="accept")  # the worker accepts, receives posted
        got = run_peer(
            s.agent("b"), "active", s.address("a"), listener.port, scenario, 60, src=s.address("b")
        )
        assert got.error is None and got.unmet is None, got
        req = steps.expect(listener.ep, "CONNECT_REQUEST", None, "the peer's MPA request")
        received = listener.ep.last_receives(req.id, count=1, seed=SEED, wait=15)
    reply = next(e for e in got.record if e["frame"] == "mpa_reply")
    assert "error" not in reply["fields"], reply
    # RFC 5044 7.1: the peer asked for CRCs (C=1), so both ends use them; siw checked
    # the peer's CRC32c, or it would have answered with a TERMINATE (siw_get_trailer).
    assert (reply["fields"]["c"], reply["fields"]["ird"], reply["fields"]["ord"]) == (1, 1, 1)
    value = received.value
    assert value["error"] is None, value
    assert [(c["status"], c["byte_len"]) for c in value["completions"]] == [(0, LAST_SLICE)]
    assert all(c["ok"] for c in value["checks"]), value["checks"]
    assert not [e for e in got.record if e["frame"] == "fpdu" and e["dir"] == "rx"], got.record
