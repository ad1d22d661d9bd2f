"""Lab state file, stale-lab detection and cleanup, with real processes."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.cli import main
from hil.errors import EXIT_INFRA, InputError, LabError
from hil.lab import control, network, state
from hil.lab.labboot import Images
from hil.lab.state import GuestState, LabState


def first_guest(lab_dir: Path) -> str:
    """The name ``up`` gives the first guest of a lab in ``lab_dir``."""
    return network.guest_name(network.lab_id(lab_dir), 0)


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A process that looks like a lab guest's QEMU: our QMP path on its argv, own session."""
    qmp = str(tmp_path / "lab" / f"{first_guest(tmp_path / 'lab')}.qmp")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", qmp], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 10  # until exec: before it, argv is still pytest's
        while qmp.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        yield proc, qmp
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def ssh_port() -> Iterator[int]:
    """A port on 127.0.0.1 that answers like a guest's sshd: an SSH banner, then close."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                conn.sendall(b"SSH-2.0-stand-in\r\n")

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def recorded(
    lab_dir: Path,
    proc: subprocess.Popen[bytes],
    qmp: str,
    boot: str | None = None,
    name: str | None = None,
    ssh_port: int = 1,
    kernel: str = "/k",
) -> LabState:
    name = name or first_guest(lab_dir)
    guest = GuestState(name, 0, proc.pid, proc.pid, ssh_port, qmp, str(lab_dir / f"{name}.log"))
    lab = LabState(
        str(lab_dir), boot or state.boot_id(), time.time(), "tcg", kernel, (2,), (guest,)
    )
    lab_dir.mkdir(exist_ok=True)
    state.save(lab)
    return lab


def test_state_round_trips(tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]) -> None:
    lab = recorded(tmp_path / "lab", *stand_in)
    assert state.load(tmp_path / "lab") == lab
    assert state.load(tmp_path / "nothing") is None


def test_a_running_lab_is_not_stale(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    assert state.stale_reason(recorded(tmp_path / "lab", *stand_in)) is None


def test_a_killed_guest_makes_the_lab_stale(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    proc, qmp = stand_in
    lab = recorded(tmp_path / "lab", proc, qmp)
    proc.kill()
    proc.wait(10)
    assert state.stale_reason(lab) == f"guest(s) {first_guest(tmp_path / 'lab')} no longer run"
    # Unless it was switched off on purpose (`hil host power HOST off`).
    off = dataclasses.replace(lab, guests=(dataclasses.replace(lab.guests[0], off=True),))
    state.save(off)
    assert state.load(tmp_path / "lab") == off
    assert state.stale_reason(off) is None


def test_a_state_file_from_before_power_loads_with_defaults(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    lab = recorded(tmp_path / "lab", *stand_in)
    raw = json.loads((tmp_path / "lab" / state.STATE_FILE).read_text())
    del raw["memory"], raw["guests"][0]["off"]
    (tmp_path / "lab" / state.STATE_FILE).write_text(json.dumps(raw))
    assert state.load(tmp_path / "lab") == lab
    assert (lab.memory, lab.guests[0].off) == (state.DEFAULT_MEMORY, False)


def test_a_recycled_pid_is_not_our_guest(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    proc, _ = stand_in
    lab = recorded(tmp_path / "lab", proc, str(tmp_path / "other.qmp"))
    assert "no longer run" in (state.stale_reason(lab) or "")


def test_a_lab_from_before_a_reboot_is_stale(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    lab = recorded(tmp_path / "lab", *stand_in, boot="an-earlier-boot")
    assert state.stale_reason(lab) == "the machine rebooted since the lab started"


def test_status_cleans_a_stale_lab_and_leaves_foreign_files(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    recorded(lab_dir, proc, qmp)
    (lab_dir / f"{first_guest(lab_dir)}.log").write_text("log")
    (lab_dir / f"{first_guest(lab_dir)}.d").mkdir()
    (lab_dir / "lab1.pid").write_text("1")  # named as before names carried the lab id
    (lab_dir / "notes.txt").write_text("the user's own file")
    proc.kill()
    proc.wait(10)
    assert control.status(lab_dir, say=lambda _: None) is None
    assert sorted(p.name for p in lab_dir.iterdir()) == ["notes.txt"]


def test_status_reports_a_dead_guest_of_a_lab_that_still_runs_and_cleans_nothing(
    tmp_path: Path,
    stand_in: tuple[subprocess.Popen[bytes], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    lab_dir = tmp_path / "lab"
    proc, qmp = stand_in
    lab = recorded(lab_dir, proc, qmp)
    name = network.guest_name(network.lab_id(lab_dir), 1)
    other_qmp = str(lab_dir / f"{name}.qmp")
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", other_qmp],
        start_new_session=True,
    )
    try:
        guest = GuestState(name, 1, other.pid, other.pid, 1, other_qmp, str(lab_dir / "x.log"))
        state.save(dataclasses.replace(lab, guests=(*lab.guests, guest)))
        proc.kill()
        proc.wait(10)
        found = control.status(lab_dir, say=lambda _: None)
        assert found is not None, "a lab with a guest still running was cleaned away"
        assert [(h.guest.name, h.qemu_alive) for h in found[1]] == [
            (first_guest(lab_dir), False),
            (name, True),
        ]
        assert (lab_dir / state.STATE_FILE).exists()
        assert state.stale_reason(found[0]) is not None  # `up` replaces it
        assert main(["lab", "status", "--dir", str(lab_dir)]) == EXIT_INFRA
        out = capsys.readouterr().out
        assert "UNHEALTHY" in out
        assert f"{first_guest(lab_dir)} is dead (its console: " in out
        assert f"host recover {first_guest(lab_dir)}` starts it again" in out
    finally:
        other.kill()
        other.wait(10)


def test_up_replaces_a_running_lab_whose_names_lack_the_lab_id(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    # A lab of an older hil, its guest named lab0 like every other lab's:
    # reusing it would keep sharing names (and leases) with other labs.
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    recorded(lab_dir, proc, qmp, name="lab0")
    said: list[str] = []
    assert control._reuse_or_clean(lab_dir, 1, said.append) is None
    assert proc.wait(10) != 0
    assert f"its guests are named lab0, not {first_guest(lab_dir)}" in said[0]
    assert state.load(lab_dir) is None


def test_up_reuses_a_healthy_lab_only_when_it_runs_the_kernel_asked_for(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str], ssh_port: int
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    fault, default = tmp_path / "fault" / "bzImage", tmp_path / "default" / "bzImage"
    lab = recorded(lab_dir, proc, qmp, ssh_port=ssh_port, kernel=str(fault))
    said: list[str] = []
    assert control._reuse_or_clean(lab_dir, 1, said.append, Images(fault, (fault,))) == lab
    assert said[-1].startswith(f"lab: already up in {lab_dir}")
    # The default kernel not built yet: the running lab's kernel is taken as it is.
    assert control._reuse_or_clean(lab_dir, 1, said.append, None) == lab
    with pytest.raises(InputError) as e:
        control._reuse_or_clean(lab_dir, 1, said.append, Images(default, (default,)))
    assert str(e.value) == (
        f"{lab_dir}: a lab booted with the kernel {fault} runs here; "
        f"`hil lab down --dir {lab_dir}` first to boot {default}"
    )
    assert proc.poll() is None  # refused, not replaced: the running lab is left alone


def test_up_reuses_a_mixed_lab_only_when_each_guest_runs_the_kernel_asked_for(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str], ssh_port: int
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    old, new = tmp_path / "6.1" / "bzImage", tmp_path / "6.12" / "bzImage"
    lab = recorded(lab_dir, proc, qmp, ssh_port=ssh_port, kernel=str(old))
    lab = dataclasses.replace(lab, guests=(dataclasses.replace(lab.guests[0], kernel=str(new)),))
    state.save(lab)
    assert lab.mixed is False  # one guest: nothing to differ from
    assert lab.kernel_of(lab.guests[0]) == str(new)
    assert control._reuse_or_clean(lab_dir, 1, print, Images.of(old, 1, {0: new})) == lab
    with pytest.raises(InputError) as e:
        control._reuse_or_clean(lab_dir, 1, print, Images.of(old, 1, {}))
    assert str(e.value) == (
        f"{lab_dir}: a lab booted with the kernel {new} on {first_guest(lab_dir)} runs here; "
        f"`hil lab down --dir {lab_dir}` first to boot {old}"
    )


def test_up_reuses_a_lab_only_in_the_form_asked_for(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str], ssh_port: int
) -> None:
    proc, qmp = stand_in
    lab_dir = tmp_path / "lab"
    lab = recorded(lab_dir, proc, qmp, ssh_port=ssh_port)
    with pytest.raises(InputError) as e:
        control._reuse_or_clean(lab_dir, 1, print, None, middlebox=True)
    assert str(e.value) == (
        f"{lab_dir}: a lab without a middlebox runs here; `hil lab down --dir {lab_dir}` first"
    )
    state.save(dataclasses.replace(lab, middlebox=True))
    assert control._reuse_or_clean(lab_dir, 1, print, None, middlebox=True) is not None
    with pytest.raises(InputError, match="a lab with a middlebox runs here"):
        control._reuse_or_clean(lab_dir, 1, print, None)
    assert proc.poll() is None  # refused, not replaced


def test_a_kernel_for_a_guest_the_lab_lacks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"a kernel for guest 2: the lab has guests 0-1"):
        control.up(tmp_path / "lab", hosts=2, guest_images={2: tmp_path / "bzImage"})


def test_a_state_file_from_before_mixed_labs_boots_each_guest_with_the_lab_kernel(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str]
) -> None:
    lab = recorded(tmp_path / "lab", *stand_in)
    raw = json.loads((tmp_path / "lab" / state.STATE_FILE).read_text())
    del raw["guests"][0]["kernel"]
    (tmp_path / "lab" / state.STATE_FILE).write_text(json.dumps(raw))
    loaded = state.load(tmp_path / "lab")
    assert loaded is not None
    assert loaded.kernel_of(loaded.guests[0]) == lab.kernel == "/k"


def test_status_names_the_kernel_the_lab_booted(
    tmp_path: Path, stand_in: tuple[subprocess.Popen[bytes], str], ssh_port: int
) -> None:
    lab_dir = tmp_path / "lab"
    fault = tmp_path / "fault" / "bzImage"
    recorded(lab_dir, *stand_in, ssh_port=ssh_port, kernel=str(fault))
    argv = [sys.executable, "-m", "hil", "lab", "status", "--dir", str(lab_dir)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert f"  kernel {fault} (not the default)\n" in out.stdout
    out = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60, check=True)
    status = json.loads(out.stdout)
    assert (status["kernel"], status["kernel_default"]) == (str(fault), False)


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
