"""One guest of a running lab switched off, or started again as it was at ``up``.

The ``qmp`` power mode (:mod:`hil.lab.power`) uses these: the guest keeps
its ports, files, kernel and memory, and ``lab.json`` records its new state.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hil.errors import LabError
from hil.lab import guests, kernel, network
from hil.lab.kernel import Progress
from hil.lab.labdir import locked
from hil.lab.state import GuestState, LabState, boot_id, check_dir, load, save


def restart_guest(lab_dir: Path, name: str, say: Progress = kernel.to_stderr) -> GuestState:
    """Start guest ``name`` of the lab in ``lab_dir`` again, as it was started at ``up``
    (its ports, files, kernel and memory), stopping what is left of it first.

    For a guest whose QEMU died (a panic ends QEMU: vng runs it with
    ``-no-reboot``) or was switched off.  Returns its new state, recorded in
    ``lab.json``, once QEMU runs; the caller waits for SSH.
    """
    lab_dir = check_dir(lab_dir)
    with locked(lab_dir):
        state, g = _running_guest(lab_dir, name)
        guests.stop(g)
        lab_cables = network.cables(
            network.lab_id(lab_dir), len(state.guests), state.cable_ports, state.middlebox
        )
        spec = guests.GuestSpec(g.name, g.index, g.ssh_port, state.memory, state.accel)
        new = guests.start(Path(state.kernel_of(g)), lab_dir, spec, lab_cables)
        new = replace(new, kernel=g.kernel)
        _save_guest(state, new)
        guests.wait_bound(new, network.cable_ports(g.index, lab_cables))
    say(f"lab: started {name} again (QEMU pid {new.pid})")
    return new


def stop_guest(lab_dir: Path, name: str, say: Progress = kernel.to_stderr) -> None:
    """Stop guest ``name`` (QMP quit, then signals) and record it as switched off, so
    that ``up`` and ``status`` do not take the lab for stale; ``restart_guest`` starts it."""
    lab_dir = check_dir(lab_dir)
    with locked(lab_dir):
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
