"""``up``, ``down`` and ``status`` of a lab directory.

One lab per directory; a lock file serialises commands on the same
directory, and labs in different directories run side by side.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from hil.errors import HilError, InputError, LabError
from hil.lab import accel, bootfiles, guests, inventory, kernel, network, readiness
from hil.lab.state import (
    GuestState,
    LabState,
    boot_id,
    check_dir,
    gone_reason,
    load,
    qemu_alive,
    save,
    stale_reason,
)

LOCK_FILE = ".lock"
PORT_ATTEMPTS = 3
BOOT_TIMEOUT = 300.0  # TCG on a busy 2-core machine: ~20 s alone, much more when loaded
# What QEMU logs when a port we probed free was taken before it bound it.
_PORT_TAKEN = ("Address already in use", "Could not set up host forwarding rule")

# The files a lab makes in its directory (see bootfiles, guests, state,
# inventory): per guest NAME.d, .log, .pid and .qmp, whatever lab id the name
# carries (the directory's id now, or none for a lab named before ids).
_OURS = re.compile(
    rf"(?:{network.GUEST_NAME.pattern})\.(d|log|pid|qmp)"
    r"|lab\.(json|tmp)|inventory\.(yaml|tmp)|known_hosts|id_ed25519(\.pub)?"
)

Say = kernel.Progress

# Every x86 bzImage carries its boot protocol's header signature here.
_BZIMAGE_MAGIC_AT = 0x202
_BZIMAGE_MAGIC = b"HdrS"


@dataclass(frozen=True)
class GuestHealth:
    """What ``status`` reports about one guest."""

    guest: GuestState
    qemu_alive: bool
    ssh_answering: bool


@contextmanager
def _locked(lab_dir: Path) -> Iterator[None]:
    lab_dir.mkdir(parents=True, exist_ok=True)
    with open(lab_dir / LOCK_FILE, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(
                f"{lab_dir}: another `hil lab` command is working on this lab; "
                "wait for it, or use another --dir"
            ) from None
        yield


def up(
    lab_dir: Path,
    hosts: int = 2,
    memory: str = "1G",
    accel_mode: str = "auto",
    say: Say = kernel.to_stderr,
    boot_timeout: float = BOOT_TIMEOUT,
    image: Path | None = None,
) -> LabState:
    """Bring a lab of ``hosts`` guests up in ``lab_dir`` (reusing a healthy one).

    The guests boot ``image`` (a bzImage) when given, else the default lab
    kernel, built first when it is not cached.
    """
    network.check_hosts(hosts)
    lab_dir = check_dir(lab_dir)
    if image is not None:
        image = check_image(image)
    with _locked(lab_dir):
        running = _reuse_or_clean(lab_dir, hosts, say, image or default_kernel())
        if running is not None:
            return running
        image = image or kernel.ensure_kernel(progress=say)
        say(f"lab: kernel {image}")
        chosen = accel.choose(accel_mode, image, say)
        started = time.monotonic()
        try:
            state, cables = _boot(lab_dir, image, hosts, memory, chosen, say)
            inv = inventory.write(state, cables)
            readiness.wait_ready(state, inv, started + boot_timeout, say)
        except BaseException:
            _teardown(lab_dir, say)
            _remove_dir(lab_dir)
            raise
        say(
            f"lab: {hosts} guests SSH-ready in {time.monotonic() - started:.1f} s "
            f"({chosen.upper()}); "
            f"lab {network.lab_id(lab_dir)}, inventory {inv}"
        )
        return state


def default_kernel() -> Path | None:
    """The default lab kernel if it is built, else None (also when no source is installed)."""
    try:
        return kernel.cached_kernel()
    except LabError:
        return None  # no linux-source: only a build needs it, and says so


def check_image(image: Path) -> Path:
    """The absolute path of a kernel to boot; InputError if it is no x86 bzImage."""
    image = image.expanduser().absolute()
    try:
        with open(image, "rb") as f:
            f.seek(_BZIMAGE_MAGIC_AT)
            magic = f.read(len(_BZIMAGE_MAGIC))
    except OSError as e:
        raise InputError(f"kernel {image}: {e.strerror or e}; give the path of a bzImage") from None
    if magic != _BZIMAGE_MAGIC:
        raise InputError(
            f"kernel {image}: not an x86 bzImage (no boot header 'HdrS' at 0x202); "
            "give arch/x86/boot/bzImage of a kernel build"
        )
    return image


def _reuse_or_clean(
    lab_dir: Path, hosts: int, say: Say, image: Path | None = None
) -> LabState | None:
    """The healthy lab of ``hosts`` guests running ``image`` in ``lab_dir``, or None after
    cleaning away a stale one; InputError if a lab of another size or kernel runs there.

    ``image`` None (the default kernel is not built yet) takes the running lab's kernel.
    """
    state = load(lab_dir)
    if state is None:
        return None
    reason = stale_reason(state)
    if reason is None:
        reason = _misnamed(lab_dir, state)
    if reason is None:
        mute = [g.name for g in state.guests if not guests.ssh_banner(g.ssh_port)]
        reason = f"SSH does not answer on {', '.join(mute)}" if mute else None
    if reason is None:
        if len(state.guests) != hosts:
            raise InputError(
                f"{lab_dir}: a lab of {len(state.guests)} guests runs here; "
                f"`hil lab down --dir {lab_dir}` first to start one of {hosts}"
            )
        if image is not None and Path(state.kernel).resolve() != image.resolve():
            raise InputError(
                f"{lab_dir}: a lab booted with the kernel {state.kernel} runs here; "
                f"`hil lab down --dir {lab_dir}` first to boot {image}"
            )
        say(
            f"lab: already up in {lab_dir} "
            f"(lab {network.lab_id(lab_dir)}, {len(state.guests)} guests)"
        )
        return state
    say(f"lab: found a stale or unhealthy lab in {lab_dir} ({reason}); cleaning it up")
    _teardown(lab_dir, say)
    return None


def _misnamed(lab_dir: Path, state: LabState) -> str | None:
    """Why the running lab's guest names are not this directory's, or None when they are.

    A lab started by a hil that named every lab's guests ``lab0``, ``lab1``
    would share names, and so leases, with other labs: ``up`` replaces it.
    """
    lab = network.lab_id(lab_dir)
    names = [g.name for g in state.guests]
    expected = [network.guest_name(lab, g.index) for g in state.guests]
    if names == expected:
        return None
    return (
        f"its guests are named {', '.join(names)}, not {', '.join(expected)} "
        "(started by an older hil)"
    )


def _boot(
    lab_dir: Path, image: Path, hosts: int, memory: str, chosen: str, say: Say
) -> tuple[LabState, list[network.Cable]]:
    client_pub = bootfiles.write_client_key(lab_dir)
    tried: set[int] = set()
    attempt = 1
    while True:
        ports = network.allocate_ports(hosts, avoid=tried)
        tried |= {*ports.ssh, *ports.cables}
        cables = network.cables(network.lab_id(lab_dir), hosts, ports.cables)
        try:
            return _start_all(
                lab_dir, image, ports, cables, memory, chosen, client_pub, say
            ), cables
        except LabError as e:
            if attempt == PORT_ATTEMPTS or not any(m in str(e) for m in _PORT_TAKEN):
                raise
            say(f"lab: a port was taken while starting ({e}); retrying with new ports")
            _teardown(lab_dir, say, keep=(bootfiles.CLIENT_KEY, bootfiles.CLIENT_KEY + ".pub"))
            attempt += 1


def _start_all(
    lab_dir: Path,
    image: Path,
    ports: network.Ports,
    cables: list[network.Cable],
    memory: str,
    chosen: str,
    client_pub: str,
    say: Say,
) -> LabState:
    lab = network.lab_id(lab_dir)
    names = [network.guest_name(lab, i) for i in range(len(ports.ssh))]
    host_keys = [
        bootfiles.write_guest(lab_dir, i, n, cables, client_pub) for i, n in enumerate(names)
    ]
    bootfiles.write_known_hosts(lab_dir, list(zip(ports.ssh, host_keys, strict=True)))
    state = LabState(
        str(lab_dir), boot_id(), time.time(), chosen, str(image), ports.cables, (), memory=memory
    )
    for i, name in enumerate(names):
        spec = guests.GuestSpec(name, i, ports.ssh[i], memory, chosen)
        g = guests.start(image, lab_dir, spec, cables)
        state = replace(state, guests=(*state.guests, g))
        save(state)
        say(f"lab: started {name} (QEMU pid {g.pid}, ssh 127.0.0.1:{g.ssh_port})")
        guests.wait_bound(g, network.cable_ports(i, cables))
    return state


def down(lab_dir: Path, say: Say = kernel.to_stderr) -> bool:
    """Stop the lab in ``lab_dir`` and remove its files; False if there was none."""
    lab_dir = check_dir(lab_dir)
    if not lab_dir.exists():
        return False
    with _locked(lab_dir):
        had = load(lab_dir) is not None
        _teardown(lab_dir, say)
        _remove_dir(lab_dir)
    return had


def _teardown(lab_dir: Path, say: Say, keep: tuple[str, ...] = ()) -> None:
    """Stop every recorded guest (if this boot's) and remove the lab's files but ``keep``."""
    try:
        state = load(lab_dir)
    except LabError:
        state = None  # unreadable state: nothing we can safely signal
    errors = []
    if state is not None and state.boot_id == boot_id():
        for g in state.guests:
            try:
                guests.stop(g)
            except HilError as e:
                errors.append(str(e))
        if state.guests:
            say(f"lab: stopped {', '.join(g.name for g in state.guests)}")
    _remove_files(lab_dir, {LOCK_FILE, *keep})
    if errors:
        raise LabError(f"{lab_dir}: could not stop every guest: " + "; ".join(errors))


def _remove_files(lab_dir: Path, keep: set[str]) -> None:
    """Remove what the lab made in ``lab_dir``, and nothing else found there."""
    for entry in lab_dir.iterdir():
        if entry.name in keep or not _OURS.fullmatch(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _remove_dir(lab_dir: Path) -> None:
    (lab_dir / LOCK_FILE).unlink(missing_ok=True)
    try:
        lab_dir.rmdir()
    except OSError:
        pass  # someone put other files there: leave them and the dir


def status(lab_dir: Path, say: Say = kernel.to_stderr) -> tuple[LabState, list[GuestHealth]] | None:
    """The lab in ``lab_dir`` with each guest's health; None when there is none.

    A lab none of whose guests runs is cleaned away; one with a dead guest is
    reported as it is (``gone_reason``).
    """
    lab_dir = check_dir(lab_dir)
    state = load(lab_dir) if lab_dir.exists() else None
    if state is None:
        return None
    reason = gone_reason(state)
    if reason is not None:
        say(f"lab: the lab in {lab_dir} is stale ({reason}); cleaning it up")
        with _locked(lab_dir):
            _teardown(lab_dir, say)
            _remove_dir(lab_dir)
        return None
    health = [GuestHealth(g, qemu_alive(g), guests.ssh_banner(g.ssh_port)) for g in state.guests]
    return state, health


def restart_guest(lab_dir: Path, name: str, say: Say = kernel.to_stderr) -> GuestState:
    """Start guest ``name`` of the lab in ``lab_dir`` again, as it was started at ``up``
    (its ports, files, kernel and memory), stopping what is left of it first.

    For a guest whose QEMU died (a panic ends QEMU: vng runs it with
    ``-no-reboot``) or was switched off.  Returns its new state, recorded in
    ``lab.json``, once QEMU runs; the caller waits for SSH.
    """
    lab_dir = check_dir(lab_dir)
    with _locked(lab_dir):
        state, g = _running_guest(lab_dir, name)
        guests.stop(g)
        lab_cables = network.cables(network.lab_id(lab_dir), len(state.guests), state.cable_ports)
        spec = guests.GuestSpec(g.name, g.index, g.ssh_port, state.memory, state.accel)
        new = guests.start(Path(state.kernel), lab_dir, spec, lab_cables)
        _save_guest(state, new)
        guests.wait_bound(new, network.cable_ports(g.index, lab_cables))
    say(f"lab: started {name} again (QEMU pid {new.pid})")
    return new


def stop_guest(lab_dir: Path, name: str, say: Say = kernel.to_stderr) -> None:
    """Stop guest ``name`` (QMP quit, then signals) and record it as switched off, so
    that ``up`` and ``status`` do not take the lab for stale; ``restart_guest`` starts it."""
    lab_dir = check_dir(lab_dir)
    with _locked(lab_dir):
        state, g = _running_guest(lab_dir, name)
        guests.stop(g)
        _save_guest(state, replace(g, off=True))
    say(f"lab: switched {name} off")


def _running_guest(lab_dir: Path, name: str) -> tuple[LabState, GuestState]:
    """The lab running in ``lab_dir`` (this boot's) and its guest ``name``; LabError if none."""
    state = load(lab_dir)
    if state is None or state.boot_id != boot_id():
        raise LabError(f"no lab of this boot runs in {lab_dir}: start one with `hil lab up`")
    for g in state.guests:
        if g.name == name:
            return state, g
    known = ", ".join(g.name for g in state.guests)
    raise LabError(f"the lab in {lab_dir} has no guest {name!r} (guests: {known})")


def _save_guest(state: LabState, guest: GuestState) -> None:
    save(replace(state, guests=tuple(guest if g.name == guest.name else g for g in state.guests)))


def inventory_path(lab_dir: Path) -> Path:
    """The inventory of the running lab in ``lab_dir``; LabError when none runs."""
    lab_dir = check_dir(lab_dir)
    path = lab_dir / inventory.INVENTORY_FILE
    if load(lab_dir) is None or not path.exists():
        raise LabError(f"no lab runs in {lab_dir}: start one with `hil lab up --dir {lab_dir}`")
    return path
