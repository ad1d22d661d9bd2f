"""The session's virtual lab taken down: no QEMU, process or port is left.

A file of its own: it runs after every other test (``takes_lab_down``), and under
xdist's ``--dist loadfile`` (``LAB_WORKERS=2 ci/tests``) a file is one unit of work, so a
worker's other tests never run after it on that worker's lab.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from vlab import VirtualLab, hil_lab

from hil.lab import localports

pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]


@pytest.mark.takes_lab_down
def test_zz_down_leaves_no_process_and_no_listening_port(virtual_lab: VirtualLab) -> None:
    # Runs after every other test (takes_lab_down): it stops the session's lab.
    running = virtual_lab.state  # a guest started again by a recovery has a new QEMU
    ports = {g.ssh_port for g in running.guests}
    cables = set(running.cable_ports)
    assert ports <= localports.listening_ports()
    assert cables <= localports.bound_udp_ports()
    out = hil_lab("down", "--dir", str(virtual_lab.dir))
    assert out.returncode == 0, out.stderr
    for g in running.guests:
        assert not Path(f"/proc/{g.pid}").exists() or _zombie(g.pid), f"{g.name} QEMU still runs"
        assert not _live_members(g.pgid), f"{g.name}: processes left in group {g.pgid}"
    assert not ports & localports.listening_ports()
    assert not cables & localports.bound_udp_ports()
    assert not virtual_lab.dir.exists()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _live_members(pgid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=,stat=", "-g", str(pgid)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return [
        int(f[0])
        for f in (ln.split() for ln in out.stdout.splitlines())
        if not f[1].startswith("Z")
    ]
