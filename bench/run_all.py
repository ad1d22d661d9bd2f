"""Every cost of the lab in one run on one pair: the numbers of issue 11 item 7.

    .venv/bin/python bench/run_all.py [--lab-dir DIR | --inventory FILE] [-c 16] [--rounds 3]
        [--suite suites/test_connect.py] [--kernel-cold] [--skip PART ... | --only PART ...]
        [--reports DIR]

Without ``--inventory`` it boots a virtual lab in ``--lab-dir`` (default a
temporary directory; the kernel built first if it is not cached, not counted)
and stops it at the end; the parts, in turn (``--skip PART``, ``--only PART``):

- ``kernel`` (first, before the lab: it needs none, and waits for any other
  kernel build of the machine): ``bench/kernel_build.py`` under ``nice -n 19``:
  one file of siw touched, rebuilt; ``--kernel-cold`` adds a new tree with
  ccache and a cold build (about 15 minutes more on 2 cores);
- on the pair: ``lab``: ``hil lab up`` until both guests answer over SSH (kernel cached);
- ``agent``: ``bench/agent.py`` on host A: cold and warm agent (start + first
  netlink call), warm first call, one call, SSH + agent setup;
- ``session``: a pair run's setup as the suites' session does it (reserve the
  pair, SSH, agents, pair setup), its first connect (the CM workers start),
  then its restore and release;
- ``cm_rate``: ``bench/cm_rate.py``: hil's storm next to rdma-core's ``cmtime``
  for the same N on the same pair (rate, per-step latencies, the ratio);
- ``suite``: ``pytest`` on ``--suite`` (default ``suites/test_connect.py``;
  ``--suite suites`` for the whole conformance suite, about 8 minutes here).

Each part's own lines are printed as they come, then a summary with the time
each part took and the load average.  ``--reports DIR`` also appends every
number to ``DIR/metrics.jsonl`` and draws their trend (``DIR/metrics/index.html``),
as the nightly does for its metrics.  Numbers, no asserts; the exit is 1 when a
part failed (the others still run).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hil.errors import HilError
from hil.inventory import loader
from hil.lab import control, kernel
from hil.plugin.interrupt import sigterm_as_interrupt
from hil.report import metrics_history, trend
from hil.reservation import open_store
from hil.run import PairRequest, PairRun

ROOT = Path(__file__).resolve().parent.parent
# The parts measure this checkout's hil, whatever the venv's editable install points at.
CHECKOUT_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
PARTS = ("lab", "agent", "session", "cm_rate", "kernel", "suite")
PYTHON = sys.executable
# A line's first number and its unit: "median   812.4 ms", "SSH-ready in 21.3 s", "91.2 conn/s".
_NUMBER = re.compile(r"(?P<value>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>ms|s|conn/s)\b")


@dataclass
class Part:
    """One part's outcome: its lines, how long it took, whether it worked."""

    name: str
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


