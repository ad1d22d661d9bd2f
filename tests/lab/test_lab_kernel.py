"""A kernel cached or built: missing tools, the build lock; the real build: test_virtual_lab."""

from __future__ import annotations

import fcntl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.lab import kernel, kernelmake


def test_a_cached_kernel_is_returned_at_once(kernel_cache: Path) -> None:
    image = kernel.kernel_dir(kernel.find_source()) / "bzImage"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"cached")
    started = time.monotonic()
    assert kernel.ensure_kernel() == image
    assert kernel.cached_kernel() == image
    assert time.monotonic() - started < 2


def test_missing_build_tools_name_the_debian_packages(
    kernel_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(kernelmake, "configkernel", lambda: None)
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
    kernel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernelmake, "BUILD_TIMEOUT", 0.5)
    lock = kernel_cache / "kernel" / ".build.lock"
    lock.parent.mkdir(parents=True)
    said: list[str] = []
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LabError, match="another build held .* for over"):
            kernel.ensure_kernel(progress=said.append)
    assert said == ["lab kernel: another build is running; waiting for it to finish"]


def test_a_queued_waiter_gets_the_lock_at_its_release_and_an_abandoned_one_leaves_it_free(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "lab.lock"
    got = threading.Event()

    def waiter() -> None:
        with kernel.waited_lock(lock, 30, "another lab", lambda line: None):
            got.set()

    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        thread = threading.Thread(target=waiter)
        thread.start()
        assert not got.wait(0.3)
    thread.join(10)
    assert got.is_set()
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LabError, match="another lab held"):
            with kernel.waited_lock(lock, 0.2, "another lab", lambda line: None):
                pass
    # Given up, the waiter's queued flock (granted at this release) goes with its fd.
    deadline = time.monotonic() + 5
    while subprocess.run(["flock", "-n", str(lock), "true"]).returncode != 0:
        assert time.monotonic() < deadline, "the abandoned waiter kept the lock"
        time.sleep(0.05)


def test_the_debug_flavour_is_built_on_the_minimal_base_only() -> None:
    with pytest.raises(InputError, match="minimal base only"):
        kernel.ensure_kernel(base="defconfig", debug=True)
