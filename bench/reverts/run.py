"""Revert score of the regression corpus: each fix undone, its test must fail.

For each revert (every ``*.patch`` here, or those named with ``--revert``):
build the lab kernel with the fix undone (hil/lab/patched.py, cached), boot a
lab of its own on it, run its regression test (``Killed-by:``) up to ``Runs:``
times (the header's N; ``--runs`` overrides it), stopping at the first
failure, take the lab down, and print FAILED with the report kind (KASAN,
refcount, lockdep, kernel report, contract violation, hang, host crashed),
PASSED (the revert went unnoticed), WINDOW NOT REACHED (every failure was the
test's own "window not reached": no verdict) or LAB ERROR.  Then the same
tests run once on the default (fixed) kernel, where they must pass.  Prints
the revert score ``failed/total``; exit 0 only when every revert failed and
the fixed kernel was clean.  A revert whose header says ``Kernel: debug`` is
built on the debug kernel (KASAN, lockdep; event tracing for the windows
hil.cm.regressions.ktrace reads), its fixed twin being the debug kernel;
``--plain`` builds them all on the production kernel instead (cheaper; its
tests' tracepoint windows are then not observable and they skip, but a
WARNING, an oops or a hang still fails them).

A revert with a window-widening patch (``widen/NAME.patch``, bench/reverts/widening.py)
is run widened: its test runs on the revert+widen kernel (where it must fail) and
then, the same N times, on the fixed+widen kernel (where it must pass, its window
reached: the marker the widening logs); both on the kernel the widening's
``Kernel:`` header names.  A revert whose header says ``Tree: 6.12`` undoes a fix of
that source (one the lab's 6.1 never had) and runs on its kernels.  A revert whose
header says ``Unfixed:`` undoes nothing: its tree (the lab's 6.1) never had the fix, so
the test must fail on that tree as it is (widened), and its fixed run is on the
widening's tree (one that has the fix).  ``--unwidened`` runs the reverts as they are.

    .venv/bin/python bench/reverts/run.py --lock /tmp/hil-lab.lock [--revert NAME ...]
    .venv/bin/python bench/reverts/run.py --list

The lab plumbing (boot, pytest, lock, the default kernel's run) is
bench/labrun.py, shared with bench/mutants/run.py.  Costs: docs/regressions.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path

REVERTS = Path(__file__).resolve().parent
sys.path.insert(0, str(REVERTS.parent))
sys.path.insert(0, str(REVERTS))

from labrun import build, default_clean, held, lab_options, run_on_lab, scratch_dir  # noqa: E402  (bench/)
from outcomes import LabRun  # noqa: E402  (bench/mutants, on the path labrun set)
from reports import counts_as_failed, junit_reports, kind  # noqa: E402  (this directory)
from widening import fixed_widened, widened, widening  # noqa: E402  (this directory)

from hil.errors import HilError  # noqa: E402  (the worktree's hil: labrun set the path)
from hil.lab import patched  # noqa: E402


def _production(r: patched.Patch) -> patched.Patch:
    """``r`` built on the production kernel: its Kernel: header left off."""
    return dataclasses.replace(r, extra=tuple(kv for kv in r.extra if kv[0] != "kernel"))


def runs_of(p: patched.Patch, override: int | None) -> int:
    """How many times the revert's test runs: ``override``, else its ``Runs:`` header."""
    if override is not None:
        return override
    value = p.field("runs") or ""
    if not value.isdigit() or int(value) < 1:
        raise HilError(f"revert {p.path}: Runs: {value!r} is not a number of runs (1 or more)")
    return int(value)


