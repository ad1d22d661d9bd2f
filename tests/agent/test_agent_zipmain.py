"""The zipapp's __main__: it unpacks itself beside the archive once, atomically."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hil.agent import build, zipmain


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """A copy of the current agent build, named by its hash like on a host."""
    bundle = build()
    path = tmp_path / f"{bundle.sha256}.pyz"
    shutil.copyfile(bundle.path, path)
    return path


def test_unpacks_every_entry_beside_the_archive_once(archive: Path) -> None:
    target = zipmain.unpacked(str(archive))
    assert target == str(archive.with_suffix(""))
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
    assert sorted(str(p.relative_to(target)) for p in Path(target).rglob("*") if p.is_file()) == (
        sorted(names)
    )
    main_file = Path(target) / "hil_agent" / "remote" / "main.py"
    stamp = main_file.stat().st_mtime_ns
    assert zipmain.unpacked(str(archive)) == target
    assert main_file.stat().st_mtime_ns == stamp  # not unpacked again
    assert sorted(os.listdir(archive.parent)) == sorted([archive.name, Path(target).name])


def test_a_copy_another_agent_renamed_first_is_used_and_ours_removed(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rename = os.rename
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(str(archive.with_suffix("")) + ".other")

    def other_first(src: str, dst: str) -> None:
        real_rename(dst + ".other", dst)
        real_rename(src, dst)  # fails: the target exists and is not empty

    monkeypatch.setattr(os, "rename", other_first)
    assert zipmain.unpacked(str(archive)) == str(archive.with_suffix(""))
    assert sorted(os.listdir(archive.parent)) == sorted([archive.name, archive.stem])


def test_where_no_copy_can_be_made_the_agent_runs_from_the_zip(archive: Path) -> None:
    archive.with_suffix("").write_text("not a directory")  # the copy's name is taken
    assert zipmain.unpacked(str(archive)) is None
    assert sorted(os.listdir(archive.parent)) == sorted([archive.name, archive.stem])
    hello = subprocess.run(
        [sys.executable, "-I", str(archive)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    ).stdout.splitlines()[0]
    assert json.loads(hello)["hash"] == archive.stem


def test_an_archive_not_named_pyz_is_run_as_it_is(tmp_path: Path) -> None:
    assert zipmain.unpacked(str(tmp_path / "agent.zip")) is None
    assert os.listdir(tmp_path) == []
