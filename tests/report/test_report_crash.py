"""The report's side of a crashed host: its failure message and its Allure category."""

from __future__ import annotations

import pytest

from hil.host.liveness import Crash
from hil.report.categories import HOST_CRASHED, INFRASTRUCTURE, KNOWN_FLAKY, category_of


def message(crash: Crash, test: str) -> str:
    return crash.message(test)


PANIC = Crash("lab-1", "kernel_crash", "Kernel panic - not syncing: sysrq triggered crash")
SILENT = Crash("lab-0", "unreachable", "no answer from its agent or SSH for 61 s")


def test_the_message_names_host_kind_test_and_what_was_seen() -> None:
    assert message(PANIC, "suites/x.py::test_y") == (
        "hil: HostCrashed: lab-1: host crashed (kernel crash) during suites/x.py::test_y: "
        "Kernel panic - not syncing: sysrq triggered crash"
    )
    assert "(stopped answering)" in message(SILENT, "t")


@pytest.mark.parametrize("crash", [PANIC, SILENT])
@pytest.mark.parametrize("status", ["failed", "broken"])
def test_a_crashed_host_has_its_own_category(crash: Crash, status: str) -> None:
    text = f"Failed: {message(crash, 'suites/x.py::test_y')}"
    assert category_of(status, text) == HOST_CRASHED
    # Whatever else the message holds (a verdict the test had printed, say).
    assert category_of(status, f"{text}\ncontract FAILED: x") == HOST_CRASHED


def test_other_lab_errors_stay_lab_errors_and_known_flaky_stays_apart() -> None:
    assert category_of("failed", "Failed: hil: SSHError: lab-1: refused") == INFRASTRUCTURE
    known = f"known flaky: siw race (#4)\nFailed: {message(PANIC, 't')}"
    assert category_of("failed", known) == KNOWN_FLAKY
