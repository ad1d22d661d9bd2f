"""What the kernel plugin reads once per session: the pair's releases, its kmemleak hosts.

Behind a stand-in for the session's PairRun whose hosts answer ``uname -r``
and kmemleak's debugfs file (tests/host/test_kmemleak.py's stand-in); the
whole fixture runs on the debug lab in tests/lab/test_debug_lab.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from hil.agent.types import CommandResult
from hil.errors import Unreachable
from hil.plugin import kernel
from hil.report import attach
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


def _run(a: Host, b: Host) -> Any:
    agents = {"lab0-a": a, "lab0-b": b}
    return SimpleNamespace(
        pair=SimpleNamespace(hosts=[SimpleNamespace(name=n) for n in agents]),
        hosts=SimpleNamespace(agent=agents.__getitem__),
    )


def _config() -> Any:
    return SimpleNamespace(stash=pytest.Stash())


def test_one_release_for_a_pair_on_one_kernel_read_once_per_session() -> None:
    config = _config()
    run = _run(Host("6.12.57", True), Host("6.12.57", True))
    assert kernel.releases(config, run) == ("6.12.57",)
    run.hosts.agent("lab0-a").release = "changed"
    assert kernel.releases(config, run) == ("6.12.57",)


def test_a_mixed_pair_has_both_releases_and_an_unread_one_says_so() -> None:
    run = _run(Host("6.1.0", False), Host(None, False))
    assert kernel.releases(_config(), run) == ("6.1.0", "unknown on lab0-b")


def test_kmemleak_hosts_are_found_once_and_boots_leaks_cleared() -> None:
    a, b = Host("6.1.0", True), Host("6.1.0", False)
    a.reported.append("unreferenced object 0x1 (size 8): boot's own\n")
    config = _config()
    assert kernel._kmemleak_hosts(config, _run(a, b)) == ("lab0-a",)
    assert (a.commands, a.reported) == (["clear"], [])
    assert kernel._kmemleak_hosts(config, _run(a, b)) == ("lab0-a",)
    assert a.commands == ["clear"]


def _labels(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    monkeypatch.setattr(attach, "label", lambda name, value: got.append((name, value)))
    return got


def test_a_test_skipped_for_what_the_pair_lacks_is_labelled_with_its_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first test of a session may be such a one: the releases are read for it.
    labels = _labels(monkeypatch)
    kernel.label_skipped(_config(), _run(Host("6.12.57", False), Host("6.12.57", False)))
    assert labels == [("kernel", "6.12.57")]


def test_a_host_out_of_reach_leaves_a_skipped_test_unlabelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreachable(name: str) -> Host:
        raise Unreachable(name, "ssh: connection refused")

    labels = _labels(monkeypatch)
    run = _run(Host("6.1.0", False), Host("6.1.0", False))
    run.hosts.agent = unreachable
    kernel.label_skipped(_config(), run)
    assert labels == []
