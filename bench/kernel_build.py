"""What building the lab kernel costs: incremental, from scratch with ccache, cold.

    nice -n 19 .venv/bin/python bench/kernel_build.py [--base minimal] [--scratch] [--cold]

- ``incremental`` (always): one source file touched (siw's ``siw_cm.c``) in
  the base's cached tree, then ``make``: what an edit of siw or a fault
  kernel costs; the tree is built first if it is not (not counted);
- ``--scratch``: a new tree (extracted into a temporary cache directory),
  configured and built with this machine's ccache: what a deleted tree or
  a changed config costs once ccache holds the compiles;
- ``--cold``: a new tree and an empty ccache: a fresh machine.

Prints one line per measurement, in seconds.  Run it under ``nice -n 19``
on a shared machine; the cached kernels and trees are not changed (the
incremental build rewrites its own tree's products only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import get_args

import benchmain  # bench/, beside this script

from hil.lab import kernel


def _quiet(_: str) -> None:
    pass


def incremental(base: kernel.Base, say: kernel.Progress) -> float:
    """Seconds of ``make`` after touching siw_cm.c in the base's tree."""
    kernel.ensure_kernel(base=base, progress=say)
    tree = kernel.tree_dir(kernel.find_source(), base)
    (tree / "drivers/infiniband/sw/siw/siw_cm.c").touch()
    with kernel.build_lock(say):
        started = time.monotonic()
        kernel.make(tree, os.cpu_count() or 1, say)
        return time.monotonic() - started


@contextmanager
def _fresh_cache(share_ccache: bool) -> Iterator[None]:
    """A temporary XDG_CACHE_HOME for one build, with this machine's ccache or none."""
    ccache = kernel.cache_root() / "kernel" / "ccache"
    saved = os.environ.get("XDG_CACHE_HOME")
    with tempfile.TemporaryDirectory(prefix="hil-bench-kernel-") as tmp:
        os.environ["XDG_CACHE_HOME"] = tmp
        if share_ccache:
            (Path(tmp) / "hil" / "kernel").mkdir(parents=True)
            (Path(tmp) / "hil" / "kernel" / "ccache").symlink_to(ccache)
        try:
            yield
        finally:
            if saved is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = saved


def from_scratch(base: kernel.Base, share_ccache: bool, say: kernel.Progress) -> float:
    """Seconds to extract, configure and build a new tree (with or without ccache)."""
    with _fresh_cache(share_ccache):
        started = time.monotonic()
        kernel.ensure_kernel(base=base, progress=say)
        return time.monotonic() - started


def main() -> int:
    """Measure what was asked, print a line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", choices=get_args(kernel.Base), default=kernel.DEFAULT_BASE)
    parser.add_argument("--scratch", action="store_true", help="a new tree with ccache")
    parser.add_argument("--cold", action="store_true", help="a new tree without ccache")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the build's progress")
    args = parser.parse_args()
    say = (lambda line: print(f"  {line}", file=sys.stderr, flush=True)) if args.verbose else _quiet
    seconds = incremental(args.base, say)
    print(f"{args.base}: incremental (siw_cm.c touched) {seconds:.0f} s", flush=True)
    if args.scratch:
        seconds = from_scratch(args.base, True, say)
        print(f"{args.base}: new tree, ccache warm {seconds:.0f} s", flush=True)
    if args.cold:
        seconds = from_scratch(args.base, False, say)
        print(f"{args.base}: new tree, no ccache (cold) {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("kernel_build", main))
