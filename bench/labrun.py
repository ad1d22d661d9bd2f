"""Running suites on a lab of its own, booted on a given kernel: what bench/mutants/run.py
and bench/reverts/run.py share.

:func:`run_on_lab` boots ``hil lab up --kernel`` in a scratch directory, runs pytest
on each suite with JUnit XML and Allure results (``repeat`` times over: a revert's test
is run N times on one boot), checks ``hil lab status`` and always takes the lab down
(also on Ctrl-C or SIGTERM), keeping the guests' consoles.  In the scratch directory:
``junit-R-I.xml`` and ``pytest-R-I.log`` per run, ``allure-R-I/`` (each test's
attachments, kernel logs among them, and ``hil-metrics.json``: a regression case's
window metrics), ``console-GUEST.log`` and ``hil.log``.  :func:`held` holds the
shared lab lock meanwhile.  Every subprocess has a timeout (lab up 600 s, a suite
1200 s, lab down 120 s, the lock 3600 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "mutants"))

from outcomes import LabRun, junit_outcomes  # noqa: E402  (bench/mutants)

from hil.cli.lab_cmd import DEBUG_BOOT_TIMEOUT  # noqa: E402  (the worktree's hil: path set above)
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


def run_on_lab(
    image: Path | None,
    suites: list[patched.Suite],
    scratch: Path,
    repeat: int = 1,
    debug: bool = False,
    decisive: Callable[[str], bool] = lambda message: True,
) -> LabRun:
    """Boot a lab on ``image`` (None: the default kernel), run ``suites`` ``repeat`` times
    (stopping after the first repetition with a failure whose message is ``decisive``:
    one is enough; a revert's "window not reached" is not, the next run may reach it),
    always take it down.

    ``debug``: ``image`` is a debug kernel's (KASAN, lockdep): the lab gets the debug
    boot bound and pytest the agent call layer of ci/nightly --debug-lab (120 s: a cold
    agent's handshake on a debug guest under TCG)."""
    lab_dir, log = scratch / "lab", scratch / "hil.log"
    failed: list[tuple[str, str]] = []
    errored: list[str] = []
    tests = 0
    problem: str | None = None
    started = time.monotonic()
    boot_s = suites_s = 0.0
    try:
        up = ["lab", "up", "--dir", str(lab_dir), "--accel", "tcg"]
        up += ["--boot-timeout", f"{DEBUG_BOOT_TIMEOUT:g}"] if debug else []
        slow = ["--hil-timeout-agent", "120"] if debug else []
        problem = _hil(
            log,
            *up,
            *(["--kernel", str(image)] if image else []),
            timeout=LAB_UP_TIMEOUT + (DEBUG_BOOT_TIMEOUT if debug else 0.0),
        )
        boot_s = time.monotonic() - started
        runs = [(r, i, s) for r in range(repeat) for i, s in enumerate(suites)]
        for r, i, suite in runs if problem is None else []:
            junit = scratch / f"junit-{r}-{i}.xml"
            allure = ["--alluredir", str(scratch / f"allure-{r}-{i}")]
            problem = _pytest(
                suite,
                lab_dir / "inventory.yaml",
                junit,
                scratch / f"pytest-{r}-{i}.log",
                slow + allure,
            )
            if problem:
                break
            f, e, n = junit_outcomes(junit, suite.path)
            failed += f
            errored += e
            tests += n
            if i == len(suites) - 1 and any(decisive(message) for _, message in failed):
                break  # a failing repetition: enough
        suites_s = time.monotonic() - started - boot_s
        if problem is None:
            problem = _hil(log, "lab", "status", "--dir", str(lab_dir), timeout=STATUS_TIMEOUT)
            if problem:
                problem = f"the lab was unhealthy after the suites: {problem}"
    finally:
        keep_consoles(lab_dir, scratch)
        down = _hil(log, "lab", "down", "--dir", str(lab_dir), timeout=LAB_DOWN_TIMEOUT)
        if down:
            print(f"  warning: {down}", flush=True)
    return LabRun(tuple(failed), tuple(errored), tests, problem, boot_s, suites_s)


def keep_consoles(lab_dir: Path, scratch: Path) -> None:
    """Copy each guest's console log (``GUEST.log`` in the lab's directory, which ``hil
    lab down`` removes) to ``scratch/console-GUEST.log``: a panic or a KASAN report that
    ended a guest is read there."""
    state = lab_dir / "lab.json"
    if not state.is_file():
        return
    for console in sorted(lab_dir.glob("*.log")):
        try:
            shutil.copyfile(console, scratch / f"console-{console.name}")
        except OSError as e:  # the lab must still be taken down
            print(f"  warning: {console.name} not kept: {e}", flush=True)


def _pytest(
    suite: patched.Suite, inventory: Path, junit: Path, log: Path, extra: list[str]
) -> str | None:
    argv = [
        sys.executable, "-m", "pytest", *suite.pytest_args(), "-q", "-p", "no:cacheprovider",
        f"--hil-inventory={inventory}", f"--junitxml={junit}", *extra,
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
def scratch_dir(keep: Path | None, prefix: str) -> Iterator[str]:
    """Where the labs' logs go: ``keep`` (made, then left) or a temporary directory."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
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
    with kernel.waited_lock(lock, LOCK_TIMEOUT, "another lab", quiet):
        yield


def build(p: patched.Patch, jobs: int) -> tuple[Path | None, str, float]:
    """The patched kernel's image (None and why when its build failed), and the build's time."""
    started = time.monotonic()
    try:
        image = patched.build(p, jobs=jobs, progress=quiet)
    except Exception as e:  # noqa: BLE001 -- HilError or an OSError of the copy: a LAB ERROR
        return None, f"build failed: {e}", time.monotonic() - started
    return image, "", time.monotonic() - started


def lab_options(p: argparse.ArgumentParser, what: str) -> None:
    """The options both runners take: the lab lock, ``make -j``, ``--list``."""
    p.add_argument("--lock", type=Path, help="flock held while each lab runs")
    p.add_argument("--list", action="store_true", help=f"list the {what} and exit")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="make -j")


def quiet(line: str) -> None:
    """A build's or the lock's progress line, less the per-file noise."""
    if not line.startswith("lab kernel:") and "copy:" not in line:
        print(f"  {line}", flush=True)


def default_clean(
    chosen: list[patched.Patch],
    scratch: Path,
    lock: Path | None,
    debug: bool = False,
    tree: str | None = None,
) -> bool:
    """Run the union of ``chosen``'s suites once on the default kernel (the debug one, for
    ``debug``; that of the kernel source ``tree``, when given); print whether it was clean
    (every test passed): the kills on the patched kernels prove nothing otherwise."""
    suites = list(dict.fromkeys(s for m in chosen for s in m.killed_by))
    scratch.mkdir()
    image = (
        kernel.ensure_kernel(debug=debug, progress=quiet, source=kernel.find_source(spec=tree))
        if debug or tree
        else None
    )
    with held(lock):
        run = run_on_lab(image, suites, scratch, debug=debug)
    clean = run.problem is None and run.tests > 0 and not run.failed and not run.errored
    detail = run.problem or (
        f"{run.tests} tests, {len(run.failed)} failed, {len(run.errored)} errored"
    )
    print(
        f"{'debug' if debug else 'default'}{f' {tree}' if tree else ''} kernel "
        f"{'clean' if clean else 'NOT CLEAN (the kills are not trustworthy)'}: "
        f"{detail} (boot {run.boot_s:.0f} s, suites {run.suites_s:.0f} s)",
        *(f"\n    {t}: {why}" for t, why in run.failed[:5]),
        sep="",
        flush=True,
    )  # fmt: skip
    return clean