def run_part(part: Part, argv: list[str], timeout: float, cwd: Path = ROOT) -> Part:
    """Run a bench script, echo and keep its stdout; a failure or timeout is the part's error."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=CHECKOUT_ENV
        )
    except subprocess.TimeoutExpired:
        part.error = f"timed out after {timeout:.0f} s: {' '.join(argv)}"
        return part
    finally:
        part.seconds = time.monotonic() - started
    part.lines += [line for line in done.stdout.splitlines() if line.strip()]
    for line in part.lines:
        print(f"  {part.name}: {line}", flush=True)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        part.error = f"exit {done.returncode}: {tail}"
    return part


@contextmanager
def virtual_lab(lab_dir: Path, parts: dict[str, Part], timed: bool) -> Iterator[Path]:
    """``hil lab up`` (timed as the ``lab`` part), the inventory's path; down on the way out.

    In this process (as bench/lab_boot.py does): a ``hil lab up`` child would leave its
    output pipes to the guests it starts, and reading them would never end.
    """
    kernel.ensure_kernel()  # built (or waited for) before the clock starts
    started = time.monotonic()
    try:
        control.up(lab_dir)
        ready = time.monotonic() - started
        if timed:
            part = parts["lab"] = Part("lab", seconds=ready)
            part.lines.append(f"2 guests SSH-ready in {ready:.1f} s (hil lab up, kernel cached)")
            print(f"  lab: {part.lines[-1]}", flush=True)
        yield Path(control.inventory_path(lab_dir))
    finally:
        control.down(lab_dir)


def session_setup(inventory: Path, store: Path, rounds: int) -> Part:
    """Seconds from nothing to a set-up pair, to its first connect, and to restored."""
    part = Part("session")
    inv = loader.load(inventory)
    setups, firsts, restores = [], [], []
    started = time.monotonic()
    try:
        for _ in range(rounds):
            request = PairRequest(pair=inv.pairs()[0].name, holder="bench/run_all.py", wait=300)
            t0 = time.monotonic()
            with open_store(str(store)) as db, PairRun(inv, db, request) as run:
                t1 = time.monotonic()
                run.session(evidence=False).run("connect")
                t2 = time.monotonic()
            setups.append(t1 - t0)
            firsts.append(t2 - t1)
            restores.append(time.monotonic() - t2)
    except HilError as e:  # a bench reports what broke and goes on with the other parts
        part.error = f"{type(e).__name__}: {e}"
    part.seconds = time.monotonic() - started
    if setups:
        n = len(setups)
        part.lines = [
            f"pair setup (reserve, SSH, agents, pair setup) median "
            f"{statistics.median(setups):.2f} s over {n} rounds",
            f"first connect sequence (CM workers start) median {statistics.median(firsts):.2f} s",
            f"pair restore and release median {statistics.median(restores):.2f} s",
        ]
        for line in part.lines:
            print(f"  session: {line}", flush=True)
    return part


def suite_time(suite: str, inventory: Path, store: Path) -> Part:
    """The wall time of ``pytest SUITE`` on the pair (its last line says what passed)."""
    part = Part("suite")
    argv = [PYTHON, "-m", "pytest", suite, "-q", "-p", "no:cacheprovider"]
    argv += [f"--hil-inventory={inventory}", f"--hil-store={store}"]
    run_part(part, argv, timeout=3600)
    outcome = part.lines[-1].strip("= ") if part.lines else "no output"
    part.lines = [f"pytest {suite}: {part.seconds:.1f} s ({outcome})"]
    print(f"  suite: {part.lines[0]}", flush=True)
    return part


def numbers(parts: dict[str, Part]) -> list[dict[str, object]]:
    """Every line's first number as a metric (for ``--reports``): name from part and label."""
    found: list[dict[str, object]] = []
    for part in parts.values():
        for line in part.lines:
            m = _NUMBER.search(line)
            if m is None:
                continue
            label = re.sub(r"[^a-z0-9]+", "_", line[: m.start()].lower()).strip("_") or "value"
            found.append(
                {
                    "test": "bench/run_all.py",
                    "name": f"bench_{part.name}",
                    "value": float(m["value"]),
                    "unit": {"conn/s": "1/s"}.get(m["unit"], m["unit"]),
                    "labels": {"what": label[:60]},
                }
            )
    return found


