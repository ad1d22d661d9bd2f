"""What the lab's unit tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kernel cache: ``$XDG_CACHE_HOME`` under the test's tmp_path; its ``hil`` dir."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hil"
