"""hil.wire.tshark: the real tshark, and how it fails (missing, too old, bad file, timeout)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hil.errors import HilError, InputError
from hil.wire import tshark
from hil.wire.decode import decode

RPING = Path(__file__).resolve().parents[1] / "data" / "wire" / "rping-siw.pcap"


def test_the_installed_tshark_is_new_enough_and_names_rdmap_opcodes() -> None:
    found = tshark.check_version()
    assert tuple(int(n) for n in found.split(".")[:2]) >= tshark.MIN_VERSION
    names = tshark.value_names("iwarp_rdma.opcode")
    assert (names[0], names[1], names[3], names[7]) == (
        "Write",
        "Read Request",
        "Send",
        "Terminate",
    )


def test_every_field_the_decoder_asks_for_is_one_tshark_knows() -> None:
    # A field tshark does not know makes it refuse the whole run ("Some fields aren't valid").
    read = tshark.read(RPING, timeout=60)
    assert len(read.packets) == 34 and read.warning is None
    assert read.packets[0]["tcp.seq_raw"] == ["2750042037"]


def test_tshark_missing_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HilError, match=r"tshark is not installed.*apt-get install tshark"):
        decode({"a": RPING})


def test_a_tshark_too_old_is_refused_naming_both_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stand-in for an old release: only its --version answer matters here.
    fake = tmp_path / "tshark"
    fake.write_text(
        "#!/bin/sh\necho 'TShark (Wireshark) 3.4.16 (Git v3.4.16 packaged as 3.4.16-0+deb11u1)'\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(
        HilError, match=r"tshark 3\.4\.16 is too old.*needs 4\.0 or newer.*apt-get install tshark"
    ):
        decode({"a": RPING})


@pytest.mark.parametrize(
    "content, why",
    [
        (b"hello\n", r"not a packet capture \(pcap or pcapng\): it starts with b'hell'"),
        (b"", r"not a packet capture"),
    ],
    ids=["text", "empty"],
)
def test_a_file_that_is_not_a_capture_is_bad_input(
    tmp_path: Path, content: bytes, why: str
) -> None:
    # tshark alone would read "hello\n" as an MP4 file and exit 0.
    bad = tmp_path / "notes.pcap"
    bad.write_bytes(content)
    with pytest.raises(InputError, match=why):
        decode({"a": bad})


def test_a_missing_capture_is_bad_input_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot read the capture .*/gone\.pcap: No such file"):
        decode({"a": tmp_path / "gone.pcap"})


def test_a_capture_cut_short_decodes_up_to_the_cut_with_a_note(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(RPING.read_bytes()[:3000])
    exchange = decode({"a": cut})
    assert exchange.notes and "cut short in the middle of a packet" in exchange.notes[0]
    (conn,) = exchange.connections
    assert conn.mpa("reply") is not None and len(conn.packets) < 34


def test_tshark_running_past_its_timeout_is_an_error_naming_the_file() -> None:
    tshark.check_version()  # so the bound below is the decode's alone
    with pytest.raises(
        HilError, match=r"tshark did not finish decoding .*rping-siw\.pcap within 0\.001 s"
    ):
        decode({"a": RPING}, timeout=0.001)
