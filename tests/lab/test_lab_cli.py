"""``hil lab`` on the command line: bad input is one line and exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from vlab import hil_lab


@pytest.mark.parametrize(
    "args, message",
    [
        (["up", "--hosts", "1"], "--hosts must be between 2 and"),
        (["up", "--dir", "/tmp/a b"], "use only letters"),
        (["up", "--accel", "xen"], "invalid choice: 'xen'"),
        (["up", "--kernel", "/no/bzImage", "--debug"], "give it with --kernel SERIES, not a path"),
        (["up", "--kernel-b", "/no/bzImage"], "kernel /no/bzImage: No such file or directory"),
        (["up", "--middlebox", "--hosts", "3"], "--middlebox sits between two hosts, not 3"),
        (["kernel", "--source", "linux-6"], "kernel source 'linux-6': give a Debian package"),
        (["kernel", "--source", "/no/linux-source-6.12.tar.xz"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(args: list[str], message: str) -> None:
    out = hil_lab(*args)
    assert out.returncode == 1
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_status_and_inventory_of_no_lab(tmp_path: Path) -> None:
    out = hil_lab("status", "--dir", str(tmp_path / "none"))
    assert (out.returncode, out.stdout.strip()) == (3, f"no lab in {tmp_path / 'none'}")
    out = hil_lab("inventory", "--dir", str(tmp_path / "none"))
    assert out.returncode == 3
    assert f"start one with `hil lab up --dir {tmp_path / 'none'}`" in out.stderr
    out = hil_lab("down", "--dir", str(tmp_path / "none"))
    assert out.returncode == 0


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "No such file or directory; give the path of a bzImage"),
        (b"not a kernel\n", "not an x86 bzImage (no boot header 'HdrS' at 0x202)"),
    ],
)
def test_up_with_a_kernel_that_is_no_bzimage_is_refused_before_anything_starts(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    image = tmp_path / "bzImage"
    if content is not None:
        image.write_bytes(content)
    out = hil_lab("up", "--dir", str(tmp_path / "lab"), "--kernel", str(image))
    assert out.returncode == 1
    assert out.stderr.strip() == f"hil: error: kernel {image}: {message}" + (
        "; give arch/x86/boot/bzImage of a kernel build" if content else ""
    )
    assert not (tmp_path / "lab").exists()
