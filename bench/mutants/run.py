"""Mutation score of the suites: each patch of bench/mutants/ must be killed by its suites.

For each mutant (every ``*.patch`` here, or those named with ``--mutant``):
build the lab kernel with it (hil/lab/patched.py, cached after the first
time), boot a lab of its own on it, run the suites its header names
(``Killed-by:``) with JUnit XML, take the lab down, and print whether it was
KILLED (and by which tests), SURVIVED, or hit a LAB ERROR (the kernel did not
boot, pytest did not run, or the lab was unhealthy afterwards: counted as
neither).  Then the same suites run once on the default kernel, where they
must pass: otherwise the kills prove nothing.  Prints the score
``killed/total``; exit 0 only when every mutant was killed (or is named by
``--allow-survivor``) and the default kernel was clean.

    .venv/bin/python bench/mutants/run.py --lock /tmp/hil-lab2.lock [--mutant NAME ...]
    .venv/bin/python bench/mutants/run.py --list

``--keep DIR`` keeps each lab's logs (hil, pytest, JUnit) in ``DIR/NAME``.

``--lock PATH`` holds that flock only while a lab runs (boot, suites, down).
Cost here (2 cores, TCG): docs/mutation.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from outcomes import LabRun, Verdict, junit_outcomes, verdict  # noqa: E402  (this directory)

from hil.errors import HilError  # noqa: E402  (the worktree's hil: path set just above)
from hil.lab import kernel, patched  # noqa: E402

LAB_UP_TIMEOUT = 600.0
LAB_DOWN_TIMEOUT = 120.0
STATUS_TIMEOUT = 60.0
SUITE_TIMEOUT = 1200.0
LOCK_TIMEOUT = 3600.0


def _hil(log: Path, *args: str, timeout: float) -> str | None:
    """Run ``hil ARGS``; None when it succeeded, else why (with its output's tail)."""
    argv = [sys.executable, "-m", "hil", *args]
    with open(log, "a") as out:
        try:
            rc = subprocess.run(
                argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            return f"`hil {' '.join(args[:2])}` ran over {timeout:.0f} s (log {log})"
    if rc == 0:
        return None
    tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
    return f"`hil {' '.join(args[:2])}` exited {rc}: {tail}"


def run_on_lab(kernel: Path | None, suites: list[patched.Suite], scratch: Path) -> LabRun:
    """Boot a lab on ``kernel`` (None: the default), run ``suites``, always take it down."""
    lab_dir, log = scratch / "lab", scratch / "hil.log"
    failed: list[tuple[str, str]] = []
    errored: list[str] = []
    tests = 0
    problem: str | None = None
    started = time.monotonic()
    boot_s = suites_s = 0.0
    try:
        up = ["lab", "up", "--dir", str(lab_dir), "--accel", "tcg"]
        problem = _hil(
            log, *up, *(["--kernel", str(kernel)] if kernel else []), timeout=LAB_UP_TIMEOUT
        )
        boot_s = time.monotonic() - started
        if problem is None:
            for i, suite in enumerate(suites):
                junit = scratch / f"junit-{i}.xml"
                problem = _pytest(
                    suite, lab_dir / "inventory.yaml", junit, scratch / f"pytest-{i}.log"
                )
                if problem:
                    break
                f, e, n = junit_outcomes(junit, suite.path)
                failed += f
                errored += e
                tests += n
            suites_s = time.monotonic() - started - boot_s
            problem = problem or _hil(
                log, "lab", "status", "--dir", str(lab_dir), timeout=STATUS_TIMEOUT
            )
            if problem and problem.startswith("`hil lab status"):
                problem = f"the lab was unhealthy after the suites: {problem}"
    finally:
        down = _hil(log, "lab", "down", "--dir", str(lab_dir), timeout=LAB_DOWN_TIMEOUT)
        if down:
            print(f"  warning: {down}", flush=True)
    return LabRun(tuple(failed), tuple(errored), tests, problem, boot_s, suites_s)


def _pytest(suite: patched.Suite, inventory: Path, junit: Path, log: Path) -> str | None:
    argv = [
        sys.executable, "-m", "pytest", *suite.pytest_args(), "-q", "-p", "no:cacheprovider",
        f"--hil-inventory={inventory}", f"--junitxml={junit}",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as out:
        try:
            rc = subprocess.run(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                timeout=SUITE_TIMEOUT, check=False,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            return f"pytest {suite} ran over {SUITE_TIMEOUT:.0f} s (log {log})"
    if rc not in (0, 1) or not junit.is_file():
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        return f"pytest {suite} exited {rc}: {tail}"
    return None


@contextmanager
def _scratch(keep: Path | None) -> Iterator[str]:
    """Where the labs' logs go: ``keep`` (made, then left) or a temporary directory."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="hil-mutants-") as tmp:
            yield tmp
        return
    keep.mkdir(parents=True, exist_ok=True)
    yield str(keep)
    print(f"logs kept in {keep}", flush=True)


@contextmanager
def held(lock: Path | None) -> Iterator[None]:
    """Hold ``lock`` (flock) while a lab runs, when one is given."""
    if lock is None:
        yield
        return
    with kernel.waited_lock(lock, LOCK_TIMEOUT, "another lab", _quiet):
        yield


def main() -> int:
    """Build, boot, run, compare; one line per mutant, then the default kernel and the score."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mutant", action="append", default=[], help="this mutant only (repeatable)")
    p.add_argument("--allow-survivor", action="append", default=[], metavar="NAME",
                   help="a documented survivor that does not fail the run")  # fmt: skip
    p.add_argument("--lock", type=Path, help="flock held while each lab runs")
    p.add_argument(
        "--no-default",
        action="store_true",
        help="skip the default kernel's run (the exit then says only whether all were killed)",
    )
    p.add_argument(
        "--default-only",
        action="store_true",
        help="only the default kernel's run, on the chosen mutants' suites (after runs with "
        "--no-default)",
    )
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="make -j")
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each lab's logs and JUnit reports in DIR/NAME (default: a temporary "
        "directory, deleted at the end)",
    )
    args = p.parse_args()
    # SIGTERM (a CI timeout, kill PID) ends like Ctrl-C: the running lab is taken down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        mutants = [patched.read_patch(f) for f in sorted(MUTANTS.glob("*.patch"))]
    except HilError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    unknown = set(args.mutant) - {m.name for m in mutants}
    if unknown:
        print(f"error: no mutant {', '.join(sorted(unknown))} in {MUTANTS}", file=sys.stderr)
        return 2
    chosen = [m for m in mutants if not args.mutant or m.name in args.mutant]
    if args.list:
        for m in chosen:
            kills = "; ".join(str(s) for s in m.killed_by)
            print(f"{m.name:28} {kills}\n    {m.wrong}")
        return 0
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        print(f"error: --keep {args.keep} is not empty: name a new directory", file=sys.stderr)
        return 2
    killed = 0
    ok = True
    with _scratch(args.keep) as tmp:
        try:
            for m in [] if args.default_only else chosen:
                what = _mutant(m, Path(tmp) / m.name, args.lock, args.jobs)
                killed += what == "KILLED"
                ok &= what == "KILLED" or (what == "SURVIVED" and m.name in args.allow_survivor)
            if not args.no_default:
                ok &= _default(chosen, Path(tmp) / "default", args.lock)
            else:
                print("default kernel: not run (--no-default): kills not checked against it")
        except HilError as e:  # the lab lock not had in time
            print(f"error: {e}", file=sys.stderr)
            return 2
    if not args.default_only:
        print(f"score: {killed}/{len(chosen)} killed", flush=True)
    return 0 if ok else 1


def _mutant(m: patched.Patch, scratch: Path, lock: Path | None, jobs: int) -> Verdict:
    """Build ``m``, run its suites on a lab of its own, print and return the verdict."""
    started = time.monotonic()
    try:
        image = patched.build(m, jobs=jobs, progress=_quiet)
    except HilError as e:
        print(f"mutant {m.name:28} LAB ERROR: build failed: {e}", flush=True)
        return "LAB ERROR"
    build_s = time.monotonic() - started
    scratch.mkdir()
    with held(lock):
        run = run_on_lab(image, list(m.killed_by), scratch)
    what, detail = verdict(run)
    print(
        f"mutant {m.name:28} {what}{' by ' if what == 'KILLED' else ': '}{detail}",
        f"\n    build {build_s:.0f} s, boot {run.boot_s:.0f} s, suites {run.suites_s:.0f} s",
        *(f"\n    {t}: {why}" for t, why in run.failed),
        sep="",
        flush=True,
    )
    return what


def _default(chosen: list[patched.Patch], scratch: Path, lock: Path | None) -> bool:
    suites = list(dict.fromkeys(s for m in chosen for s in m.killed_by))
    scratch.mkdir()
    with held(lock):
        run = run_on_lab(None, suites, scratch)
    clean = run.problem is None and run.tests > 0 and not run.failed and not run.errored
    detail = run.problem or (
        f"{run.tests} tests, {len(run.failed)} failed, {len(run.errored)} errored"
    )
    print(
        f"default kernel {'clean' if clean else 'NOT CLEAN (the kills are not trustworthy)'}: "
        f"{detail} (boot {run.boot_s:.0f} s, suites {run.suites_s:.0f} s)",
        *(f"\n    {t}: {why}" for t, why in run.failed[:5]),
        sep="",
        flush=True,
    )  # fmt: skip
    return clean


def _quiet(line: str) -> None:
    if not line.startswith("lab kernel:") and "copy:" not in line:
        print(f"  {line}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
