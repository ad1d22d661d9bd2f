"""hil/lab/patched.py: patch headers, and a patch applied to a copy, the default tree untouched.

A tiny fake tree stands in for the kernel's (no build here); the last test
checks every patch of bench/mutants/ and bench/reverts/ against the real lab
kernel tree, and skips when that tree was never extracted.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from labtree import applied, lab_tree

from hil.errors import InputError, LabError
from hil.lab import kernel, kernel_source, patched

MUTANTS = Path(__file__).resolve().parents[2] / "bench" / "mutants"
REVERTS = MUTANTS.with_name("reverts")
ORIGINAL = {"drivers/a.c": "int a(void)\n{\n\treturn 0;\n}\n", "drivers/b.c": "int b;\n"}


def fake_trees(tmp_path: Path) -> tuple[Path, Path]:
    """A default tree and its copy whose files are hard links to the default's."""
    base, copy = tmp_path / "base" / "linux", tmp_path / "copy" / "linux"
    for rel, text in ORIGINAL.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(base / rel, copy / rel)
    return base, copy


def write_patch(tmp_path: Path, name: str, new_a: str, header: str | None = None) -> Path:
    """A patch file of ``drivers/a.c`` -> ``new_a`` made with ``diff -u``, with a header."""
    (tmp_path / "new.c").write_text(new_a)
    (tmp_path / "old.c").write_text(ORIGINAL["drivers/a.c"])
    argv = ["diff", "-u", "--label", "a/drivers/a.c", "--label", "b/drivers/a.c"]
    diff = subprocess.run(
        [*argv, str(tmp_path / "old.c"), str(tmp_path / "new.c")],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout
    if header is None:
        header = (
            f"Name: {name}\nWrong: a returns 1\n  instead of 0\n"
            "Killed-by: suites/test_close.py\nKilled-by: suites/test_connect.py -k 'reject or x'\n"
        )
    path = tmp_path / f"{name}.patch"
    path.write_text(header + diff)
    return path


def test_the_header_gives_name_wrong_behaviour_and_suites(tmp_path: Path) -> None:
    p = patched.read_patch(write_patch(tmp_path, "a-one", ORIGINAL["drivers/a.c"] + "int c;\n"))
    assert p.name == "a-one"
    assert p.wrong == "a returns 1 instead of 0"
    assert p.killed_by == (
        patched.Suite("suites/test_close.py"),
        patched.Suite("suites/test_connect.py", "reject or x"),
    )
    assert p.killed_by[1].pytest_args() == ["suites/test_connect.py", "-k", "reject or x"]
    assert p.files == ("drivers/a.c",)
    assert p.diff.startswith("--- a/drivers/a.c\n")
    assert p.extra == () and not p.debug


def test_a_suite_may_name_options_of_hils_plugin(tmp_path: Path) -> None:
    header = (
        "Name: nightly\nWrong: w\n"
        "Killed-by: suites/test_impairment.py -k delay --hil-race-sweeps full\n"
        "Killed-by: suites/test_close.py --hil-race-sweeps full\n"
    )
    p = patched.read_patch(write_patch(tmp_path, "nightly", "int a;\n", header))
    assert [s.pytest_args() for s in p.killed_by] == [
        ["suites/test_impairment.py", "-k", "delay", "--hil-race-sweeps", "full"],
        ["suites/test_close.py", "--hil-race-sweeps", "full"],
    ]


def test_other_header_fields_are_kept_and_kernel_debug_asks_for_the_debug_tree(
    tmp_path: Path,
) -> None:
    path = write_patch(tmp_path, "a-one", ORIGINAL["drivers/a.c"] + "int c;\n")
    path.write_text('Fix: abc "x: y"\nRuns: 3\nKernel: debug\n' + path.read_text())
    p = patched.read_patch(path)
    assert (p.field("fix"), p.field("runs"), p.field("nope")) == ('abc "x: y"', "3", None)
    assert p.debug and p.name == "a-one" and p.tree is None
    path.write_text("Tree: 6.12\n" + path.read_text())
    assert patched.read_patch(path).tree == "6.12"


def test_a_revert_of_a_fix_its_tree_never_had_may_have_no_diff(tmp_path: Path) -> None:
    """``Unfixed:`` says the tree lacks the fix: nothing to undo, its kernel is the tree's
    own (tests/bench/test_reverts_widening.py: widened)."""
    path = tmp_path / "fixid.patch"
    path.write_text("Name: fixid\nWrong: w\nKilled-by: suites/test_close.py\n")
    with pytest.raises(InputError, match="no diff"):
        patched.read_patch(path)
    path.write_text(path.read_text() + "Unfixed: 6.1 lacks it\nKernel: debug\n")
    p = patched.read_patch(path)
    assert (p.unfixed, p.files, p.diff, p.debug) == ("6.1 lacks it", (), "", True)


def test_a_patch_without_a_diff_builds_nothing_its_kernel_is_the_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fixid.patch"
    path.write_text("Name: fixid\nWrong: w\nKilled-by: suites/test_close.py\nUnfixed: u\n")
    asked: list[bool] = []

    def ensure_kernel(**kw: object) -> Path:
        asked.append(bool(kw["debug"]))
        return tmp_path / "bzImage"

    monkeypatch.setattr(kernel, "find_source", lambda spec=None: None)
    monkeypatch.setattr(kernel, "ensure_kernel", ensure_kernel)
    assert patched.build(patched.read_patch(path)) == tmp_path / "bzImage"
    assert asked == [False]


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("Name: other\nWrong: w\nKilled-by: s.py\n", "is not the file's name"),
        ("Name: bad\nKilled-by: s.py\n", "no Wrong: line"),
        ("Name: bad\nWrong: w\n", "no Killed-by: line"),
        ("Name: bad\nWrong: w\nKilled-by: s.py -x y\n", "is not 'SUITE' or 'SUITE -k EXPR'"),
        ("Name: bad\nWrong: w\nKilled-by: s.py -k a -x\n", "optionally followed by --hil-"),
    ],
)
def test_a_bad_header_is_refused_naming_the_file(tmp_path: Path, header: str, problem: str) -> None:
    path = write_patch(tmp_path, "bad", "int a;\n", header)
    with pytest.raises(InputError, match=f"patch {path}: .*{problem}"):
        patched.read_patch(path)


