"""The lab pipelines: run suites into Allure results, generate the report, keep the trend.

``ci/nightly`` and ``ci/run-suite`` call this after they have an inventory
(a lab file, or the virtual lab's)::

    python -m hil.report.pipeline --reports artifacts/reports/nightly --keep 14 \\
        --inventory lab.yaml [--pair P | --require K=V ...] suites [-- pytest args]

It prints a summary (``hil report: 12 passed, 1 failed, 0 broken, 2 skipped;
report artifacts/.../report/index.html; exit 1``, a line on known-flaky
failures, one on each known kernel finding the run's hosts logged, and the
tests that flipped between pass and fail in the last
``--flaky-nights`` runs, :mod:`hil.report.flaky`), the metrics line (how many
series the run recorded, where their trend page is: :mod:`hil.report.trend`),
the metrics past a threshold (:mod:`hil.report.metrics_flags`) and the pair's drift
from its last ``--drift-nights`` nights (:mod:`hil.report.drift`), writes it to
``summary.txt`` in the report directory, and exits 0 when every test passed
(or was skipped, or failed but is in the quarantine list), 1 when tests
failed or a drift passed its fail threshold, 3 when the run could not judge the
product (lab or infrastructure errors only, no tests, pytest itself failed, the report
could not be generated, the run overran its ``--timeout``: :mod:`hil.report.bounded`).

With ``--fuzz-cases N`` it runs ``hil peer fuzz`` after the suites and before the
report is generated (:func:`run_fuzz`), within what ``--timeout`` left, its findings
written as results into the same results directory (:mod:`hil.report.fuzz`,
category **Fuzz findings**): a finding fails the run (exit 1), a fuzz run that
could not run its cases is a lab error (exit 3 unless tests failed).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from hil import tools
from hil.errors import (
    EXIT_INFRA,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_VIOLATION,
    HilError,
    InputError,
    LabError,
)
from hil.inventory import loader
from hil.inventory.thresholds import Threshold, parse_cli
from hil.report import (
    drift,
    drift_history,
    flaky,
    history,
    metrics_flags,
    metrics_history,
    results,
    trend,
)
from hil.report.bounded import Finished, run_bounded
from hil.report.categories import INFRASTRUCTURE, KNOWN_FLAKY
from hil.report.environment import read_properties, write_properties
from hil.report.metrics_history import SeriesStats
from hil.report.plugin import METRICS_GLOB
from hil.timeouts import DEFAULTS, TERM_GRACE_S, session_bound

EXIT_TESTS_FAILED = 1
# ci/install puts the npm package into the repository's .tools (hil/tools.py has the path).
DEFAULT_ALLURE = Path(__file__).resolve().parents[2] / str(tools.tool("allure").path)
GENERATE_TIMEOUT = 600.0
# The generator is a short-lived JVM: with C1 alone and the serial collector it spent
# 40-45% less CPU and 10-30% less time on a 154-file result set and on a 360-test one
# (`ALLURE_OPTS=... allure generate`, 2 cores, 2026-12-06; docs/notes/lab-speed.md).
# Used only when neither JAVA_OPTS nor ALLURE_OPTS is set, which the script reads.
JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"
# pytest's own exit codes: 0 ok, 1 tests failed, 2 interrupted, 3 internal error,
# 4 usage error, 5 no tests collected.
PYTEST_TESTS_FAILED = 1


def generate(
    results: Path, report: Path, allure: Path = DEFAULT_ALLURE, timeout: float = GENERATE_TIMEOUT
) -> None:
    """Run the Allure 2 generator on ``results`` into ``report``; LabError on failure."""
    if not os.access(allure, os.X_OK):
        raise LabError(
            f"no Allure generator at {allure}: run ci/install "
            f"(it installs allure-commandline into .tools)"
        )
    argv = [str(allure), "generate", str(results), "-o", str(report), "--clean"]
    env = dict(os.environ)
    if not env.get("JAVA_OPTS") and not env.get("ALLURE_OPTS"):
        env["ALLURE_OPTS"] = JVM_OPTS
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise LabError(f"allure generate did not finish within {timeout:g}s") from None
    if done.returncode != 0 or not (report / "index.html").is_file():
        tail = (done.stderr or done.stdout).strip()[-500:]
        raise LabError(f"allure generate exited {done.returncode}: {tail}")


def exit_status(results_dir: Path, pytest_rc: int) -> int:
    """0 all passed, 1 tests failed, 3 only lab/infrastructure errors or pytest broke.

    A known-flaky test's failure (its own category) is counted and shown, but is not a
    test failure of the run.
    """
    if pytest_rc not in (0, PYTEST_TESTS_FAILED):
        return EXIT_INFRA
    # The categories the plugin wrote know every HilError class the run imported.
    failing = [r for r in results.read(results_dir) if r.failing]
    counted = [r for r in failing if r.category != KNOWN_FLAKY]
    if not counted:
        return EXIT_OK if pytest_rc == 0 or failing else EXIT_TESTS_FAILED
    if all(r.category == INFRASTRUCTURE for r in counted):
        return EXIT_INFRA
    return EXIT_TESTS_FAILED


def run_pytest(run: history.Run, args: argparse.Namespace) -> Finished:
    """pytest on the suites into the run's results, within the nightly layer's bound
    (``args.timeout``; the session layer inside it ends the tests first)."""
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *args.suites,
        f"--alluredir={run.results}",
        f"--hil-pcap={args.pcap}",
        "-p",
        "no:cacheprovider",
    ]
    if args.inventory:
        argv.append(f"--hil-inventory={args.inventory}")
    if args.pair:
        argv.append(f"--hil-pair={args.pair}")
    argv += [f"--hil-require={r}" for r in args.require]
    bound = args.timeout or None
    if bound and not any(a.startswith("--hil-timeout-session") for a in args.pytest_args):
        argv.append(f"--hil-timeout-session={session_bound(bound):g}")
    env = {**os.environ, "HIL_BUILD_ORDER": str(run.order)}
    print(f"hil report: run {run.order}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    what = f"pytest on {' '.join(args.suites)} (run {run.order})"
    return run_bounded([*argv, *args.pytest_args], env, bound, what)


def fuzz_pair(args: argparse.Namespace) -> str:
    """The pair to fuzz: ``--pair``, else the inventory's first; InputError when it has none
    (checked before the suites run)."""
    pairs = [args.pair] if args.pair else [p.name for p in loader.load(args.inventory).pairs()]
    if not pairs:
        raise InputError(f"--fuzz-cases: {args.inventory} has no pair to fuzz (no links:)")
    return pairs[0]


def fuzz_argv(args: argparse.Namespace, run: history.Run) -> list[str]:
    """``hil peer fuzz`` on ``args.fuzz_pair`` (:func:`fuzz_pair`), ``--fuzz-cases`` cases
    of ``--fuzz-seed``, findings saved in REPORTS/fuzz and written as results into the
    run's results directory."""
    pair = args.fuzz_pair
    return [
        *(sys.executable, "-m", "hil", "--inventory", args.inventory),
        *("peer", "fuzz", pair, "--seed", str(args.fuzz_seed), "--cases", str(args.fuzz_cases)),
        *("--out", str(Path(args.reports) / "fuzz"), "--alluredir", str(run.results)),
        *_agent_bound(args.pytest_args),
    ]


