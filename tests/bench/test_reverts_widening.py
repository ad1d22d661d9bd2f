"""bench/reverts/widening.py: a revert's widening patch and the two kernels it makes."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmod import load_bench
from labtree import applied, lab_tree

from hil.errors import InputError
from hil.lab import patched

REVERTS = Path(__file__).resolve().parents[2] / "bench" / "reverts"
wid = load_bench("revert_widening", "reverts/widening.py")

DIFF = "--- a/drivers/x.c\n+++ b/drivers/x.c\n@@ -1 +1 @@\n-a\n+b\n"
WIDEN = "--- a/drivers/x.c\n+++ b/drivers/x.c\n@@ -9 +9,2 @@\n c\n+msleep(ms);\n"


def _patch(path: Path, kernel: str | None, diff: str, killed: str = "-k fixid") -> Path:
    header = f"Name: {path.stem}\nWrong: w\nKilled-by: suites/test_regressions.py {killed}\n"
    path.write_text(header + (f"Kernel: {kernel}\n" if kernel else "") + diff)
    return path


def test_a_revert_without_a_widening_has_none(tmp_path: Path) -> None:
    revert = patched.read_patch(_patch(tmp_path / "fixid.patch", "debug", DIFF))
    assert wid.widening(revert, tmp_path / "widen") is None


def test_the_widened_revert_is_the_revert_then_the_widening_on_its_kernel(tmp_path: Path) -> None:
    (tmp_path / "widen").mkdir()
    revert = patched.read_patch(_patch(tmp_path / "fixid.patch", "debug", DIFF))
    _patch(tmp_path / "widen" / "fixid.patch", None, WIDEN)
    w = wid.widening(revert, tmp_path / "widen")
    both = wid.widened(revert, w)
    assert both.name == "fixid-widened" and both.diff == DIFF + WIDEN
    assert both.files == ("drivers/x.c",)  # once: patch applies the second diff after the first
    assert not both.debug  # the widening's kernel (production), not the revert's (debug)
    fixed = wid.fixed_widened(w)
    assert (fixed.name, fixed.diff, fixed.killed_by) == ("widen-fixid", WIDEN, revert.killed_by)


def test_a_widening_of_code_the_fix_removed_has_no_fixed_twin(tmp_path: Path) -> None:
    (tmp_path / "widen").mkdir()
    revert = patched.read_patch(_patch(tmp_path / "fixid.patch", "debug", DIFF))
    path = _patch(tmp_path / "widen" / "fixid.patch", "debug", WIDEN)
    path.write_text("Fixed-kernel: none (the fix removed the walk)\n" + path.read_text())
    w = wid.widening(revert, tmp_path / "widen")
    assert wid.fixed_widened(w) is None
    assert wid.widened(revert, w).diff == DIFF + WIDEN  # the revert+widen kernel still is


def test_an_unfixed_trees_widened_kernel_is_the_widening_on_that_tree(tmp_path: Path) -> None:
    """A fix the lab's 6.1 never had: the bug kernel is 6.1 widened, the fixed twin the
    widening on its own tree (6.12)."""
    (tmp_path / "widen").mkdir()
    path = tmp_path / "fixid.patch"
    path.write_text(
        "Name: fixid\nWrong: w\nKilled-by: suites/test_regressions.py -k fixid\n"
        "Unfixed: 6.1 lacks it\nKernel: debug\n"
    )
    revert = patched.read_patch(path)
    _patch(tmp_path / "widen" / "fixid.patch", "debug", "Tree: 6.12\n" + WIDEN)
    w = wid.widening(revert, tmp_path / "widen")
    bug = wid.widened(revert, w)
    assert (bug.diff, bug.tree, bug.unfixed, bug.debug) == (WIDEN, None, "6.1 lacks it", True)
    assert wid.fixed_widened(w).tree == "6.12"


def test_a_widening_must_name_its_reverts_test(tmp_path: Path) -> None:
    (tmp_path / "widen").mkdir()
    revert = patched.read_patch(_patch(tmp_path / "fixid.patch", None, DIFF))
    _patch(tmp_path / "widen" / "fixid.patch", None, WIDEN, killed="-k other")
    with pytest.raises(InputError, match="the same test must run on both kernels"):
        wid.widening(revert, tmp_path / "widen")


@pytest.mark.parametrize("path", sorted((REVERTS / "widen").glob("*.patch")), ids=lambda p: p.stem)
def test_each_widening_belongs_to_a_revert_and_says_its_window_and_knob(path: Path) -> None:
    revert = patched.read_patch(REVERTS / path.name)
    w = wid.widening(revert)
    assert w is not None and w.field("window") and w.field("knob")
    assert f"hil_widen_{w.name}" in (w.field("knob") or "") and f"hil_widen_{w.name}" in w.diff
    assert f"hil widen {w.name}: window open" in w.diff  # the marker the test reads


@pytest.mark.parametrize("path", sorted((REVERTS / "widen").glob("*.patch")), ids=lambda p: p.stem)
def test_each_widening_applies_to_the_fixed_tree_and_atop_its_revert(
    tmp_path: Path, path: Path
) -> None:
    revert = patched.read_patch(REVERTS / path.name)
    w = wid.widening(revert)
    twin = wid.fixed_widened(w)  # None: the fix removed what the widening holds open
    for p in [*([twin] if twin else []), wid.widened(revert, w)]:
        # Each on its own tree: an unfixed revert's (6.1) is not its fixed twin's (6.12).
        tree = lab_tree(p.tree)  # skips where that source is not extracted
        copy = applied(p, tree, tmp_path / p.name)
        text = "".join((copy / rel).read_text() for rel in p.files)
        assert f"hil widen {w.name}: window open" in text
        reverted = p.name == f"{revert.name}-widened" and not revert.unfixed
        assert (f"hil revert {revert.name}" in text) == reverted
