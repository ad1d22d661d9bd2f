"""``up``, ``down`` and ``status`` of a lab directory.

One lab per directory; a lock file serialises commands on the same
directory, and labs in different directories run side by side.  The
directory's lock and files are :mod:`hil.lab.labdir`'s, booting the guests
:mod:`hil.lab.labboot`'s, a guest switched off or started again
:mod:`hil.lab.restart`'s; this module still names their public names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hil.errors import InputError, LabError
from hil.lab import accel, guests, inventory, kernel, network, readiness
from hil.lab.labboot import Images, boot
from hil.lab.labboot import check_image as check_image
from hil.lab.labboot import default_kernel as default_kernel
from hil.lab.labdir import locked, remove_dir, teardown
from hil.lab.restart import restart_guest as restart_guest
from hil.lab.restart import stop_guest as stop_guest
from hil.lab.state import (
    GuestState,
    LabState,
    check_dir,
    gone_reason,
    load,
    qemu_alive,
    stale_reason,
)

BOOT_TIMEOUT = 300.0  # TCG on a busy 2-core machine: ~20 s alone, much more when loaded
Say = kernel.Progress


@dataclass(frozen=True)
class GuestHealth:
    """What ``status`` reports about one guest."""

    guest: GuestState
    qemu_alive: bool
    ssh_answering: bool


def up(
    lab_dir: Path,
    hosts: int = 2,
    memory: str = "1G",
    accel_mode: str = "auto",
    say: Say = kernel.to_stderr,
    boot_timeout: float = BOOT_TIMEOUT,
    image: Path | None = None,
    guest_images: Mapping[int, Path] | None = None,
    middlebox: bool = False,
) -> LabState:
    """Bring a lab of ``hosts`` guests up in ``lab_dir`` (reusing a healthy one).

    The guests boot ``image`` (a bzImage) when given, else the default lab
    kernel, built first when it is not cached; a guest that ``guest_images``
    names by index boots its own (one end of a mixed pair).  With ``middlebox``
    a third guest bridges the two hosts' cable (``hil.lab.network``).
    """
    network.check_hosts(hosts)
    if middlebox and hosts != 2:
        raise InputError(f"--middlebox sits between two hosts, not {hosts}: leave out --hosts")
    guest_count = hosts + 1 if middlebox else hosts
    lab_dir = check_dir(lab_dir)
    if image is not None:
        image = check_image(image)
    overrides = _check_overrides(guest_images or {}, hosts)
    with locked(lab_dir):
        wanted = image or default_kernel()
        images = None if wanted is None else Images.of(wanted, guest_count, overrides)
        running = _reuse_or_clean(lab_dir, guest_count, say, images, middlebox)
        if running is not None:
            return running
        images = Images.of(image or kernel.ensure_kernel(progress=say), guest_count, overrides)
        for i, guest_image in enumerate(images.guests):
            say(f"lab: guest {i} boots kernel {guest_image}")
        chosen = accel.choose(accel_mode, images.lab, say)
        started = time.monotonic()
        try:
            state, cables = boot(lab_dir, images, memory, chosen, say, middlebox)
            inv = inventory.write(state, cables)
            readiness.wait_ready(state, inv, started + boot_timeout, say)
        except BaseException:
            teardown(lab_dir, say)
            remove_dir(lab_dir)
            raise
        say(
            f"lab: {guest_count} guests SSH-ready in {time.monotonic() - started:.1f} s "
            f"({chosen.upper()}); "
            f"lab {network.lab_id(lab_dir)}, inventory {inv}"
        )
        return state


def _check_overrides(overrides: Mapping[int, Path], hosts: int) -> dict[int, Path]:
    """Each guest's own bzImage, checked; InputError for a guest the lab does not have."""
    for index in overrides:
        if not 0 <= index < hosts:
            raise InputError(f"a kernel for guest {index}: the lab has guests 0-{hosts - 1}")
    return {i: check_image(p) for i, p in overrides.items()}


def _reuse_or_clean(
    lab_dir: Path, hosts: int, say: Say, images: Images | None = None, middlebox: bool = False
) -> LabState | None:
    """The healthy lab of ``hosts`` guests running ``images`` in ``lab_dir``, or None after
    cleaning away a stale one; InputError if a lab of another size, form (``middlebox``)
    or kernel runs there.

    ``images`` None (the default kernel is not built yet) takes the running lab's kernels.
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
        if state.middlebox != middlebox:
            has = "with" if state.middlebox else "without"
            raise InputError(
                f"{lab_dir}: a lab {has} a middlebox runs here; "
                f"`hil lab down --dir {lab_dir}` first"
            )
        if images is not None:
            _check_kernels(lab_dir, state, images)
        say(
            f"lab: already up in {lab_dir} "
            f"(lab {network.lab_id(lab_dir)}, {len(state.guests)} guests)"
        )
        return state
    say(f"lab: found a stale or unhealthy lab in {lab_dir} ({reason}); cleaning it up")
    teardown(lab_dir, say)
    return None


def _check_kernels(lab_dir: Path, state: LabState, images: Images) -> None:
    """InputError unless each guest of the running lab boots the kernel ``images`` gives it."""
    for g in state.guests:
        running, wanted = Path(state.kernel_of(g)), images.guests[g.index]
        if running.resolve() != wanted.resolve():
            own = g.kernel not in ("", state.kernel) or wanted != images.lab
            where = f" on {g.name}" if own else ""
            raise InputError(
                f"{lab_dir}: a lab booted with the kernel {running}{where} runs here; "
                f"`hil lab down --dir {lab_dir}` first to boot {wanted}"
            )


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


def down(lab_dir: Path, say: Say = kernel.to_stderr) -> bool:
    """Stop the lab in ``lab_dir`` and remove its files; False if there was none."""
    lab_dir = check_dir(lab_dir)
    if not lab_dir.exists():
        return False
    with locked(lab_dir):
        had = load(lab_dir) is not None
        teardown(lab_dir, say)
        remove_dir(lab_dir)
    return had


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
        with locked(lab_dir):
            teardown(lab_dir, say)
            remove_dir(lab_dir)
        return None
    health = [GuestHealth(g, qemu_alive(g), guests.ssh_banner(g.ssh_port)) for g in state.guests]
    return state, health


def inventory_path(lab_dir: Path) -> Path:
    """The inventory of the running lab in ``lab_dir``; LabError when none runs."""
    lab_dir = check_dir(lab_dir)
    path = lab_dir / inventory.INVENTORY_FILE
    if load(lab_dir) is None or not path.exists():
        raise LabError(f"no lab runs in {lab_dir}: start one with `hil lab up --dir {lab_dir}`")
    return path
