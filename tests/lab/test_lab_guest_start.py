"""Starting a guest (hil/lab/guests.py ``start``) against a stand-in for vng and QEMU.

The stand-in does what QEMU does at start and what the two cases hinge on:
it writes its pidfile, only a moment later binds its QMP socket (unlinking
what is there), answers QMP, and lives on after ``start`` returns, as a guest
does.  The real QEMU path is covered by every lab test; these two pin races
that a lab run meets only now and then (a guest killed and started again,
a guest started by a process whose output is piped).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hil.errors import LabError
from hil.lab import guestcmd, guests, network
from hil.lab.state import GuestState, qemu_alive

FAKE_VNG = textwrap.dedent(
    """\
    import os, socket, sys, time
    opts = next(a for a in sys.argv if a.startswith("--qemu-opts=")).split("=", 1)[1].split()
    pidfile = opts[opts.index("-pidfile") + 1]
    qmp = opts[opts.index("-qmp") + 1].split(",")[0].removeprefix("unix:")
    print("fake QEMU starting", flush=True)
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(1.0)  # QEMU writes its pidfile before it binds its monitor socket
    if os.path.exists(qmp):
        os.unlink(qmp)
    server = socket.socket(socket.AF_UNIX)
    server.bind(qmp)
    server.listen()
    while True:
        conn, _ = server.accept()
        if os.environ.get("FAKE_QMP") == "hang up":
            conn.close()
            continue
        f = conn.makefile("rwb")
        f.write(b'{"QMP": {"version": {}}}\\n')
        f.flush()
        for line in f:
            f.write(b'{"return": {}}\\n')
            f.flush()
            if b'"quit"' in line:
                os._exit(0)
    """
)


@pytest.fixture
def fake_vng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "vng"
    script.write_text(f"#!{sys.executable}\n{FAKE_VNG}")
    script.chmod(0o755)
    monkeypatch.setattr(guestcmd, "vng_binary", lambda: str(script))
    return script


@pytest.fixture
def lab_dir(tmp_path: Path) -> Iterator[Path]:
    lab = tmp_path / "lab"
    lab.mkdir()
    yield lab
    # Whatever a test left running: the stand-in leads a session of its own,
    # so its pid (in its pidfile) is its process group.
    for pidfile in lab.glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)


def spec(lab: Path) -> tuple[guests.GuestSpec, list[network.Cable]]:
    name = network.guest_name(network.lab_id(lab), 0)
    return guests.GuestSpec(name, 0, 1, "768M", "tcg"), network.cables(
        network.lab_id(lab), 2, (41000, 41001)
    )


def test_a_socket_left_by_a_killed_qemu_is_not_taken_for_the_new_one(
    fake_vng: Path, lab_dir: Path
) -> None:
    guest, cables = spec(lab_dir)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(lab_dir / f"{guest.name}.qmp"))
    stale.close()  # the file stays; connecting to it is refused, as after a SIGKILL
    state = guests.start(Path("/k/bzImage"), lab_dir, guest, cables)
    try:
        assert qemu_alive(state)
        assert "fake QEMU starting" in Path(state.log).read_text()
    finally:
        guests.stop(state)
    assert not qemu_alive(state)


def test_a_guest_whose_monitor_fails_at_start_is_not_left_running(
    fake_vng: Path, lab_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_QMP", "hang up")
    guest, cables = spec(lab_dir)
    with pytest.raises(LabError, match="closed the connection"):
        guests.start(Path("/k/bzImage"), lab_dir, guest, cables)
    pid = int((lab_dir / f"{guest.name}.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


STARTER = """
import json, sys
from dataclasses import asdict
from pathlib import Path
from hil.lab import guestcmd, guests, network
guestcmd.vng_binary = lambda: sys.argv[2]
lab = Path(sys.argv[1])
name = network.guest_name(network.lab_id(lab), 0)
spec = guests.GuestSpec(name, 0, 1, "768M", "tcg")
cables = network.cables(network.lab_id(lab), 2, (41000, 41001))
state = guests.start(Path("/k/bzImage"), lab, spec, cables)
(lab / "guest.state").write_text(json.dumps(asdict(state)))
print("started", file=sys.stderr)
"""


def test_a_started_guest_holds_none_of_its_starters_output_open(
    fake_vng: Path, lab_dir: Path
) -> None:
    # As `hil lab up` under ci/nightly under a test's subprocess.run: the guest
    # lives on after its starter ends, and the reader of the starter's pipes
    # must still see them close.
    try:
        done = subprocess.run(
            [sys.executable, "-c", STARTER, str(lab_dir), str(fake_vng)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the starter's output stayed open after it ended: the guest holds it")
    assert done.returncode == 0, done.stderr
    assert "started" in done.stderr
    state = GuestState(**json.loads((lab_dir / "guest.state").read_text()))
    assert qemu_alive(state)
