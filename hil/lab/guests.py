"""Start and stop lab guests: vng running QEMU, detached, one per guest.

Each guest is ``vng --run BZIMAGE --exec "sh guest_boot.sh CONF"`` in its
own session (so ``hil lab up`` can exit and the guest stays), with its
output in ``DIR/<name>.log``, QEMU's pid in ``DIR/<name>.pid`` and its QMP
socket at ``DIR/<name>.qmp``.

The command line is :mod:`hil.lab.guestcmd`'s, the process groups (signals,
reaping) :mod:`hil.lab.procgroup`'s, the machine's ports and the SSH banner
:mod:`hil.lab.localports`'; this module still names ``GuestSpec`` and
``ssh_banner``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Collection
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.lab import procgroup, qmp
from hil.lab.guestcmd import GuestSpec as GuestSpec
from hil.lab.guestcmd import vng_argv, vng_env
from hil.lab.localports import bound_udp_ports
from hil.lab.localports import ssh_banner as ssh_banner
from hil.lab.network import Cable
from hil.lab.state import GuestState, qemu_alive

START_TIMEOUT = 30.0  # vng to QEMU running with its pidfile and sockets
QUIT_TIMEOUT = 10.0


def start(kernel: Path, lab_dir: Path, spec: GuestSpec, lab_cables: list[Cable]) -> GuestState:
    """Launch a guest and wait until its QEMU runs; returns its recorded state.

    Its console goes to ``DIR/NAME.log``, appended to what an earlier boot of
    the guest left there.
    """
    log = lab_dir / f"{spec.name}.log"
    pidfile = lab_dir / f"{spec.name}.pid"
    qmp_path = str(lab_dir / f"{spec.name}.qmp")
    pidfile.unlink(missing_ok=True)
    # A killed QEMU leaves its socket file behind.  QEMU writes its pidfile
    # before it binds the socket again, so in that gap a stale file would pass
    # for the new one and refuse the connection.
    Path(qmp_path).unlink(missing_ok=True)
    argv = vng_argv(kernel, lab_dir, spec, lab_cables)
    # Appended: a guest started again keeps what its last boot logged (a panic).
    with open(log, "ab") as out:
        if out.tell():
            out.write(f"\n--- hil: {spec.name} started again at {time.ctime()} ---\n".encode())
            out.flush()
        # vng has QEMU reopen its stdout and stderr by path (file chardevs on
        # /proc/self/fd/N), each with O_TRUNC and an offset of its own: on a log
        # file they truncate it and overwrite each other's lines.  Through a pipe
        # to cat, which appends, every line stays, after those of earlier boots.
        # cat has a session of its own (no terminal's Ctrl-C) and ends at EOF,
        # when vng and QEMU are gone.
        # Nothing of the caller's stdio either: a guest outlives `hil lab up`,
        # and a pipe it held open would keep whoever reads that pipe waiting.
        cat = subprocess.Popen(
            tools.argv("cat"),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    assert cat.stdin is not None
    try:
        with cat.stdin:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=cat.stdin,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=vng_env(),
                cwd="/",
            )
    except OSError as e:
        cat.wait(procgroup.TERM_TIMEOUT)  # it saw EOF
        raise LabError(f"{spec.name}: cannot start vng: {e}") from None
    procgroup.track(proc, cat)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            procgroup.reap(proc.pid)  # cat too, so the log is complete
            raise LabError(f"{spec.name}: vng exited {proc.returncode} at start:\n{log_tail(log)}")
        pid = _read_pid(pidfile)
        if pid is not None and Path(qmp_path).exists():
            try:
                qmp.reboot_resets(qmp_path)
            except LabError:
                # A guest nobody records must not live on.
                procgroup.kill_group(proc.pid)
                procgroup.reap(proc.pid)
                raise
            return GuestState(
                spec.name, spec.index, pid, proc.pid, spec.ssh_port, qmp_path, str(log)
            )
        time.sleep(0.2)
    procgroup.kill_group(proc.pid)
    raise LabError(
        f"{spec.name}: QEMU did not start within {START_TIMEOUT:.0f} s:\n{log_tail(log)}"
    )


def _read_pid(pidfile: Path) -> int | None:
    try:
        text = pidfile.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def log_tail(log: Path, lines: int = 15) -> str:
    """The last lines of a guest log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return f"(no log at {log})"


def wait_bound(guest: GuestState, ports: Collection[int], timeout: float = START_TIMEOUT) -> None:
    """Wait until ``guest``'s QEMU has bound its cables' UDP ``ports`` on 127.0.0.1.

    A port another process took makes QEMU exit: the LabError then carries
    its log ("Address already in use"), and ``up`` retries with new ports.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if set(ports) <= bound_udp_ports():
            return
        if not qemu_alive(guest):
            raise LabError(f"{guest.name}: QEMU exited:\n{log_tail(Path(guest.log))}")
        time.sleep(0.2)
    missing = ", ".join(str(p) for p in sorted(set(ports) - bound_udp_ports()))
    raise LabError(
        f"{guest.name}: QEMU did not bind UDP 127.0.0.1:{missing} within {timeout:.0f} s"
    )


def stop(guest: GuestState) -> None:
    """Stop a guest: QMP quit, then SIGTERM, then SIGKILL to its process group."""
    if qemu_alive(guest):
        try:
            qmp.quit_qemu(guest.qmp, timeout=QUIT_TIMEOUT)
            _wait_gone(guest, QUIT_TIMEOUT)
        except LabError:
            pass  # QEMU not answering QMP: the signals below still stop it
    procgroup.kill_if_ours(guest.pgid, guest.qmp)
    procgroup.reap(guest.pgid)


def _wait_gone(guest: GuestState, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while qemu_alive(guest) and time.monotonic() < deadline:
        procgroup.reap(guest.pgid, block=False)
        time.sleep(0.1)
