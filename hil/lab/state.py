"""The lab directory and its state file: what runs, where, since when.

``DIR/lab.json`` records every guest's QEMU pid, process group, ports and
sockets.  A lab is *stale* when the machine rebooted since (boot id differs)
or a recorded QEMU is gone; ``up`` and ``status`` clean stale labs away.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from hil.errors import InputError, LabError

STATE_FILE = "lab.json"
FORMAT = 1
DEFAULT_MEMORY = "1G"
# vng hands QEMU options to a shell and QEMU splits them at commas: allow
# only characters that mean nothing to either.
_SAFE_PATH = re.compile(r"[A-Za-z0-9._/+-]+")


@dataclass(frozen=True)
class GuestState:
    """One running guest as recorded at ``up``."""

    name: str
    index: int
    pid: int  # QEMU's pid (from its -pidfile)
    pgid: int  # process group of vng and QEMU: what ``down`` signals
    ssh_port: int
    qmp: str
    log: str
    # Switched off on purpose (``hil host power HOST off``): not a sign of a stale lab.
    off: bool = False
    # The bzImage this guest boots when it differs from the lab's (a mixed pair,
    # ``hil lab up --kernel-b 6.12``); empty: the lab's ``kernel``.
    kernel: str = ""


@dataclass(frozen=True)
class LabState:
    """A lab as recorded in ``DIR/lab.json``."""

    dir: str
    boot_id: str
    started: float  # time.time() at up
    accel: str  # "kvm" or "tcg"
    kernel: str
    cable_ports: tuple[int, ...]
    guests: tuple[GuestState, ...]
    format: int = FORMAT
    memory: str = DEFAULT_MEMORY  # each guest's, for starting one again
    # A middlebox lab (``hil lab up --middlebox``): guest 2 bridges the link of guests 0
    # and 1 (hil.lab.network).
    middlebox: bool = False

    def kernel_of(self, guest: GuestState) -> str:
        """The bzImage ``guest`` boots: its own in a mixed lab, else the lab's."""
        return guest.kernel or self.kernel

    @property
    def mixed(self) -> bool:
        """Whether the guests boot different kernels."""
        return len({self.kernel_of(g) for g in self.guests}) > 1


def default_dir() -> Path:
    """``$XDG_STATE_HOME/hil/lab`` (default ``~/.local/state/hil/lab``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hil" / "lab"


def check_dir(path: Path) -> Path:
    """The absolute lab dir; InputError if its path has characters QEMU options cannot carry."""
    path = path.expanduser().absolute()
    if not _SAFE_PATH.fullmatch(str(path)):
        raise InputError(
            f"lab dir {str(path)!r}: use only letters, digits and . _ / + - in its path "
            "(it is passed inside QEMU options)"
        )
    return path


def boot_id() -> str:
    """This boot of the machine; a lab from an earlier boot is stale."""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def save(state: LabState) -> None:
    """Write ``DIR/lab.json`` atomically."""
    path = Path(state.dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(path)


def load(lab_dir: Path) -> LabState | None:
    """The recorded lab in ``lab_dir``, or None when there is none."""
    path = lab_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        if raw.get("format") != FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT}")
        guests = tuple(GuestState(**g) for g in raw.pop("guests"))
        raw["cable_ports"] = tuple(raw["cable_ports"])
        return LabState(guests=guests, **raw)
    except (ValueError, TypeError, KeyError) as e:
        raise LabError(f"{path}: unreadable lab state ({e}); remove {lab_dir} by hand") from e


def qemu_alive(guest: GuestState) -> bool:
    """Whether the guest's QEMU still runs (the pid is QEMU, in its group)."""
    try:
        cmdline = Path(f"/proc/{guest.pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{guest.pid}/stat").read_text()
    except OSError:
        return False
    # A recycled pid would not carry our QMP socket path on its command line.
    if not any(guest.qmp.encode() in arg for arg in cmdline):
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        return False  # a zombie: exited, not yet reaped
    return pgid_of(guest.pid) == guest.pgid


def pgid_of(pid: int) -> int | None:
    """The process group of ``pid``, None if it is gone."""
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def stale_reason(state: LabState) -> str | None:
    """Why the recorded lab no longer runs as recorded, or None if it does."""
    if state.boot_id != boot_id():
        return "the machine rebooted since the lab started"
    dead = _dead(state)
    if dead:
        return f"guest(s) {', '.join(dead)} no longer run"
    return None


def gone_reason(state: LabState) -> str | None:
    """Why nothing of the recorded lab runs any more, or None while a guest of it does.

    A lab with one guest dead (crashed, killed) is still a lab: its other guests,
    their console logs and the dead one's are evidence, and recovery starts the
    dead guest again (``hil host recover``).
    """
    if state.boot_id != boot_id():
        return "the machine rebooted since the lab started"
    dead = _dead(state)
    if dead and len(dead) == len([g for g in state.guests if not g.off]):
        return f"guest(s) {', '.join(dead)} no longer run"
    return None


def _dead(state: LabState) -> list[str]:
    """The guests that should run (not switched off) and do not."""
    return [g.name for g in state.guests if not g.off and not qemu_alive(g)]