def main() -> int:
    """Build, boot, run N times, compare; one line per revert, the fixed kernel, the score."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--revert", action="append", default=[], help="this revert only (repeatable)")
    p.add_argument("--runs", type=int, help="runs per revert kernel (default: its Runs: header)")
    lab_options(p, "reverts")
    p.add_argument("--no-default", action="store_true", help="skip the fixed kernel's run")
    p.add_argument(
        "--plain",
        action="store_true",
        help="build every revert on the production kernel whatever its Kernel: header says "
        "(a WARNING or an oops shows there; a window read from tracepoints does not)",
    )
    p.add_argument(
        "--unwidened",
        action="store_true",
        help="the reverts as they are, without their window-widening patches (widen/)",
    )
    p.add_argument("--keep", type=Path, metavar="DIR", help="keep each lab's logs in DIR/NAME")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        reverts = [patched.read_patch(f) for f in sorted(REVERTS.glob("*.patch"))]
        unknown = set(args.revert) - {r.name for r in reverts}
        if unknown:
            raise HilError(f"no revert {', '.join(sorted(unknown))} in {REVERTS}")
        chosen = [r for r in reverts if not args.revert or r.name in args.revert]
        widen = {r.name: None if args.unwidened else widening(r) for r in chosen}
        chosen = [_production(r) if args.plain else r for r in chosen]
        runs = {r.name: runs_of(r, args.runs) for r in chosen}
    except HilError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for r in chosen:
            print(f"{r.name}  {runs[r.name]} run(s)  {'; '.join(map(str, r.killed_by))}")
            print(f"    fix: {r.field('fix')}\n    {r.wrong}")
            if r.unfixed:
                print(f"    unfixed: {r.unfixed}")
            if (w := widen[r.name]) is not None:
                print(f"    widened: {w.field('window')}")
        return 0
    failed = 0
    ok = True
    with scratch_dir(args.keep, "hil-reverts-") as tmp:
        try:
            for r in chosen:
                n, w = runs[r.name], widen[r.name]
                w = _production(w) if w is not None and args.plain else w
                kernel = r if w is None else widened(r, w)
                hit = _revert(kernel, n, Path(tmp) / kernel.name, args.lock, args.jobs)
                failed += hit
                ok &= hit
                twin = fixed_widened(w) if w is not None else None
                if twin is not None and not args.no_default:
                    ok &= _fixed(twin, n, Path(tmp) / twin.name, args.lock, args.jobs)
            # The fixed run on the plain kernel: a revert unwidened, or widened where the
            # fixed kernel has nothing to widen; once per kernel (flavour and tree).
            plain = [r for r in chosen if (w := widen[r.name]) is None or fixed_widened(w) is None]
            kernels = sorted({(r.debug, r.tree or "") for r in plain})
            for debug, tree in [] if args.no_default else kernels:
                fixed = [r for r in plain if (r.debug, r.tree or "") == (debug, tree)]
                where = Path(tmp) / "-".join(
                    ["fixed", *(["debug"] if debug else []), *([tree] if tree else [])]
                )
                ok &= default_clean(fixed, where, args.lock, debug, tree or None)
        except HilError as e:  # the lab lock not had in time
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(f"revert score: {failed}/{len(chosen)} failed", flush=True)
    return 0 if ok else 1


def _revert(r: patched.Patch, runs: int, scratch: Path, lock: Path | None, jobs: int) -> bool:
    """Build ``r``, run its test up to ``runs`` times on a lab of its own; print the
    verdict; True when the test failed (a report other than its window not reached)."""
    run, build_s = _on_lab(r, runs, scratch, lock, jobs, _a_report)
    if isinstance(run, str):
        print(f"revert {r.name} LAB ERROR: {run}", flush=True)
        return False
    texts, skips = _reports(scratch)
    kinds = [kind(text) for text in texts]
    hit = counts_as_failed(kinds)
    if hit:
        verdict = "FAILED (" + ", ".join(sorted(set(kinds) - {"window not reached"})) + ")"
    elif run.problem:
        verdict = f"LAB ERROR: {run.problem}"
    elif kinds:
        verdict = "WINDOW NOT REACHED (no verdict)"
    elif skips:
        verdict = f"WINDOW NOT OBSERVABLE (no verdict): {skips[0]}"
    else:
        verdict = "PASSED (the revert went unnoticed)"
    what = f"unfixed {r.tree or 'default'} tree" if r.unfixed else "revert"
    print(
        f"{what} {r.name} ({'debug' if r.debug else 'production'} kernel) {verdict}: "
        f"{run.tests} test run(s) of at most {runs}",
        f"\n    build {build_s:.0f} s, boot {run.boot_s:.0f} s, tests {run.suites_s:.0f} s",
        *(f"\n    [{kind(text)}] {_head(text)}" for text in texts),
        sep="",
        flush=True,
    )
    return hit


def _fixed(w: patched.Patch, runs: int, scratch: Path, lock: Path | None, jobs: int) -> bool:
    """Build the fixed kernel with the widening ``w``, run its test ``runs`` times there;
    print and return whether every run passed (its window reached: a run that missed it
    fails "window not reached", one that could not see it skips: neither is clean)."""
    run, build_s = _on_lab(w, runs, scratch, lock, jobs, lambda message: True)
    if isinstance(run, str):
        print(f"fixed {w.name} LAB ERROR: {run}", flush=True)
        return False
    texts, skips = _reports(scratch)
    clean = run.problem is None and run.tests > 0 and not texts and not skips and not run.errored
    detail = run.problem or (skips[0] if skips else f"{run.tests} test run(s), {len(texts)} failed")
    print(
        f"fixed {w.name} ({'debug' if w.debug else 'production'} kernel) "
        f"{'clean' if clean else 'NOT CLEAN (the revert failures are not trustworthy)'}: "
        f"{detail}\n    build {build_s:.0f} s, boot {run.boot_s:.0f} s, tests {run.suites_s:.0f} s",
        *(f"\n    [{kind(text)}] {_head(text)}" for text in texts),
        sep="",
        flush=True,
    )
    return clean


def _a_report(message: str) -> bool:
    """A failure that decides a revert run: any but its window not reached (the next run
    may reach it)."""
    return counts_as_failed([kind(message)])


def _on_lab(
    p: patched.Patch,
    runs: int,
    scratch: Path,
    lock: Path | None,
    jobs: int,
    decisive: Callable[[str], bool],
) -> tuple[LabRun | str, float]:
    """Build ``p`` and run its test up to ``runs`` times on a lab of its own (stopping
    after a ``decisive`` failure); the lab's run, or why the build failed; the build's time."""
    image, why, build_s = build(p, jobs)
    if image is None:
        return why, build_s
    scratch.mkdir()
    with held(lock):
        run = run_on_lab(
            image, list(p.killed_by), scratch, repeat=runs, debug=p.debug, decisive=decisive
        )
    return run, build_s


def _reports(scratch: Path) -> tuple[list[str], list[str]]:
    """Every failure's full text and every skip's reason in the lab's JUnit reports."""
    texts: list[str] = []
    skips: list[str] = []
    for junit in sorted(scratch.glob("junit-*.xml")):
        f, s = junit_reports(junit)
        texts += f
        skips += s
    return texts, skips


def _head(text: str) -> str:
    """A failure's first lines, and the kernel report lines in it (KASAN, WARNING...)."""
    lines = text.splitlines()
    report = [
        ln.strip()
        for ln in lines[3:]
        if re.search(r"KASAN|WARNING|BUG|refcount_t|lockdep|Oops", ln)
    ]
    return " | ".join([*lines[:3], *report[:4]])[:600]


if __name__ == "__main__":
    sys.exit(main())