def _agent_bound(pytest_args: list[str]) -> list[str]:
    """``--timeout-agent S`` when the suites got ``--hil-timeout-agent S`` (ci/nightly's
    debug lab: a cold agent there needs more than the default), so the fuzz gets it too."""
    bound = ""
    for i, arg in enumerate(pytest_args):
        if arg == "--hil-timeout-agent" and i + 1 < len(pytest_args):
            bound = pytest_args[i + 1]
        elif arg.startswith("--hil-timeout-agent="):
            bound = arg.split("=", 1)[1]
    return ["--timeout-agent", bound] if bound else []


def run_fuzz(run: history.Run, args: argparse.Namespace, left: float | None) -> Finished:
    """The fuzz run within ``left`` seconds (None: unbounded); past it SIGINT, on which
    ``hil peer fuzz`` restores the pair and releases its lease."""
    argv = fuzz_argv(args, run)
    print(f"hil report: fuzz: {' '.join(argv[3:])}", file=sys.stderr, flush=True)
    return run_bounded(argv, os.environ, left, "hil peer fuzz", stop=signal.SIGINT)


def with_fuzz(status: int, fuzz: Finished | None) -> int:
    """The run's exit status with the fuzz run's folded in: findings are test failures,
    any other trouble a lab error unless tests failed (exit 1 wins over 3)."""
    if fuzz is None or (fuzz.returncode == EXIT_OK and not fuzz.expired):
        return status
    if fuzz.returncode == EXIT_VIOLATION:
        return EXIT_TESTS_FAILED
    return status if status == EXIT_TESTS_FAILED else EXIT_INFRA


def _fuzz_after(
    run: history.Run, args: argparse.Namespace, finished: Finished, began: float
) -> Finished | None:
    """The fuzz run, when asked for and the suites left time for it."""
    if not args.fuzz_cases or finished.expired:
        return None
    left = args.timeout - (time.monotonic() - began) if args.timeout else None
    if left is not None and left <= 0:
        return Finished(EXIT_INFRA, "the suites used the whole --timeout: no fuzz run")
    fuzz = run_fuzz(run, args, left)
    if fuzz.expired:
        print(f"hil report: {fuzz.expired}", file=sys.stderr, flush=True)
    return fuzz


