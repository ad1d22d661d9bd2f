"""What a regression test's failure on a revert kernel was: the kind of report.

Kept apart from :mod:`run` so the reading can be tested without a lab
(tests/bench/test_reverts_reports.py).  The kinds follow what the after-test
checks and the layered timeouts write in a failure (hil/judge/expectations.py
KERNEL_REPORTS for the kernel log's lines, hil/timeouts.py for "timeout (LAYER
layer, ...)", hil/report/crash.py for "host crashed", the contract judge's
"contract FAILED", hil/cm/regressions/evidence.py for "window not reached" and for
"kernel trace (": the trace showed what the fix rules out).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

# (kind, pattern searched in a failure's text), first match wins: a kernel report first
# (it is the bug's own evidence, whatever else the run missed), then a hang, then a
# window not reached (which says nothing of the bug: the run never came near it), the
# contract last (its violations may follow from any of these).
KINDS: tuple[tuple[str, str], ...] = (
    ("host crashed", r"host crashed"),
    ("KASAN", r"KASAN"),
    ("refcount", r"refcount_t: "),
    ("lockdep", r"lockdep|possible (?:circular|recursive) locking|lock inversion"),
    ("kernel report", r"WARNING|BUG|Oops|general protection fault|UBSAN: |rcu: INFO: "),
    ("hang", r"timeout \(\w+ layer|ran over \d+ s|blocked for more than"),
    ("kernel trace", r"kernel trace \("),
    ("window not reached", r"(?:window|scenario) not reached"),
    ("contract violation", r"contract FAILED|contract "),
)


def kind(failure: str) -> str:
    """The kind of report a failure's text shows (``other`` when none of :data:`KINDS`)."""
    for name, pattern in KINDS:
        if re.search(pattern, failure):
            return name
    return "other"


def counts_as_failed(kinds: list[str]) -> bool:
    """Whether a revert kernel failed its test: some failure other than a window not
    reached (a run that missed its window proves nothing either way)."""
    return any(k != "window not reached" for k in kinds)


def junit_reports(path: Path) -> tuple[list[str], list[str]]:
    """The full texts of the failures and errors in a JUnit report, and the reasons of
    its skips (a window not observable on the kernel: no verdict either way)."""
    failures: list[str] = []
    skips: list[str] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        for e in case:
            text = f"{e.get('message') or ''}\n{e.text or ''}".strip()
            if e.tag in ("failure", "error"):
                failures.append(text)
            elif e.tag == "skipped":
                skips.append(text.splitlines()[0] if text else "skipped")
    return failures, skips
