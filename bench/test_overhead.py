"""The time spent around each suite test's scenario, today's tree against a base, in one run.

    .venv/bin/python bench/test_overhead.py --inventory ~/.local/state/hil/lab/inventory.yaml \\
        [--base 066db0a] [--suite suites/test_close.py] [--rounds 2]

Runs ``--suite`` on the inventory's pair ``--rounds`` times with each tree,
alternating (base first in odd rounds), each in a pytest of its own: the base
from a detached git worktree of ``--base`` (made and removed here), this tree
as it is.  Per test it takes pytest's phase times (bench/overhead_plugin.py):
the call is the scenario; setup plus teardown is the time around it (the
capture, baselines, settle, checks, decode and judge). The first test of each
run also sets the pair up and is left out of the means.  For this tree it
prints, per test, each stage of its TestRun (hil/run/testrun.py).

Prints the per-test table of the last round of each tree, the mean time around
a scenario and of the scenario for each tree, and the ratio this / base.
Numbers, no asserts.  Needs a lab nobody else uses (it reserves the pair).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RUN_TIMEOUT = 3600.0  # one suite on a TCG pair


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", required=True, help="the lab's inventory (hil lab inventory)")
    p.add_argument("--base", default="066db0a", help="git ref to compare with (default 066db0a)")
    p.add_argument("--suite", default="suites/test_close.py", help="suite file (default close)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each tree (default 2)")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if not Path(args.inventory).is_file():
        p.error(f"--inventory {args.inventory}: no such file")
    return args


def _worktree(ref: str, where: Path) -> None:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.exit(f"test_overhead: no worktree of {ref}: {out.stderr.strip()}")


def _run(tree: Path, base: bool, args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    """One pytest of the suite with ``tree``'s hil; its tests' times."""
    out = scratch / f"times-{os.getpid()}-{tree.name}.jsonl"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(BENCH)]),
        "HIL_OVERHEAD_OUT": str(out),
    }
    argv = [
        sys.executable, "-m", "pytest", str(tree / args.suite), "-p", "overhead_plugin",
        "--hil-inventory", args.inventory, "--hil-store", str(scratch / "store.db"),
        "-p", "no:cacheprovider", "-q", "--rootdir", str(tree),
    ]  # fmt: skip
    if base:
        # The base loads its report from its own plugin list; the installed hil-report
        # entry point (this tree's) would register the same module a second time.
        argv += ["-p", "no:hil-report"]
    try:
        done = subprocess.run(
            argv, cwd=tree, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        sys.exit(f"test_overhead: {args.suite} with {tree} did not end within {RUN_TIMEOUT:g} s")
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        sys.exit(
            f"test_overhead: {args.suite} with {tree} failed (exit {done.returncode}):\n{tail}"
        )
    return [json.loads(line) for line in out.read_text().splitlines()]


def _around(t: dict[str, Any]) -> float:
    return float(t.get("setup", 0.0) + t.get("teardown", 0.0))


def _table(name: str, tests: list[dict[str, Any]]) -> None:
    print(f"\n{name}: per test (s): around = setup + teardown, call = the scenario")
    for t in tests:
        stages = "  ".join(f"{k} {v:.2f}" for k, v in t["stages"].items())
        test = t["test"].split("::")[-1]
        print(f"  {test:<58} around {_around(t):6.2f}  call {t.get('call', 0.0):6.2f}  {stages}")


def main() -> int:
    args = _args()
    with tempfile.TemporaryDirectory(prefix="hil-overhead-") as tmp:
        scratch = Path(tmp)
        base_tree = scratch / "base"
        _worktree(args.base, base_tree)
        got: dict[str, list[list[dict[str, Any]]]] = {"base": [], "this": []}
        try:
            for r in range(args.rounds):
                order = ["base", "this"] if r % 2 == 0 else ["this", "base"]
                for which in order:
                    tree = base_tree if which == "base" else ROOT
                    tests = _run(tree, which == "base", args, scratch)
                    got[which].append(tests)
                    print(f"round {r + 1}: {which}: {len(tests)} tests", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                capture_output=True,
                check=False,
            )
    means = {}
    for which, runs in got.items():
        _table(f"{which} ({args.base if which == 'base' else 'this tree'}), last round", runs[-1])
        later = [t for run in runs for t in run[1:]]  # the first test also sets the pair up
        means[which] = (
            statistics.mean(_around(t) for t in later),
            statistics.mean(t.get("call", 0.0) for t in later),
            len(later),
        )
    print()
    for which, (around, call, n) in means.items():
        print(f"{which}: mean around a scenario {around:.2f} s, scenario {call:.2f} s ({n} tests)")
    print(f"ratio this / base, time around a scenario: {means['this'][0] / means['base'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
