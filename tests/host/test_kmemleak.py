"""kmemleak's scan, report and clear, against a stand-in for its debugfs file.

The stand-in answers the agent's ``run`` the way /sys/kernel/debug/kmemleak
does: ``scan`` reports the leaks made so far, ``cat`` lists what is reported,
``clear`` greys it out.  The real file, on the debug lab's kernel, is read in
tests/lab/test_debug_lab.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hil.agent.types import CommandResult
from hil.errors import RemoteError
from hil.host import kmemleak

LEAK = (
    'unreferenced object 0xffff888004c2d000 (size 512):\n  comm "cmscript", pid 211\n'
    "  backtrace:\n    [<ffffffff81234567>] kmalloc_trace+0x26/0x60\n"
)


class Kmemleak:
    """The debugfs file's behaviour, for the commands hil.host.kmemleak runs."""

    def __init__(self, present: bool = True, refuse: str | None = None) -> None:
        self.present = present
        self.refuse = refuse  # a command the kernel refuses (kmemleak off after an error)
        self.leaked: list[str] = []  # made, not yet found by a scan
        self.reported: list[str] = []
        self.commands: list[str] = []

    def run(
        self, argv: Sequence[str], timeout: float = 60.0, input: str | None = None
    ) -> CommandResult:
        assert argv[-1] == kmemleak.PATH
        if not self.present:
            return CommandResult(tuple(argv), 1, "", f"cat: {kmemleak.PATH}: No such file")
        if argv[0].endswith("cat"):
            return CommandResult(tuple(argv), 0, "".join(self.reported), "")
        assert argv[0].endswith("tee") and input is not None
        self.commands.append(input)
        if input == self.refuse:
            return CommandResult(tuple(argv), 1, "", "tee: write error: Operation not permitted")
        if input == "scan":
            self.reported += self.leaked
            self.leaked = []
        elif input == "clear":
            self.reported = []
        return CommandResult(tuple(argv), 0, input, "")


def scan(file: Kmemleak, since: float = 0.0, now: float = 100.0) -> tuple[str, list[float]]:
    slept: list[float] = []
    report = kmemleak.scan(file, "lab0-a", since, clock=lambda: now, sleep=slept.append)
    return report, slept


def test_a_leak_is_reported_once_then_cleared() -> None:
    file = Kmemleak()
    file.leaked.append(LEAK)
    report, _ = scan(file)
    assert report == LEAK.strip()
    assert file.commands == ["scan", "clear"]
    assert scan(file)[0] == ""  # the next test's scan does not report it again


def test_no_leak_reports_nothing_and_clears_nothing() -> None:
    file = Kmemleak()
    assert scan(file)[0] == ""
    assert file.commands == ["scan"]


def test_the_scan_waits_until_the_tests_objects_are_old_enough_to_be_reported() -> None:
    # kmemleak skips objects younger than 5 s: scanning at once would blame the next test.
    assert scan(Kmemleak(), since=98.0, now=100.0)[1] == [pytest.approx(3.0)]
    assert scan(Kmemleak(), since=90.0, now=100.0)[1] == []


def test_a_refused_scan_names_the_host_and_what_to_look_at() -> None:
    with pytest.raises(RemoteError, match=r"^lab0-a: kmemleak scan .* failed: tee: write error"):
        scan(Kmemleak(refuse="scan"))


def test_a_kernel_without_kmemleak_is_told_apart() -> None:
    assert kmemleak.available(Kmemleak())
    assert not kmemleak.available(Kmemleak(present=False))