def summary(parts: dict[str, Part], pair: str) -> list[str]:
    """What the run measured, part by part."""
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"hil bench: pair {pair}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    lines.append(f"  load average (1, 5, 15 min): {load}; cores: {os.cpu_count()}")
    for name in PARTS:
        part = parts.get(name)
        if part is None:
            lines.append(f"  {name:<8} skipped")
            continue
        state = f"FAILED: {part.error}" if part.error else "ok"
        lines.append(f"  {name:<8} {part.seconds:7.1f} s  {state}")
        lines += [f"           {line}" for line in part.lines]
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", type=Path, help="a running lab's inventory (no boot, no lab)")
    p.add_argument("--lab-dir", type=Path, help="the lab to boot (default: a temporary one)")
    p.add_argument("--store", type=Path, help="reservation store (default: a temporary SQLite)")
    p.add_argument("-c", "--connections", type=int, default=16, help="storm size N (default 16)")
    p.add_argument("--rounds", type=int, default=3, help="cm_rate rounds (default 3)")
    p.add_argument("--suite", default="suites/test_connect.py", help="the suite to time")
    p.add_argument("--kernel-cold", action="store_true", help="also a new tree and a cold build")
    p.add_argument("--skip", action="append", default=[], choices=PARTS, help="skip a part")
    p.add_argument("--only", action="append", default=[], choices=PARTS, help="run only these")
    p.add_argument("--reports", type=Path, help="append the numbers to DIR/metrics.jsonl")
    return p.parse_args(argv)


def kernel_part(cold: bool) -> Part:
    """``bench/kernel_build.py`` (it waits for another kernel build on the machine)."""
    argv = ["nice", "-n", "19", PYTHON, "bench/kernel_build.py"]
    part = run_part(Part("kernel"), argv + (["--scratch", "--cold"] if cold else []), 7200)
    if not cold:
        part.lines.append("cold build: not run (--kernel-cold: ~15 min more)")
    return part


def run_parts(
    args: argparse.Namespace, want: list[str], inventory: Path, store: Path
) -> dict[str, Part]:
    """The parts of ``want`` that run on the pair of ``inventory``."""
    parts: dict[str, Part] = {}
    if "agent" in want:
        argv = [PYTHON, "bench/agent.py", "--inventory", str(inventory)]
        parts["agent"] = run_part(Part("agent"), [*argv, "--calls", "100", "--setups", "5"], 900)
    if "session" in want:
        parts["session"] = session_setup(inventory, store, rounds=2)
    if "cm_rate" in want:
        argv = [PYTHON, "bench/cm_rate.py", "--inventory", str(inventory), "--store", str(store)]
        argv += ["-c", str(args.connections), "--rounds", str(args.rounds), "--wait", "300"]
        parts["cm_rate"] = run_part(Part("cm_rate"), argv, 1800)
    if "suite" in want:
        parts["suite"] = suite_time(args.suite, inventory, store)
    return parts


def main(argv: list[str] | None = None) -> int:
    """Boot (or take) the lab, run the parts, print the summary, keep the numbers."""
    args = parse_args(argv)
    # SIGTERM (timeout, CI) ends the run through the lab's down, not around it.
    with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="hil-bench-") as tmp:
        store = args.store or Path(tmp) / "store.db"
        parts: dict[str, Part] = {}
        want = args.only or [p for p in PARTS if p not in args.skip]
        if "kernel" in want:  # first: it needs no lab, and may wait for another build
            parts["kernel"] = kernel_part(args.kernel_cold)
        pair = "none"
        if set(want) - {"kernel"} and args.inventory is not None:
            pair = loader.load(args.inventory).pairs()[0].name
            parts.update(run_parts(args, want, args.inventory, store))
        elif set(want) - {"kernel"}:
            lab_dir = args.lab_dir or Path(tmp) / "lab"
            with virtual_lab(lab_dir, parts, "lab" in want) as inventory:
                pair = loader.load(inventory).pairs()[0].name
                parts.update(run_parts(args, want, inventory, store))
    print("\n".join(summary(parts, pair)), flush=True)
    if args.reports is not None:
        args.reports.mkdir(parents=True, exist_ok=True)
        kept = metrics_history.load(args.reports / metrics_history.HISTORY)
        run = kept[-1].run + 1 if kept else 1
        nights = metrics_history.record(args.reports, run, numbers(parts), 60, None)
        print(f"hil bench: trend {trend.write_page(args.reports, nights, [], [])}")
    return 1 if any(p.error for p in parts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
