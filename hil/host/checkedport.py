"""One RNIC port being checked: the findings its checks add, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hil.host.findings import Finding, Phase, Status

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.inventory.model import Host, Rnic


@dataclass
class CheckedPort:
    """One port being checked: where findings go."""

    agent: Agent
    host: Host
    rnic: Rnic
    phase: Phase
    findings: list[Finding] = field(default_factory=list)

    def add(self, check: str, status: Status, seen: str, expected: str = "", fix: str = "") -> None:
        """A finding of ``check`` on this port (named when the host has several)."""
        port = self.rnic.name if len(self.host.rnics) > 1 else ""
        self.findings.append(Finding(check, self.host.name, status, seen, expected, fix, port))

    def during_setup(self, doctor: Status) -> Status:
        """``fail`` once setup has configured the port; ``doctor`` before."""
        return "fail" if self.phase == "setup" else doctor
