"""Booting a new lab's guests: the kernel image to boot, the ports, the guests started.

A port probed free may be taken before QEMU binds it: the boot is tried
again with new ports, :data:`PORT_ATTEMPTS` times at most.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hil.errors import InputError, LabError
from hil.lab import bootfiles, guests, kernel, network
from hil.lab.kernel import Progress
from hil.lab.labdir import teardown
from hil.lab.state import LabState, boot_id, save

PORT_ATTEMPTS = 3

# What QEMU logs when a port we probed free was taken before it bound it.
_PORT_TAKEN = ("Address already in use", "Could not set up host forwarding rule")

# Every x86 bzImage carries its boot protocol's header signature here.
_BZIMAGE_MAGIC_AT = 0x202
_BZIMAGE_MAGIC = b"HdrS"


@dataclass(frozen=True)
class Images:
    """What a lab's guests boot: the lab's kernel, and each guest's (the lab's, or
    another for one end of a mixed pair)."""

    lab: Path
    guests: tuple[Path, ...]

    @classmethod
    def of(cls, lab: Path, hosts: int, overrides: Mapping[int, Path]) -> Images:
        """``lab`` for every guest of ``hosts`` but those ``overrides`` names by index."""
        return cls(lab, tuple(overrides.get(i, lab) for i in range(hosts)))


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


def boot(
    lab_dir: Path,
    images: Images,
    memory: str,
    chosen: str,
    say: Progress,
    middlebox: bool = False,
) -> tuple[LabState, list[network.Cable]]:
    """Start one guest per image of ``images`` in ``lab_dir``, booting it, and wire them
    (as a chain, or with ``middlebox`` the last guest between the first two); new ports
    when QEMU found one taken.  The lab's state and its cables."""
    hosts = len(images.guests)
    client_pub = bootfiles.write_client_key(lab_dir)
    tried: set[int] = set()
    attempt = 1
    while True:
        ports = network.allocate_ports(hosts, avoid=tried)
        tried |= {*ports.ssh, *ports.cables}
        cables = network.cables(network.lab_id(lab_dir), hosts, ports.cables, middlebox)
        state = LabState(
            str(lab_dir),
            boot_id(),
            time.time(),
            chosen,
            str(images.lab),
            ports.cables,
            (),
            memory=memory,
            middlebox=middlebox,
        )
        try:
            return _start_all(state, images, ports, cables, client_pub, say), cables
        except LabError as e:
            if attempt == PORT_ATTEMPTS or not any(m in str(e) for m in _PORT_TAKEN):
                raise
            say(f"lab: a port was taken while starting ({e}); retrying with new ports")
            teardown(lab_dir, say, keep=(bootfiles.CLIENT_KEY, bootfiles.CLIENT_KEY + ".pub"))
            attempt += 1


def _start_all(
    state: LabState,
    images: Images,
    ports: network.Ports,
    cables: list[network.Cable],
    client_pub: str,
    say: Progress,
) -> LabState:
    """Start ``state``'s lab (no guest yet) guest by guest, recording each."""
    lab_dir = Path(state.dir)
    lab = network.lab_id(lab_dir)
    names = [network.guest_name(lab, i) for i in range(len(ports.ssh))]
    host_keys = [
        bootfiles.write_guest(lab_dir, i, n, cables, client_pub) for i, n in enumerate(names)
    ]
    bootfiles.write_known_hosts(lab_dir, list(zip(ports.ssh, host_keys, strict=True)))
    for i, name in enumerate(names):
        spec = guests.GuestSpec(name, i, ports.ssh[i], state.memory, state.accel)
        image = images.guests[i]
        g = guests.start(image, lab_dir, spec, cables)
        if image != images.lab:
            g = replace(g, kernel=str(image))
        state = replace(state, guests=(*state.guests, g))
        save(state)
        say(f"lab: started {name} (QEMU pid {g.pid}, ssh 127.0.0.1:{g.ssh_port})")
        guests.wait_bound(g, network.cable_ports(i, cables))
    return state
