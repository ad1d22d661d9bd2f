"""A readiness check's result (:mod:`hil.host.readiness`): one host, one check, one status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# ok; info: recorded; warn: worth a look, a run stays sound; fail: a run would be untrustworthy.
Status = Literal["ok", "info", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "info", "warn", "fail")
# doctor: before setup, what setup sets is not a fault; setup: after it, it is.
Phase = Literal["doctor", "setup"]


@dataclass(frozen=True)
class Finding:
    """One check's result on one host (or pair): what was seen, expected, and the fix.

    ``port`` names the RNIC port where the host has more than one.
    """

    check: str
    host: str
    status: Status
    seen: str
    expected: str = ""
    fix: str = ""
    port: str = ""

    @property
    def where(self) -> str:
        """``host``, or ``host:port`` on a host with several ports."""
        return f"{self.host}:{self.port}" if self.port else self.host

    def line(self) -> str:
        """One line: ``host check: seen (expected ...); fix``."""
        text = f"{self.where} {self.check}: {self.seen}"
        if self.expected:
            text += f" (expected {self.expected})"
        return text + (f"; {self.fix}" if self.fix else "")
