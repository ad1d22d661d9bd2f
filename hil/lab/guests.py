"""Start and stop lab guests: vng running QEMU, detached, one per guest.

Each guest is ``vng --run BZIMAGE --exec "sh guest_boot.sh CONF"`` in its
own session (so ``hil lab up`` can exit and the guest stays), with its
output in ``DIR/<name>.log``, QEMU's pid in ``DIR/<name>.pid`` and its QMP
socket at ``DIR/<name>.qmp``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.lab import qmp
from hil.lab.bootfiles import BOOT_SCRIPT, guest_conf_dir
from hil.lab.network import Cable, data_nics, mgmt_nic
from hil.lab.state import GuestState, pgid_of, qemu_alive

START_TIMEOUT = 30.0  # vng to QEMU running with its pidfile and sockets
QUIT_TIMEOUT = 10.0
TERM_TIMEOUT = 5.0

# vng processes started by this process, reaped by stop() so that none is
# left as a zombie (the CLI exits and leaves reaping to init instead).
_children: dict[int, subprocess.Popen[bytes]] = {}
# The cat that copies each of them (by its pid) to the guest's log.
_loggers: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class GuestSpec:
    """What to boot for one guest."""

    name: str
    index: int
    ssh_port: int
    memory: str
    accel: str  # "kvm" or "tcg"


def vng_binary() -> str:
    """The vng of hil's venv (often not on PATH), else the one on PATH."""
    name = tools.name("vng")
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise LabError("vng not found: pip install virtme-ng into hil's venv (run ci/install)")
    return found


def qemu_options(lab_dir: Path, spec: GuestSpec, lab_cables: list[Cable]) -> list[str]:
    """The QEMU options for a guest's pidfile, QMP socket and NICs."""
    mgmt = mgmt_nic(spec.index)
    opts = [
        "-pidfile",
        str(lab_dir / f"{spec.name}.pid"),
        "-qmp",
        f"unix:{lab_dir / spec.name}.qmp,server=on,wait=off",
        "-netdev",
        f"user,id={mgmt.netdev},restrict=on,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
        "-device",
        f"virtio-net-pci,netdev={mgmt.netdev},mac={mgmt.mac}",
    ]
    for cable, nic in data_nics(spec.index, lab_cables):
        mine, peer = (cable.a, cable.b) if cable.a.guest == spec.index else (cable.b, cable.a)
        opts += [
            "-netdev",
            f"socket,id={nic.netdev},udp=127.0.0.1:{peer.port},localaddr=127.0.0.1:{mine.port}",
            "-device",
            f"virtio-net-pci,netdev={nic.netdev},mac={nic.mac}",
        ]
    return opts


def vng_argv(kernel: Path, lab_dir: Path, spec: GuestSpec, lab_cables: list[Cable]) -> list[str]:
    """The full vng command line of a guest."""
    argv = [
        vng_binary(),
        "--run",
        str(kernel),
        "--name",
        spec.name,
        "--cpus",
        "1",
        "--memory",
        spec.memory,
        "--cwd",
        "/",
        "--disable-microvm",
        "--verbose",
        # CONFIG_DUMMY=y would add a stray dummy0 to every guest.
        "--append",
        "dummy.numdummies=0",
    ]
    if spec.accel == "tcg":
        argv.append("--disable-kvm")
    argv += ["--exec", f"sh {BOOT_SCRIPT} {guest_conf_dir(lab_dir, spec.name)}"]
    # vng hands these to a shell unquoted: every part is free of shell syntax
    # (paths are checked by state.check_dir, the rest is ours).
    argv.append("--qemu-opts=" + " ".join(qemu_options(lab_dir, spec, lab_cables)))
    return argv


def vng_env() -> dict[str, str]:
    """The environment for vng: it runs virtme-run through PATH, so the venv's bin goes first."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


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
        cat.wait(TERM_TIMEOUT)  # it saw EOF
        raise LabError(f"{spec.name}: cannot start vng: {e}") from None
    _loggers[proc.pid] = cat
    _children[proc.pid] = proc
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _reap(proc.pid)  # cat too, so the log is complete
            raise LabError(f"{spec.name}: vng exited {proc.returncode} at start:\n{log_tail(log)}")
        pid = _read_pid(pidfile)
        if pid is not None and Path(qmp_path).exists():
            try:
                qmp.reboot_resets(qmp_path)
            except LabError:
                # A guest nobody records must not live on.
                _kill_group(proc.pid)
                _reap(proc.pid)
                raise
            return GuestState(
                spec.name, spec.index, pid, proc.pid, spec.ssh_port, qmp_path, str(log)
            )
        time.sleep(0.2)
    _kill_group(proc.pid)
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


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state on this machine (IPv4 and IPv6)."""
    return _ports(("/proc/net/tcp", "/proc/net/tcp6"), "0A")


def bound_udp_ports() -> set[int]:
    """UDP ports bound on this machine (IPv4 and IPv6)."""
    return _ports(("/proc/net/udp", "/proc/net/udp6"), "07")


def _ports(tables: tuple[str, ...], state: str) -> set[int]:
    """Local ports of the rows of ``tables`` (/proc/net/...) in ``state`` (hex)."""
    ports = set()
    for table in tables:
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == state:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def ssh_banner(port: int, timeout: float = 10.0) -> bool:
    """Whether 127.0.0.1:``port`` answers with an SSH banner within ``timeout``.

    QEMU's user networking accepts at once and then waits for the guest, so
    this measures the guest; a TCG guest on a loaded machine can take seconds.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def stop(guest: GuestState) -> None:
    """Stop a guest: QMP quit, then SIGTERM, then SIGKILL to its process group."""
    if qemu_alive(guest):
        try:
            qmp.quit_qemu(guest.qmp, timeout=QUIT_TIMEOUT)
            _wait_gone(guest, QUIT_TIMEOUT)
        except LabError:
            pass  # QEMU not answering QMP: the signals below still stop it
    # Signal the group only while it still holds our processes: after they
    # are gone its number may be reused by someone else's.
    if _group_alive(guest.pgid) and _group_is_ours(guest.pgid, guest.qmp):
        _kill_group(guest.pgid)
    _reap(guest.pgid)


def _group_is_ours(pgid: int, marker: str) -> bool:
    """Whether a live member of ``pgid`` has ``marker`` (our QMP path) in its argv."""
    for pid in _group_members(pgid):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _wait_gone(guest: GuestState, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while qemu_alive(guest) and time.monotonic() < deadline:
        _reap(guest.pgid, block=False)
        time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # Zombies still count as members; only live ones matter.
    return any(_is_live(p) for p in _group_members(pgid))


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and pgid_of(int(entry.name)) == pgid:
            members.append(int(entry.name))
    return members


def _is_live(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _kill_group(pgid: int) -> None:
    for sig, wait in ((signal.SIGTERM, TERM_TIMEOUT), (signal.SIGKILL, TERM_TIMEOUT)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while _group_alive(pgid) and time.monotonic() < deadline:
            _reap(pgid, block=False)
            time.sleep(0.1)
        if not _group_alive(pgid):
            return
    raise LabError(f"process group {pgid} survived SIGKILL; check `ps -g {pgid}`")


def _reap(pid: int, block: bool = True) -> None:
    for table in (_children, _loggers):
        proc = table.get(pid)
        if proc is None:
            continue
        try:
            proc.wait(timeout=TERM_TIMEOUT if block else 0)
        except subprocess.TimeoutExpired:
            return
        table.pop(pid, None)
