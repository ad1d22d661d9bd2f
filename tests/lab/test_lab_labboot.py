"""Booting a lab: the kernel image to boot is checked (the boot itself: test_virtual_lab)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import InputError
from hil.lab import labboot


def test_a_kernel_to_boot_is_an_x86_bzimage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "bzImage"
    image.write_bytes(bytes(0x202) + b"HdrS" + bytes(16))
    monkeypatch.chdir(tmp_path)
    assert labboot.check_image(Path("bzImage")) == image
    image.write_bytes(bytes(0x206))
    with pytest.raises(InputError, match="not an x86 bzImage"):
        labboot.check_image(image)