def test_a_path_outside_the_tree_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "up.patch"
    path.write_text("Name: up\nWrong: w\nKilled-by: s.py\n--- a/../x.c\n+++ b/../x.c\n")
    with pytest.raises(InputError, match="not a path inside the tree"):
        patched.read_patch(path)


def test_a_patch_breaks_only_the_link_of_the_file_it_changes(tmp_path: Path) -> None:
    base, copy = fake_trees(tmp_path)
    new_a = ORIGINAL["drivers/a.c"].replace("return 0", "return 1")
    p = patched.read_patch(write_patch(tmp_path, "a-one", new_a))

    patched.apply(p, base, copy)

    assert (copy / "drivers/a.c").read_text() == new_a
    assert (base / "drivers/a.c").read_text() == ORIGINAL["drivers/a.c"]
    assert os.stat(copy / "drivers/a.c").st_ino != os.stat(base / "drivers/a.c").st_ino
    assert os.stat(copy / "drivers/b.c").st_ino == os.stat(base / "drivers/b.c").st_ino
    assert not list(copy.rglob("*.orig")) and not list(copy.rglob("*.rej"))


def test_applying_again_or_another_patch_starts_from_the_default_file(tmp_path: Path) -> None:
    base, copy = fake_trees(tmp_path)
    one = patched.read_patch(write_patch(tmp_path, "one", "int a(void)\n{\n\treturn 1;\n}\n"))
    patched.apply(one, base, copy)
    patched.apply(one, base, copy)  # a rebuild of the same tree: not "already applied"
    assert (copy / "drivers/a.c").read_text() == "int a(void)\n{\n\treturn 1;\n}\n"

    two = patched.read_patch(write_patch(tmp_path, "two", "int a(void)\n{\n\treturn 2;\n}\n"))
    patched.apply(two, base, copy)
    assert (copy / "drivers/a.c").read_text() == "int a(void)\n{\n\treturn 2;\n}\n"


