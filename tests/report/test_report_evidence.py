"""Per-test evidence: counts before/after and kernel lines, attached; a failing host noted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hil.agent.types import KernelLog, KmsgRecord
from hil.errors import AgentError
from hil.inventory import load
from hil.report import attach
from hil.report.evidence import Evidence

INVENTORY = """
version: 1
hosts:
  lab-a:
    ssh: {host: 198.18.0.1}
    rnics: [{name: p0, netdev: eth1, driver: siw}]
  lab-b:
    ssh: {host: 198.18.0.2}
    rnics: [{name: p0, netdev: eth1, driver: siw}]
links:
  ab: {ends: ["lab-a:p0", "lab-b:p0"]}
"""


class Probe:
    """A host whose qp count grows by one during the test and logs a line."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.qp = 1

    def rdma_resources(
        self, types: Sequence[str] | None = None, timeout: float = 30
    ) -> dict[str, int]:
        if self.fail:
            raise AgentError("lab-b", "agent rdma_resources: no RDMA netlink")
        return {"cm_id": 0, "qp": self.qp, "cq": 2, "mr": 0}

    def kmsg_cursor(self) -> int:
        return 7

    def kmsg_read(self, cursor: int) -> KernelLog:
        return KernelLog((KmsgRecord(1, 0, 4, 0, "siw: QP 3 leaked"),), 2)

    def kmsg_close(self, cursor: int) -> None:
        pass


class Hosts:
    def __init__(self, probes: dict[str, Probe]) -> None:
        self.probes = probes

    def agent(self, name: str) -> Probe:
        return self.probes[name]


@pytest.fixture
def attached(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """What the helpers would hand to Allure, in order."""
    got: list[tuple[str, Any]] = []
    monkeypatch.setattr(attach, "attach_resources", lambda b, a: got.append(("res", (b, a))))
    monkeypatch.setattr(attach, "attach_kernel_log", lambda lines: got.append(("log", lines)))
    monkeypatch.setattr(attach, "note", lambda title, text: got.append((title, text)))
    return got


def test_counts_before_and_after_and_the_kernel_lines(
    tmp_path: Path, attached: list[tuple[str, Any]]
) -> None:
    (tmp_path / "lab.yaml").write_text(INVENTORY)
    pair = load(tmp_path / "lab.yaml").pair("ab")
    probes = {"lab-a": Probe(), "lab-b": Probe()}
    ev = Evidence.begin(Hosts(probes), pair)
    assert ev is not None
    probes["lab-a"].qp = 2
    ev.attach()
    (_, (before, after)), (_, lines) = attached
    assert before["lab-a"]["qp"] == 1 and after["lab-a"]["qp"] == 2
    assert after["lab-b"] == before["lab-b"]
    assert [str(x) if isinstance(x, str) else f"{x.host}: {x.line}" for x in lines] == [
        "lab-a: siw: QP 3 leaked",
        "lab-b: siw: QP 3 leaked",
        "lab-a: 2 kernel log records were overwritten before they were read",
        "lab-b: 2 kernel log records were overwritten before they were read",
    ]


def test_a_host_that_cannot_give_evidence_is_noted(
    tmp_path: Path, attached: list[tuple[str, Any]]
) -> None:
    (tmp_path / "lab.yaml").write_text(INVENTORY)
    pair = load(tmp_path / "lab.yaml").pair("ab")
    assert Evidence.begin(Hosts({"lab-a": Probe(), "lab-b": Probe(fail=True)}), pair) is None
    assert attached == [("evidence not taken", "lab-b: agent rdma_resources: no RDMA netlink")]
