"""siw kernels with a deliberate fault, for the wire judge's tests.

    .venv/bin/python tests/siw_faults.py [--jobs N] [--rebuild] FAULT...
    .venv/bin/python tests/siw_faults.py --list

The faults are two of the mutants of ``bench/mutants/`` (:data:`FAULTS`):
patches of ``drivers/infiniband/sw/siw/siw_cm.c`` that the wire judge must
catch.  :func:`build` builds one with :mod:`hil.lab.patched` (a copy of the
lab kernel's tree, the patch, an incremental ``make``), cached beside the
default kernel as ``KERNEL_DIR-patched-NAME/bzImage``.  Boot it with
``hil lab up --kernel PATH``.

In ``tests/`` rather than ``bench/``: it makes test kernels, not numbers,
and tests import it (like ``vlab``) to find or build a fault kernel.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hil.errors import HilError
from hil.lab import kernel, patched

MUTANTS = Path(__file__).resolve().parent.parent / "bench" / "mutants"
FAULTS = ("rst-close", "no-accept-pdata")


def fault_patch(name: str) -> patched.Patch:
    """The patch of fault ``name``."""
    return patched.read_patch(MUTANTS / f"{name}.patch")


def fault_kernel(name: str) -> Path | None:
    """The cached bzImage with fault ``name`` built from its current patch, or None."""
    return patched.cached(fault_patch(name))


def build(
    name: str, jobs: int = 2, rebuild: bool = False, progress: kernel.Progress = kernel.to_stderr
) -> Path:
    """The bzImage with fault ``name``, building the default kernel and then it when needed."""
    return patched.build(fault_patch(name), jobs=jobs, rebuild=rebuild, progress=progress)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("faults", nargs="*", metavar="FAULT", help=", ".join(FAULTS))
    parser.add_argument("--list", action="store_true", help="list the faults and their kernels")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="make -j (default: cores)"
    )
    parser.add_argument("--rebuild", action="store_true", help="build even when cached")
    args = parser.parse_args()
    try:
        if args.list or not args.faults:
            for name in FAULTS:
                p = fault_patch(name)
                print(f"{name:16} {patched.cached(p) or '(not built)'}\n    {p.wrong}")
            return 0
        unknown = [n for n in args.faults if n not in FAULTS]
        if unknown:
            print(
                f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}",
                file=sys.stderr,
            )
            return 1
        for n in args.faults:
            print(build(n, jobs=args.jobs, rebuild=args.rebuild))
    except HilError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
