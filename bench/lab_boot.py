"""Time from nothing to a virtual lab whose guests all answer over SSH.

    .venv/bin/python bench/lab_boot.py [--rounds 1] [--hosts 2] [--cold] [--base B]
                                        [--kernel BZIMAGE]

- warm: the kernel is cached; each round is ``hil lab up`` in a fresh
  directory (KVM probe answer cached, as on any second run) until every
  guest runs a command over hil's SSH layer, then ``down``;
- ``--cold`` first builds the kernel from scratch into a temporary cache
  directory (extract, configure, make; ~10-20 min on 2 cores) and boots
  from it, probing KVM again: what a fresh machine sees;
- ``--base``: the kernel base to build and boot (default: hil's default);
  ``--kernel`` boots that bzImage instead (warm rounds only).

Prints one line per measurement, in seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import get_args

import benchmain  # bench/, beside this script

from hil.lab import control, kernel


def _quiet(_: str) -> None:
    pass


def boot_round(hosts: int, image: Path, say: control.Say) -> tuple[float, float]:
    """Seconds to SSH-ready, and to down, for one lab of ``image`` in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="hil-bench-lab-") as tmp:
        lab_dir = Path(tmp) / "lab"
        started = time.monotonic()
        control.up(lab_dir, hosts=hosts, memory="768M", say=say, image=image)
        ready = time.monotonic() - started
        started = time.monotonic()
        control.down(lab_dir, say=say)
        return ready, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="warm boots to time (default 1)")
    parser.add_argument("--hosts", type=int, default=2, help="guests per lab (default 2)")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="also build the kernel from scratch in a temporary cache first",
    )
    parser.add_argument("--base", choices=get_args(kernel.Base), default=kernel.DEFAULT_BASE)
    parser.add_argument("--kernel", type=Path, help="boot this bzImage (warm rounds)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the lab's progress")
    args = parser.parse_args()
    say = (lambda line: print(f"  {line}", file=sys.stderr, flush=True)) if args.verbose else _quiet
    if args.cold:
        saved = os.environ.get("XDG_CACHE_HOME")
        with tempfile.TemporaryDirectory(prefix="hil-bench-cache-") as cache:
            os.environ["XDG_CACHE_HOME"] = cache
            started = time.monotonic()
            image = kernel.ensure_kernel(progress=say, base=args.base)
            built = time.monotonic() - started
            ready, _ = boot_round(args.hosts, image, say)
            print(
                f"cold: kernel build {built:.1f} s, then {args.hosts} guests SSH-ready in "
                f"{ready:.1f} s: {built + ready:.1f} s total"
            )
        if saved is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    image = args.kernel
    if image is None:
        if kernel.cached_kernel(base=args.base) is None:
            print("warm: building the kernel first (not counted)", file=sys.stderr)
        image = kernel.ensure_kernel(progress=say, base=args.base)
    for i in range(1, args.rounds + 1):
        ready, down = boot_round(args.hosts, image, say)
        print(f"warm {i}: {args.hosts} guests SSH-ready in {ready:.1f} s, down in {down:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("lab_boot", main))
