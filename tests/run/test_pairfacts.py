"""What a pair run's tests read once: the pair's releases, its kmemleak hosts; skipped tests.

Behind hosts that answer ``uname -r`` and kmemleak's debugfs file
(tests/host/test_kmemleak.py's stand-in); the whole way runs on the debug
lab in tests/lab/test_debug_lab.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from hil.agent.types import CommandResult
from hil.errors import Unreachable
from hil.run.observer import Observer, Observers, TestInfo, TestResult
from hil.run.pairfacts import PairFacts
from hil.run.testrun import tell_skipped
from tests.host.test_kmemleak import Kmemleak


class Host(Kmemleak):
    def __init__(self, release: str | None, present: bool) -> None:
        super().__init__(present)
        self.release = release

    def run(
        self, argv: Sequence[str], timeout: float = 60.0, input: str | None = None
    ) -> CommandResult:
        if argv[0].endswith("uname"):
            if self.release is None:
                return CommandResult(tuple(argv), 1, "", "uname: boom")
            return CommandResult(tuple(argv), 0, self.release + "\n", "")
        return super().run(argv, timeout, input)


def _hosts(a: Host, b: Host) -> Any:
    agents = {"lab0-a": a, "lab0-b": b}
    return SimpleNamespace(agent=agents.__getitem__)


def _facts(a: Host, b: Host) -> PairFacts:
    return PairFacts(_hosts(a, b), ("lab0-a", "lab0-b"))


def test_one_release_for_a_pair_on_one_kernel_read_once_per_session() -> None:
    a = Host("6.12.57", True)
    facts = _facts(a, Host("6.12.57", True))
    assert facts.kernels() == ("6.12.57",)
    a.release = "changed"
    assert facts.kernels() == ("6.12.57",)


def test_a_mixed_pair_has_both_releases_and_an_unread_one_says_so() -> None:
    facts = _facts(Host("6.12.57", False), Host("6.1.0", False))
    assert facts.kernels() == ("6.1.0", "6.12.57")
    assert facts.kernel_by_host() == {"lab0-a": "6.12.57", "lab0-b": "6.1.0"}
    facts = _facts(Host("6.1.0", False), Host(None, False))
    assert facts.kernels() == ("6.1.0", "unknown on lab0-b")


def test_kmemleak_hosts_are_found_once_and_boots_leaks_cleared() -> None:
    a, b = Host("6.1.0", True), Host("6.1.0", False)
    a.reported.append("unreferenced object 0x1 (size 8): boot's own\n")
    facts = _facts(a, b)
    assert facts.kmemleak_hosts() == ("lab0-a",)
    assert (a.commands, a.reported) == (["clear"], [])
    assert facts.kmemleak_hosts() == ("lab0-a",)
    assert a.commands == ["clear"]


class Told(Observer):
    def __init__(self) -> None:
        self.started: list[TestInfo] = []
        self.finished: list[TestResult] = []

    def test_started(self, info: TestInfo) -> None:
        self.started.append(info)

    def test_finished(self, result: TestResult) -> None:
        self.finished.append(result)


def _run(hosts: Any) -> tuple[Any, Told]:
    told = Told()
    pair = SimpleNamespace(
        name="lab0", host_a=SimpleNamespace(name="lab0-a"), host_b=SimpleNamespace(name="lab0-b")
    )
    facts = PairFacts(hosts, ("lab0-a", "lab0-b"))
    return SimpleNamespace(pair=pair, facts=facts, observers=Observers([told])), told


def test_a_test_skipped_for_what_the_pair_lacks_is_told_with_its_kernel() -> None:
    # The first test of a session may be such a one: the releases are read for it.
    run, told = _run(_hosts(Host("6.12.57", False), Host("6.12.57", False)))
    tell_skipped(run, "test_x", "the pair lacks driver=iw_cxgb4")
    assert [i.kernels for i in told.started] == [("6.12.57",)]
    assert [r.outcome for r in told.finished] == ["skipped"]


def test_a_host_out_of_reach_leaves_a_skipped_test_without_kernel() -> None:
    def unreachable(name: str) -> Host:
        raise Unreachable(name, "ssh: connection refused")

    run, told = _run(SimpleNamespace(agent=unreachable))
    tell_skipped(run, "test_x", "the pair lacks driver=iw_cxgb4")
    assert [i.kernels for i in told.started] == [()]
