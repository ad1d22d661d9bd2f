"""The lab's guest kernel: Debian's linux-source built with siw, cached.

The kernel is built once per machine from ``/usr/src/linux-source-X.Y.tar.xz``
(6.1 unless another source is named: :mod:`hil.lab.kernel_source`)
from one of two bases plus ``siw.config``: ``defconfig`` (virtme-ng's
defconfig, the kernel of old) or ``minimal`` (``make allnoconfig`` with
``minimal.config``: only what the lab needs, a third of the compiles).  It is
cached under ``$XDG_CACHE_HOME/hil/kernel/<source-version>-<config-hash>/bzImage``.
Each base's extracted tree stays in ``.../kernel/build/<source-version>[-minimal]/``
so that a changed fragment rebuilds incrementally instead of from scratch, and
ccache (``.../kernel/ccache``) keeps compiles across trees and rebuilds.
The debug flavour (``debug.config`` on top of the minimal base: KASAN,
kmemleak, lockdep, debug objects) has its own key and tree (``...-minimal-debug``).

Which kernel is which (its key, its directories) is :mod:`hil.lab.kernelkey`;
the build's steps (the lock, extract, configure, make) :mod:`hil.lab.kernelmake`.
This module builds a kernel that is not cached, and still names their public names.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from hil import tools
from hil.errors import InputError, LabError
from hil.lab import kernelmake
from hil.lab.kernel_source import KernelSource as KernelSource
from hil.lab.kernel_source import find_source as find_source
from hil.lab.kernelkey import DEBUG as DEBUG
from hil.lab.kernelkey import DEFAULT_BASE as DEFAULT_BASE
from hil.lab.kernelkey import FRAGMENT as FRAGMENT
from hil.lab.kernelkey import MINIMAL as MINIMAL
from hil.lab.kernelkey import Base as Base
from hil.lab.kernelkey import cache_root as cache_root
from hil.lab.kernelkey import cached_kernel as cached_kernel
from hil.lab.kernelkey import config_hash as config_hash
from hil.lab.kernelkey import kernel_dir as kernel_dir
from hil.lab.kernelkey import tree_dir as tree_dir
from hil.lab.kernelmake import Progress as Progress
from hil.lab.kernelmake import build_lock as build_lock
from hil.lab.kernelmake import make as make
from hil.lab.kernelmake import to_stderr as to_stderr
from hil.lab.kernelmake import waited_lock as waited_lock

# What the build runs; hil/tools.py says which Debian package provides each.
BUILD_TOOLS = tools.KERNEL_BUILD
BUILD_HEADERS: dict[str, str] = {
    "/usr/include/libelf.h": "libelf-dev",
    "/usr/include/openssl/ssl.h": "libssl-dev",
}


def missing_tools() -> list[str]:
    """Debian packages whose tools or headers the kernel build lacks."""
    missing = {tools.tool(t).package for t in BUILD_TOOLS if shutil.which(t) is None}
    missing |= {pkg for hdr, pkg in BUILD_HEADERS.items() if not Path(hdr).exists()}
    if kernelmake.configkernel() is None:
        missing.add("virtme-ng (PyPI, in hil's venv)")
    return sorted(missing)


def ensure_kernel(
    rebuild: bool = False,
    fragment: Path = FRAGMENT,
    progress: Progress = to_stderr,
    jobs: int | None = None,
    base: Base = DEFAULT_BASE,
    source: KernelSource | None = None,
    debug: bool = False,
) -> Path:
    """The path of a bzImage with siw of ``source`` (default 6.1), built first when not cached."""
    if debug and base != "minimal":
        raise InputError("the debug kernel is built on the minimal base only")
    source = source or find_source()
    dest = kernel_dir(source, fragment, base, debug)
    image = dest / "bzImage"
    if image.is_file() and not rebuild:
        return image
    missing = missing_tools()
    if missing:
        raise LabError(
            "cannot build the lab kernel, missing: "
            + ", ".join(missing)
            + " (run ci/install, or apt-get install the packages above)"
        )
    with build_lock(progress):
        if image.is_file() and not rebuild:
            return image  # another process built it while we waited
        tree = kernelmake.extract(source, tree_dir(source, base, debug), progress)
        kernelmake.configure(tree, fragment, base, debug, progress)
        started = time.monotonic()
        make(tree, jobs or os.cpu_count() or 1, progress)
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / "bzImage.tmp"
        shutil.copyfile(tree / "arch/x86/boot/bzImage", tmp)
        shutil.copyfile(tree / ".config", dest / "config")
        tmp.replace(image)
        progress(f"lab kernel: built in {time.monotonic() - started:.0f} s: {image}")
    return image
