"""Which lab kernel is which: its configuration fragments, its cache key and where it lives.

A kernel is decided by its source (:mod:`hil.lab.kernel_source`), its base
(virtme-ng's ``defconfig`` or ``allnoconfig`` + ``minimal.config``), ``siw.config``
and, for the debug flavour, ``debug.config``: those make its key, and the
key its directory under ``$XDG_CACHE_HOME/hil/kernel/``.  Each base and flavour
has its own extracted tree under ``.../kernel/build/`` (:func:`tree_dir`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Literal

from hil.lab.kernel_source import KernelSource, find_source

FRAGMENT = Path(__file__).with_name("siw.config")
MINIMAL = Path(__file__).with_name("minimal.config")
DEBUG = Path(__file__).with_name("debug.config")

# What a kernel is configured from: virtme-ng's defconfig, or allnoconfig + MINIMAL.
Base = Literal["defconfig", "minimal"]
DEFAULT_BASE: Base = "minimal"
MAKE_TARGETS = ("bzImage",)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hil`` (default ``~/.cache/hil``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hil"


def config_hash(fragment: Path = FRAGMENT, base: Base = DEFAULT_BASE, debug: bool = False) -> str:
    """Hash of what decides the kernel besides its source: base, fragment, targets.

    The defconfig base depends on virtme-ng's version (its defconfig), the
    minimal one on ``minimal.config`` instead; the defconfig key is the one
    hil always used, so its cached kernels stay valid.  The debug flavour adds
    ``debug.config`` (the plain keys stay what they were).
    """
    h = hashlib.sha256()
    h.update(fragment.read_bytes())
    h.update(" ".join(MAKE_TARGETS).encode())
    if base == "minimal":
        h.update(b"\0allnoconfig\0" + MINIMAL.read_bytes())
    else:
        h.update(_virtme_version().encode())
    if debug:
        h.update(b"\0debug\0" + DEBUG.read_bytes())
    return h.hexdigest()[:12]


def _virtme_version() -> str:
    try:
        from importlib.metadata import version

        return version("virtme-ng")
    except Exception:  # noqa: BLE001 - not installed is reported by missing_tools
        return "none"


def kernel_dir(
    source: KernelSource, fragment: Path = FRAGMENT, base: Base = DEFAULT_BASE, debug: bool = False
) -> Path:
    """Where the bzImage of this source, fragment, base and flavour is (or will be) cached."""
    safe = re.sub(r"[^A-Za-z0-9.+_-]", "_", source.version)
    return cache_root() / "kernel" / f"{safe}-{config_hash(fragment, base, debug)}"


def tree_dir(source: KernelSource, base: Base = DEFAULT_BASE, debug: bool = False) -> Path:
    """The extracted source tree of ``source`` for ``base``, where it is built in place.

    One tree per base and flavour, so building one never makes another's a
    full rebuild (the debug options change the flags of every compile).
    """
    name = re.sub(r"[^A-Za-z0-9.+_-]", "_", source.version)
    if base != "defconfig":
        name += f"-{base}"
    if debug:
        name += "-debug"
    return cache_root() / "kernel" / "build" / name / source.tree_name


def cached_kernel(
    fragment: Path = FRAGMENT,
    base: Base = DEFAULT_BASE,
    source: KernelSource | None = None,
    debug: bool = False,
) -> Path | None:
    """The cached bzImage of ``source`` (default 6.1), or None if not built yet."""
    image = kernel_dir(source or find_source(), fragment, base, debug) / "bzImage"
    return image if image.is_file() else None