def test_a_patch_that_does_not_apply_names_the_mutant_and_file(tmp_path: Path) -> None:
    base, copy = fake_trees(tmp_path)
    p = patched.read_patch(write_patch(tmp_path, "stale", "int a(void)\n{\n\treturn 1;\n}\n"))
    (base / "drivers/a.c").write_text("long a(void)\n{\n\treturn 7;\n}\n")  # the source moved on

    with pytest.raises(
        LabError, match=r"patched stale: .*stale.patch does not apply to drivers/a.c"
    ):
        patched.apply(p, base, copy)
    assert (copy / "drivers/a.c").read_text() == "long a(void)\n{\n\treturn 7;\n}\n"  # dry run


def test_a_patch_of_a_file_the_tree_lacks_names_it(tmp_path: Path) -> None:
    base, copy = fake_trees(tmp_path)
    path = write_patch(tmp_path, "gone", "int a;\n")
    path.write_text(path.read_text().replace("drivers/a.c", "drivers/z.c"))
    with pytest.raises(LabError, match="patched gone: drivers/z.c is not a file of the lab"):
        patched.apply(patched.read_patch(path), base, copy)


@pytest.mark.parametrize(
    ("where", "at_least", "mark"), [(MUTANTS, 10, "mutant"), (REVERTS, 4, "revert")]
)
def test_every_patch_applies_to_the_lab_kernel_tree(
    tmp_path: Path, where: Path, at_least: int, mark: str
) -> None:
    tree = lab_tree()
    mutants = [patched.read_patch(f) for f in sorted(where.glob("*.patch"))]
    assert len(mutants) >= at_least
    for m in [m for m in mutants if m.tree is None and m.files]:
        before = {rel: (tree / rel).read_bytes() for rel in m.files}
        copy = applied(m, tree, tmp_path)
        assert {rel: (tree / rel).read_bytes() for rel in m.files} == before
        assert all(f"hil {mark} {m.name}" in (copy / rel).read_text() for rel in m.files)


OTHER_TREES = [p for p in sorted(REVERTS.glob("*.patch")) if patched.read_patch(p).tree is not None]


@pytest.mark.parametrize("path", OTHER_TREES, ids=lambda p: p.stem)
def test_a_revert_of_another_kernel_source_applies_to_that_tree(tmp_path: Path, path: Path) -> None:
    r = patched.read_patch(path)
    # Skips where that source is not extracted (ci/install --kernel-sources 6.12).
    tree = lab_tree(r.tree)
    copy = applied(r, tree, tmp_path)
    assert all(f"hil revert {r.name}" in (copy / rel).read_text() for rel in r.files)


def test_a_patch_of_another_tree_is_cached_beside_that_trees_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seen: list[str | None] = []

    def find_source(spec: str | None = None) -> kernel_source.KernelSource:
        seen.append(spec)
        version = "6.12.118-1" if spec == "6.12" else "6.1.192-3"
        return kernel_source.KernelSource(f"linux-source-{spec or '6.1'}", version, tmp_path)

    monkeypatch.setattr(kernel, "find_source", find_source)
    other = patched.patched_dir("60dc7fcafea8", debug=True, tree="6.12")
    default = patched.patched_dir("53a3f7770497", debug=True)
    assert seen == ["6.12", None]
    assert other.name.startswith("6.12.118-1-") and other.name.endswith("-patched-60dc7fcafea8")
    assert default.name.startswith("6.1.192-3-")
