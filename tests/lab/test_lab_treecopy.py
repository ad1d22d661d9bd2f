"""hil/lab/treecopy.py: the copy links sources, copies products, moves objtool's paths."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hil.lab import treecopy


def test_the_copy_links_sources_and_copies_build_products(tmp_path: Path) -> None:
    src, dst = tmp_path / "build" / "linux", tmp_path / "build-patched" / "linux"
    (src / "drivers").mkdir(parents=True)
    (src / "drivers" / "a.c").write_text("source\n")
    old = time.time() - 3600
    os.utime(src / "drivers" / "a.c", (old, old))  # as old as the tarball's files
    extracted = time.time() - 60
    (src / "drivers" / "a.o").write_bytes(b"object")
    cmd = src / "tools" / ".x.o.cmd"
    cmd.parent.mkdir()
    cmd.write_text(f"cmd_x.o := gcc -c {src}/tools/x.c\n")
    built = time.time_ns() - 123  # after the extraction, to the nanosecond
    os.utime(cmd, ns=(built, built))
    (src / "source-link").symlink_to("drivers")

    treecopy.copy_tree(src, dst, extracted, lambda _: None)

    assert os.stat(dst / "drivers" / "a.c").st_ino == os.stat(src / "drivers" / "a.c").st_ino
    assert os.stat(dst / "drivers" / "a.o").st_ino != os.stat(src / "drivers" / "a.o").st_ino
    assert (dst / "drivers" / "a.o").read_bytes() == b"object"
    assert (dst / "tools" / ".x.o.cmd").read_text() == f"cmd_x.o := gcc -c {dst}/tools/x.c\n"
    assert os.stat(dst / "tools" / ".x.o.cmd").st_mtime_ns == built
    assert cmd.read_text() == f"cmd_x.o := gcc -c {src}/tools/x.c\n"
    assert os.readlink(dst / "source-link") == "drivers"


def test_a_fresh_copy_breaks_the_link_and_is_newer(tmp_path: Path) -> None:
    original, target = tmp_path / "a.c", tmp_path / "copy.c"
    original.write_text("int a;\n")
    old = time.time() - 3600
    os.utime(original, (old, old))
    os.link(original, target)

    treecopy.fresh_copy(original, target)
    target.write_text("int b;\n")

    assert original.read_text() == "int a;\n"
    assert os.stat(target).st_mtime > old + 1800