def with_drift(status: int, found: drift.Drift) -> int:
    """The run's exit status with the drift check folded in: a change past its fail
    threshold is a behaviour of the product that changed, a test failure (1 wins over 3)."""
    return EXIT_TESTS_FAILED if found.fails else status


def check_drift(
    run: history.Run,
    args: argparse.Namespace,
    night: str,
    env: dict[str, str],
    series: Mapping[str, SeriesStats],
) -> tuple[drift.Drift, list[str]]:
    """Tonight's pair against its last ``--drift-nights`` nights (REPORTS/drift), tonight
    recorded; the drift and the summary's lines on it."""
    tonight = drift_history.record_of(run.order, night, run.results, env, series)
    found, skipped = drift_history.check(
        Path(args.reports), tonight, drift.limits_of(args.drift_threshold), args.drift_nights
    )
    return found, [*drift.summary_lines(found), *drift_history.skipped_lines(skipped)]


def pipeline(args: argparse.Namespace) -> int:
    """One run: results (the suites', then the fuzz findings'), history, report, metrics
    trend, flaky tests; prints the summary."""
    reports = Path(args.reports)
    run = history.new_run(reports)
    began = time.monotonic()
    finished = run_pytest(run, args)
    if finished.expired:
        print(f"hil report: {finished.expired}", file=sys.stderr, flush=True)
    fuzz = _fuzz_after(run, args, finished, began)
    env = read_properties(run.results / "environment.properties")  # before our own lines
    recorded = metrics_history.read_metric_files(sorted(run.results.glob(METRICS_GLOB)))
    nights = metrics_history.record(reports, run.order, recorded, args.metric_nights, None)
    flags, unmatched = metrics_flags.check(nights, args.thresholds)
    tests = results.read(run.results)
    # Enough nights for the flaky window even when fewer runs are kept.
    tonight = flaky.outcomes_of(run.order, tests)
    outcomes = flaky.record(reports, tonight, max(args.keep, args.flaky_nights))
    drifted, drift_lines = check_drift(run, args, flaky.night_of(tests), env, nights[-1].series)
    ranked = flaky.rank(outcomes, args.flaky_nights)
    flaky_nights = len(flaky.window(outcomes, args.flaky_nights))
    write_properties(run.results, metrics_history.properties(nights), where="end")
    write_properties(run.results, flaky.properties(ranked, flaky_nights), where="top")
    write_properties(run.results, drift.properties(drifted), where="top")
    generate(run.results, run.report, Path(args.allure))
    # After generate: its --clean empties the report directory.
    page = trend.write_page(run.report, nights, flags, args.thresholds)
    history.finish(reports, run, args.keep)
    # A run cut short by its bound did not judge everything: a lab/infrastructure outcome.
    status = EXIT_INFRA if finished.expired else exit_status(run.results, finished.returncode)
    status = with_drift(with_fuzz(status, fuzz), drifted)
    summary = history.summary(run.report)
    lines = [
        f"{summary.line()}; report {run.report / 'index.html'}; exit {status}",
        *filter(None, [flaky.known_flaky_line(tests)]),
        *flaky.known_kernel_lines(tests),
        *flaky.summary_lines(ranked, flaky_nights),
        f"metrics: {len(nights[-1].series)} series recorded; trends {page}",
        *metrics_flags.summary_lines(flags, unmatched, len(args.thresholds)),
        *drift_lines,
        *([fuzz_line(fuzz, args)] if fuzz else []),
    ]
    (run.report / flaky.SUMMARY_FILE).write_text("".join(f"{line}\n" for line in lines))
    print("".join(f"hil report: {line}\n" for line in lines), end="")
    return status


def fuzz_line(fuzz: Finished, args: argparse.Namespace) -> str:
    """What the fuzz run gave, for the summary."""
    what = {EXIT_OK: "no finding", EXIT_VIOLATION: "findings (category Fuzz findings)"}
    how = fuzz.expired or what.get(
        fuzz.returncode, f"could not run its cases (exit {fuzz.returncode})"
    )
    saved = Path(args.reports) / "fuzz"
    return f"fuzz: seed {args.fuzz_seed}, {args.fuzz_cases} cases: {how}; replay files in {saved}"


