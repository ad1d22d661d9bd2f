"""bench/benchmain.py: what stops a benchmark ends as one line naming it and an exit code."""

from __future__ import annotations

import os
import signal

import pytest
from benchmod import BENCH, load_bench

from hil.errors import EXIT_INFRA, EXIT_INPUT, InputError, LabError

benchmain = load_bench("benchmain", "benchmain.py")


def _raises(e: BaseException) -> int:
    raise e


@pytest.mark.parametrize(
    ("stop", "code", "said"),
    [
        (
            InputError("--runs must be at least 1, not 0"),
            EXIT_INPUT,
            "bm: --runs must be at least 1, not 0",
        ),
        (LabError("lab5 does not answer"), EXIT_INFRA, "bm: LabError: lab5 does not answer"),
        (KeyboardInterrupt(), EXIT_INFRA, "bm: interrupted"),
    ],
)
def test_what_stopped_it_is_one_line_and_its_code(
    stop: BaseException, code: int, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert benchmain.run("bm", lambda: _raises(stop)) == code
    assert capsys.readouterr().err == said + "\n"


def test_sigterm_unwinds_the_benchmark_as_an_interrupt(capsys: pytest.CaptureFixture[str]) -> None:
    unwound = []

    def main() -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before the next line
            return 0
        finally:
            unwound.append(True)  # a PairRun's restore and release would run here

    before = signal.getsignal(signal.SIGTERM)
    assert benchmain.run("bm", main) == EXIT_INFRA
    assert unwound == [True] and capsys.readouterr().err == "bm: interrupted\n"
    assert signal.getsignal(signal.SIGTERM) == before  # put back


def test_a_benchmark_that_ends_gives_its_own_code() -> None:
    assert benchmain.run("bm", lambda: 4) == 4


def test_every_benchmark_on_hosts_ends_through_it() -> None:
    # What reserves or drives hosts: a pair run, a lab, an agent, a reservation store.
    # labrun.py is a library; run_all.py reports each part's error itself and goes on.
    uses = ("PairRun", "from hil.lab", "from hil.agent import Agent", "open_store")
    scripts = sorted(BENCH.glob("*.py"))
    on_hosts = [p for p in scripts if any(u in p.read_text() for u in uses)]
    lacking = [
        p.name
        for p in on_hosts
        if "benchmain.run(" not in p.read_text() and p.name not in ("labrun.py", "run_all.py")
    ]
    assert on_hosts and lacking == []
