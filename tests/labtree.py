"""The real lab kernel tree for tests that check bench/'s patches apply (no build, no lab)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hil.errors import LabError
from hil.lab import kernel, patched


def lab_tree(spec: str | None = None) -> Path:
    """The extracted tree of the kernel source ``spec`` (default the lab's), of either
    flavour (their sources are the same); the test skips when there is none."""
    try:
        source = kernel.find_source(spec=spec)
    except LabError as e:
        pytest.skip(str(e))
    trees = [kernel.tree_dir(source, debug=debug) for debug in (False, True)]
    for tree in trees:
        if (tree / "drivers/infiniband/sw/siw/siw_cm.c").is_file():
            return tree
    pytest.skip(f"no lab kernel tree ({trees[0]}): `hil lab kernel` extracts and builds it")


def applied(p: patched.Patch, tree: Path, work: Path) -> Path:
    """``p`` applied to a copy of ``tree``'s files it touches, hard-linked into ``work/NAME``
    as a real build's work dir is (patched.apply breaks the links); the copy's root."""
    copy = work / p.name / "linux"
    for rel in p.files:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(tree / rel, copy / rel)
    patched.apply(p, tree, copy)
    return copy