def thresholds_of(inventory: str | None, specs: list[str]) -> list[Threshold]:
    """The inventory's ``thresholds:`` and those of ``--threshold``."""
    found = list(loader.load(inventory).thresholds) if inventory else []
    return found + [parse_cli(spec) for spec in specs]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hil.report.pipeline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "suites", nargs="*", default=["suites"], help="test files or directories (default: suites)"
    )
    p.add_argument(
        "--reports",
        default="artifacts/reports/nightly",
        help="directory of the kept runs (default artifacts/reports/nightly)",
    )
    p.add_argument("--keep", type=int, default=14, help="runs kept for the trend (default 14)")
    p.add_argument(
        "--flaky-nights",
        type=int,
        default=14,
        metavar="N",
        help="list tests that flipped between pass and fail in the last N runs (default 14)",
    )
    p.add_argument(
        "--inventory",
        default=os.environ.get("HIL_INVENTORY"),
        help="lab inventory (env HIL_INVENTORY)",
    )
    p.add_argument("--pair", help="reserve this pair")
    p.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="K=V",
        help="reserve a pair meeting this (repeatable)",
    )
    p.add_argument(
        "--pcap",
        choices=("failed", "all", "none"),
        default="failed",
        help="packet captures to keep (default: of failed tests)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULTS.nightly_s,
        metavar="SECONDS",
        help="the nightly layer: bound of the pytest run; past it SIGTERM (the session "
        f"restores the pair), SIGKILL {TERM_GRACE_S:g} s later; the session layer stops the "
        f"tests earlier (default {DEFAULTS.nightly_s:g}; 0: no bound)",
    )
    p.add_argument(
        "--metric-nights",
        type=int,
        default=30,
        metavar="N",
        help="nights kept in metrics.jsonl and drawn in the trend charts (default 30)",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help="flag a metric in the summary (repeatable; with the inventory's thresholds:): "
        "NAME[:STAT]>VALUE, NAME[:STAT]<VALUE, NAME[:STAT]>+PCT%%, NAME[:STAT]<-PCT%% "
        "(STAT mean, min, p50, p99, max), e.g. connect_us:p99>50000",
    )
    p.add_argument(
        "--drift-nights",
        type=int,
        default=drift_history.DEFAULT_KEEP,
        metavar="N",
        help="compare the pair's night with its last N nights, kept in REPORTS/drift "
        f"(default {drift_history.DEFAULT_KEEP}; docs/drift.md)",
    )
    p.add_argument(
        "--drift-threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help="a drift kind's thresholds (repeatable): KIND=FLAG:FAIL for bound, detection, "
        "storm (factors; FAIL may be never), KIND=fail|flag for wire, status",
    )
    p.add_argument(
        "--fuzz-cases",
        type=int,
        default=0,
        metavar="N",
        help="after the suites, run hil peer fuzz for N cases on --pair (else the "
        "inventory's first pair); findings go into the report (default 0: no fuzz run)",
    )
    p.add_argument(
        "--fuzz-seed",
        type=int,
        default=int(time.strftime("%Y%m%d", time.gmtime())),
        metavar="N",
        help="the fuzz cases' seed (default: today's date, YYYYMMDD, UTC)",
    )
    p.add_argument("--allure", default=str(DEFAULT_ALLURE), help="the allure executable")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse arguments (pytest's after ``--``), run the pipeline, map errors to exit codes."""
    argv = sys.argv[1:] if argv is None else argv
    ours, extra = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = build_parser()
    try:
        args = parser.parse_args(ours)
    except SystemExit as e:
        return EXIT_INPUT if e.code else EXIT_OK
    args.pytest_args = extra
    try:
        if args.keep < 1:
            raise InputError(f"--keep must be at least 1, not {args.keep}")
        if args.flaky_nights < 2:
            raise InputError(f"--flaky-nights must be at least 2, not {args.flaky_nights}")
        if not args.timeout >= 0:
            raise InputError(f"--timeout must be 0 (no bound) or more seconds, not {args.timeout}")
        if args.fuzz_cases < 0 or args.fuzz_seed < 0:
            raise InputError("--fuzz-cases and --fuzz-seed take whole numbers of 0 or more")
        if args.fuzz_cases and not args.inventory:
            raise InputError("--fuzz-cases needs --inventory (the pair to fuzz)")
        args.fuzz_pair = fuzz_pair(args) if args.fuzz_cases else None
        if args.metric_nights < 1:
            raise InputError(f"--metric-nights must be at least 1, not {args.metric_nights}")
        # Checked before the run: a bad threshold is bad input, not a failed night.
        args.thresholds = thresholds_of(args.inventory, args.threshold)
        if args.drift_nights < 1:
            raise InputError(f"--drift-nights must be at least 1, not {args.drift_nights}")
        drift.limits_of(args.drift_threshold)  # checked before the run, as the thresholds
        return pipeline(args)
    except HilError as e:
        print(f"hil report: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
