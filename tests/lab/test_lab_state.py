"""Lab state file, stale-lab detection and cleanup, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.lab import control, state
from hil.lab.state import GuestState, LabState


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A process that looks like a lab guest's QEMU: our QMP path on its argv, own session."""
    qmp = str(tmp_path / "lab" / "lab0.qmp")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", qmp],
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 10  # until exec: before it, argv is still pytest's
        while qmp.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        yield proc, qmp
    finally:
        proc.kill()
        proc.wait(10)


def recorded(lab_dir: Path, proc: subprocess.Popen[bytes], qmp: str, boot: str | None = None) -> LabState:
    guest = GuestState("lab0", 0, proc.pid, proc.pid, 1, qmp, str(lab_dir / "lab0.log"))
    lab = LabState(str(lab_dir), boot or state.boot_id(), time.time(), "tcg", "/k", (2,), (guest,))
    lab_dir.mkdir(exist_ok=True)
    state.save(lab)
    return lab


def test_state_round_trips(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    lab = recorded(tmp_path / "lab", *stand_in)
    assert state.load(tmp_path / "lab") == lab
    assert state.load(tmp_path / "nothing") is None


def test_a_running_lab_is_not_stale(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    assert state.stale_reason(recorded(tmp_path / "lab", *stand_in)) is None


def test_a_killed_guest_makes_the_lab_stale(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    proc, qmp = stand_in
    lab = recorded(tmp_path / "lab", proc, qmp)
    proc.kill()
    proc.wait(10)
    assert state.stale_reason(lab) == "guest(s) lab0 no longer run"


def test_a_recycled_pid_is_not_our_guest(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    proc, _ = stand_in
    lab = recorded(tmp_path / "lab", proc, str(tmp_path / "other.qmp"))
    assert "no longer run" in (state.stale_reason(lab) or "")


def test_a_lab_from_before_a_reboot_is_stale(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    lab = recorded(tmp_path / "lab", *stand_in, boot="an-earlier-boot")
    assert state.stale_reason(lab) == "the machine rebooted since the lab started"


def test_status_cleans_a_stale_lab_and_leaves_foreign_files(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    recorded(lab_dir, proc, qmp)
    (lab_dir / "lab0.log").write_text("log")
    (lab_dir / "lab0.d").mkdir()
    (lab_dir / "notes.txt").write_text("the user's own file")
    proc.kill()
    proc.wait(10)
    assert control.status(lab_dir, say=lambda _: None) is None
    assert sorted(p.name for p in lab_dir.iterdir()) == ["notes.txt"]


def test_down_stops_a_recorded_guest_process_group(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    recorded(lab_dir, proc, qmp)
    assert control.down(lab_dir, say=lambda _: None) is True
    assert proc.wait(10) != 0  # SIGTERM to its group, QMP being absent
    assert not lab_dir.exists()
    assert control.down(lab_dir, say=lambda _: None) is False


def test_unreadable_state_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "lab.json").write_text("{not json")
    with pytest.raises(LabError, match="unreadable lab state .* remove"):
        state.load(tmp_path)


@pytest.mark.parametrize("bad", ["/tmp/a b", "/tmp/a,b", "/tmp/$(x)"])
def test_lab_dirs_that_qemu_options_cannot_carry_are_refused(bad: str) -> None:
    with pytest.raises(InputError, match="use only letters"):
        state.check_dir(Path(bad))
