"""Kernel cache keys, config checks, missing tools; the real build is in test_virtual_lab."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import pytest

from hil.errors import LabError
from hil.lab import kernel


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hil"


def test_the_fragment_enables_siw_and_rdma_user_access() -> None:
    text = kernel.FRAGMENT.read_text()
    for option in (
        "CONFIG_RDMA_SIW=y",
        "CONFIG_INFINIBAND_USER_ACCESS=y",
        "CONFIG_VIRTIO_NET=y",
        "CONFIG_NET_SCH_NETEM=y",
        "# CONFIG_DRM is not set",
    ):
        assert option in text.splitlines()


def test_unmet_options_lists_what_kconfig_dropped() -> None:
    fragment = "CONFIG_A=y\n# comment\nCONFIG_B=y\n# CONFIG_C is not set\n"
    assert kernel.unmet_options(fragment, "CONFIG_A=y\n# CONFIG_B is not set\n") == ["CONFIG_B=y"]
    assert kernel.unmet_options(fragment, "CONFIG_A=y\nCONFIG_B=y\n") == []


def test_cache_key_follows_the_fragment(tmp_path: Path) -> None:
    a = tmp_path / "a.config"
    a.write_text("CONFIG_RDMA_SIW=y\n")
    key_a = kernel.config_hash(a)
    assert kernel.config_hash(a) == key_a
    a.write_text("CONFIG_RDMA_SIW=y\nCONFIG_DUMMY=y\n")
    assert kernel.config_hash(a) != key_a


def test_cache_lives_under_xdg_cache_home_keyed_by_source_version(cache: Path) -> None:
    source = kernel.find_source()
    where = kernel.kernel_dir(source)
    assert where.parent == cache / "kernel"
    assert where.name.startswith(source.version.replace(":", "_"))
    assert where.name.endswith(kernel.config_hash())


def test_a_cached_kernel_is_returned_at_once(cache: Path) -> None:
    image = kernel.kernel_dir(kernel.find_source()) / "bzImage"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"cached")
    started = time.monotonic()
    assert kernel.ensure_kernel() == image
    assert kernel.cached_kernel() == image
    assert time.monotonic() - started < 2


def test_missing_build_tools_name_the_debian_packages(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(kernel, "_configkernel", lambda: None)
    with pytest.raises(LabError) as e:
        kernel.ensure_kernel()
    message = str(e.value)
    for package in ("build-essential", "bc", "flex", "bison", "dwarves", "virtme-ng"):
        assert package in message
    assert "ci/install" in message


def test_no_linux_source_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="apt-get install linux-source-6.1"):
        kernel.find_source(tmp_path)


def test_a_build_held_by_another_process_is_waited_for_with_a_limit(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel, "BUILD_TIMEOUT", 0.5)
    monkeypatch.setattr(kernel, "PROGRESS_EVERY", 0.1)
    lock = cache / "kernel" / ".build.lock"
    lock.parent.mkdir(parents=True)
    said: list[str] = []
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LabError, match="another build held .* for over"):
            kernel.ensure_kernel(progress=said.append)
    assert said == ["lab kernel: another build is running; waiting for it to finish"]
