"""The agent zipapp: deterministic, self-contained, cached by content hash."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hil.agent import build
from hil.agent.build import archive_bytes, cache_dir

REMOTE = Path(__file__).parents[2] / "hil" / "agent" / "remote"


def test_same_sources_give_the_same_bytes() -> None:
    first, second = archive_bytes(), archive_bytes()
    assert first == second
    assert hashlib.sha256(first).hexdigest() == build().sha256


def test_build_is_cached_under_its_hash() -> None:
    bundle = build()
    assert bundle.path == cache_dir() / f"{bundle.sha256}.pyz"
    assert hashlib.sha256(bundle.path.read_bytes()).hexdigest() == bundle.sha256
    assert bundle.size == bundle.path.stat().st_size


def test_archive_holds_agent_and_pyroute2_sorted_with_fixed_times() -> None:
    zf = zipfile.ZipFile(io.BytesIO(archive_bytes()))
    names = zf.namelist()
    assert names == sorted(names)
    assert {"__main__.py", "hil_agent/remote/main.py", "pyroute2/__init__.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_agent_code_imports_nothing_from_the_rest_of_hil() -> None:
    for path in REMOTE.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import)\s+hil\b", text, re.M), path


def test_threads_building_at_once_into_an_empty_cache_all_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both hosts' agents start in threads of one process (the crash watch, warm-up)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    build.cache_clear()
    try:
        with ThreadPoolExecutor(8) as pool:
            bundles = list(pool.map(lambda _: build.__wrapped__(), range(8)))
    finally:
        build.cache_clear()
    assert {b.path for b in bundles} == {tmp_path / "hil" / "agent" / f"{bundles[0].sha256}.pyz"}
    assert sorted(p.name for p in (tmp_path / "hil" / "agent").iterdir()) == [bundles[0].path.name]
