"""attach_peer_run: a peer scenario's verdict and record as the report's attachments
(allure replaced at its boundary by a recorder of its ``attach`` calls)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hil.agent.peerrun import PeerResult
from hil.judge.timeline import Timeline
from hil.peer.builtin import SCENARIOS
from hil.peer.judge import Observed, judge
from hil.peer.run import PeerRun
from hil.report import attach


class Recorder:
    """allure's ``attach`` and ``attachment_type``, recording what was attached."""

    class attachment_type:  # noqa: N801 -- allure's name
        TEXT, JSON, SVG = "text", "json", "svg"

    def __init__(self) -> None:
        self.attached: dict[str, tuple[str, Any]] = {}

    def attach(self, body: str, name: str, attachment_type: str) -> None:
        self.attached[name] = (attachment_type, body)


def test_the_verdict_and_the_record_are_attached(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(attach, "allure", recorder)
    record: list[Any] = [
        {"t_ns": 1, "dir": "tx", "frame": "mpa_request", "fields": {"key": "00"}},
        {"t_ns": 9, "dir": "rx", "frame": "fin"},
    ]
    result = PeerResult(record, None, None, "198.18.0.2:40000", "198.18.0.1:20000")
    seen = Observed(tuple(record), ())
    verdict = judge("mpa-bad-key", "wrong_key", "siw", seen)
    run = PeerRun(
        SCENARIOS["mpa-bad-key"],
        "lab-0",
        "lab-1",
        result,
        Timeline("x", "siw", ("a", "b")),
        verdict,
        seen,
    )
    attach.attach_peer_run(run)
    kind, text = recorder.attached["peer verdict"]
    assert kind == "text" and text == "peer scenario mpa-bad-key against siw: as expected"
    kind, body = recorder.attached["peer record"]
    data = json.loads(body)
    assert kind == "json" and data["record"] == record
    assert (data["scenario"], data["dut"], data["peer"]) == ("mpa-bad-key", "lab-0", "lab-1")
