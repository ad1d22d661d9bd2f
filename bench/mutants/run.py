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

``--keep DIR`` keeps each lab's logs (hil, pytest, JUnit, Allure results with the
run's metrics, the guests' consoles) in ``DIR/NAME``.

``--lock PATH`` holds that flock only while a lab runs (boot, suites, down).
Cost here (2 cores, TCG): docs/mutation.md.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

MUTANTS = Path(__file__).resolve().parent
sys.path.insert(0, str(MUTANTS.parent))

from labrun import build, default_clean, held, lab_options, run_on_lab, scratch_dir  # noqa: E402  (bench/)
from outcomes import Verdict, verdict  # noqa: E402  (this directory)

from hil.errors import HilError  # noqa: E402  (the worktree's hil: labrun set the path)
from hil.lab import patched  # noqa: E402


def main() -> int:
    """Build, boot, run, compare; one line per mutant, then the default kernel and the score."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mutant", action="append", default=[], help="this mutant only (repeatable)")
    p.add_argument("--allow-survivor", action="append", default=[], metavar="NAME",
                   help="a documented survivor that does not fail the run")  # fmt: skip
    lab_options(p, "mutants")
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
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each lab's logs, JUnit and Allure results and consoles in DIR/NAME "
        "(default: a temporary directory, deleted at the end)",
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
    with scratch_dir(args.keep, "hil-mutants-") as tmp:
        try:
            for m in [] if args.default_only else chosen:
                what = _mutant(m, Path(tmp) / m.name, args.lock, args.jobs)
                killed += what == "KILLED"
                ok &= what == "KILLED" or (what == "SURVIVED" and m.name in args.allow_survivor)
            if not args.no_default:
                ok &= default_clean(chosen, Path(tmp) / "default", args.lock)
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
    image, why, build_s = build(m, jobs)
    if image is None:
        print(f"mutant {m.name:28} LAB ERROR: {why}", flush=True)
        return "LAB ERROR"
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


if __name__ == "__main__":
    sys.exit(main())
