"""tests/siw_faults.py: the fault edits, and the copy that leaves the default tree alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import siw_faults

from hil.errors import LabError
from hil.lab import kernel


def default_siw_cm() -> Path:
    """siw_cm.c of the lab kernel's tree; the test skips when the tree is not there."""
    try:
        path = kernel.tree_dir(kernel.find_source()) / siw_faults.SIW_CM
    except LabError as e:
        pytest.skip(str(e))
    if not path.is_file():
        pytest.skip(f"no lab kernel tree ({path}): `hil lab kernel` extracts and builds it")
    return path


@pytest.mark.parametrize("name", list(siw_faults.FAULTS))
def test_each_fault_applies_to_the_lab_kernel_source_as_a_new_file(
    name: str, tmp_path: Path
) -> None:
    original = default_siw_cm()
    target = tmp_path / "siw_cm.c"
    os.link(original, target)
    before = original.read_text()
    diff = siw_faults._apply(siw_faults.FAULTS[name], original, target)
    assert original.read_text() == before  # written anew, not through the link
    assert os.stat(target).st_ino != os.stat(original).st_ino
    assert f"hil fault {name}" in target.read_text()
    assert diff.startswith(f"--- a/{siw_faults.SIW_CM}\n+++ b/{siw_faults.SIW_CM}\n")


def test_an_anchor_not_found_once_fails_naming_the_fault(tmp_path: Path) -> None:
    original = tmp_path / "siw_cm.c"
    original.write_text("int siw(void) { return 0; }\n")
    with pytest.raises(LabError, match="fault rst-close: the anchor occurs 0 times"):
        siw_faults._apply(siw_faults.FAULTS["rst-close"], original, tmp_path / "out.c")
    assert not (tmp_path / "out.c").exists()


def test_the_copy_links_sources_and_copies_build_products(tmp_path: Path) -> None:
    src, dst = tmp_path / "build" / "linux", tmp_path / "build-fault" / "linux"
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

    siw_faults._copy_tree(src, dst, extracted, lambda _: None)

    assert os.stat(dst / "drivers" / "a.c").st_ino == os.stat(src / "drivers" / "a.c").st_ino
    assert os.stat(dst / "drivers" / "a.o").st_ino != os.stat(src / "drivers" / "a.o").st_ino
    assert (dst / "drivers" / "a.o").read_bytes() == b"object"
    assert (dst / "tools" / ".x.o.cmd").read_text() == f"cmd_x.o := gcc -c {dst}/tools/x.c\n"
    assert os.stat(dst / "tools" / ".x.o.cmd").st_mtime_ns == built
    assert cmd.read_text() == f"cmd_x.o := gcc -c {src}/tools/x.c\n"
    assert os.readlink(dst / "source-link") == "drivers"
