"""A copy of the lab kernel's build tree that a patched build may change.

Sources (as old as the extraction) are hard links; the build's own products
(newer) are real copies, because a build rewrites some of its products in
place (``arch/x86/boot/bzImage``, ``System.map``) and would write through a
link into the default tree.  objtool's ``.cmd``/``.d`` files carry absolute
paths: they get the copy's path with their mtimes kept, otherwise objtool and
then every object would be rebuilt.  A file a patch changes is first made a
file of its own (:func:`fresh_copy`), so the default tree is never written.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

COPY_PROGRESS_EVERY = 5.0


def copy_tree(src: Path, dst: Path, extracted: float, progress: Callable[[str], None]) -> None:
    """Copy the built tree ``src`` to ``dst``: files older than ``extracted`` linked, others
    copied."""
    started = last = time.monotonic()
    linked = copied = 0
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in dirs:
            if (Path(root) / name).is_symlink():
                os.symlink(os.readlink(Path(root) / name), dst / rel / name)
        for name in files:
            here, there = Path(root) / name, dst / rel / name
            if here.is_symlink():
                os.symlink(os.readlink(here), there)
            elif here.stat().st_mtime < extracted:
                os.link(here, there)
                linked += 1
            else:
                _copy_product(here, there, os.fsencode(src), os.fsencode(dst))
                copied += 1
        if time.monotonic() - last > COPY_PROGRESS_EVERY:
            last = time.monotonic()
            progress(f"  copy: {last - started:4.0f} s, {linked} linked, {copied} copied")
    progress(
        f"  copy: done in {time.monotonic() - started:.0f} s, {linked} linked, {copied} copied"
    )


def _copy_product(s: Path, d: Path, src: bytes, dst: bytes) -> None:
    """Copy a build product, keeping its mtime so that make sees the copy as built.

    tools/ (objtool) records its commands and dependencies with absolute
    paths; moved to the copy's path, they stay unchanged for make, and
    objtool, with every object that depends on it, is not rebuilt.
    """
    shutil.copy2(s, d)
    if d.suffix in (".cmd", ".d"):
        text = d.read_bytes()
        if src in text:
            st = s.stat()
            d.write_bytes(text.replace(src, dst))
            os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))


def fresh_copy(original: Path, target: Path) -> None:
    """Make ``target`` a file of its own with ``original``'s content and a new mtime.

    Written anew and renamed over ``target``, so a hard link to ``original``
    is broken rather than written through; the new mtime makes make rebuild
    what depends on it (also when it restores a file an earlier patch changed).
    """
    tmp = target.with_name(target.name + ".hil-tmp")
    shutil.copyfile(original, tmp)
    os.replace(tmp, target)
