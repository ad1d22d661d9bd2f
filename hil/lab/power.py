"""The virtual lab's power: a guest cycled through QEMU's monitor, or started again.

Power mode ``qmp`` (a host's ``power: {mode: qmp, qmp: SOCKET, lab: DIR}``),
registered with host control through the ``hil.host`` entry point:

- ``cycle``: with ``lab``, the guest's QEMU stopped and started again, as
  ``off`` then ``on`` do.  Under TCG that answers SSH in about half the time
  a reset does (16 s against 34 s on the 2-core machine, docs/notes/lab-speed.md),
  and a guest that reset itself at a panic boots once, not twice.  Without
  ``lab`` (a QEMU hil did not start): QMP ``system_reset``, then ``cont`` (a
  guest frozen by ``stop`` runs again), with the reboot action ``reset``
  (:func:`hil.lab.qmp.reboot_resets`) set first;
- ``off``: the guest stopped (QMP ``quit``, then signals), recorded as
  switched off so that the lab is not taken for stale;
- ``on``: the guest started again (needs ``lab``); nothing when it runs.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from hil.errors import HilError
from hil.host.power import PowerFailed, register_power_mode
from hil.lab import control
from hil.lab.qmp import QMPClient, QMPError, quit_qemu

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Host, Power, PowerAction

log = logging.getLogger(__name__)


def switch(hosts: Hosts, host: Host, spec: Power, action: PowerAction, timeout: float) -> None:
    """Carry out ``action`` on the lab guest ``host`` (see the module doc)."""
    assert spec.qmp is not None  # the loader requires it for qmp entries
    try:
        if action == "cycle":
            _cycle(host.name, spec, timeout)
        elif action == "off":
            _off(host.name, spec, timeout)
        elif _answers(spec.qmp, timeout):
            log.info("%s: its QEMU runs: already on", host.name)
        else:
            _start(host.name, spec)
    except HilError as e:
        raise PowerFailed(host.name, f"power {action} (QMP {spec.qmp}) failed: {e}") from e


def _cycle(name: str, spec: Power, timeout: float) -> None:
    assert spec.qmp is not None
    if spec.lab is not None:
        _start(name, spec)  # restart_guest stops what is left of the guest first
        return
    # A QEMU that does not answer raises QMPError: without a lab, hil cannot start it.
    with QMPClient(spec.qmp, timeout) as qmp:
        qmp.execute("set-action", {"reboot": "reset"})
        qmp.execute("system_reset")
        if qmp.execute("query-status").get("status") != "running":
            qmp.execute("cont")


def _off(name: str, spec: Power, timeout: float) -> None:
    assert spec.qmp is not None
    if spec.lab is None:
        quit_qemu(spec.qmp, timeout)
        return
    control.stop_guest(Path(spec.lab), name, say=log.info)


def _start(name: str, spec: Power) -> None:
    if spec.lab is None:
        raise PowerFailed(
            name,
            "its QEMU is gone and its power entry names no lab (`lab: DIR`) to start it "
            "from; start it by hand",
        )
    control.restart_guest(Path(spec.lab), name, say=log.info)


def _answers(socket: str, timeout: float) -> bool:
    try:
        with QMPClient(socket, timeout) as qmp:
            qmp.execute("query-status")
    except QMPError:
        return False
    return True


def register() -> None:
    """Register the power mode ``qmp`` with host control."""
    register_power_mode("qmp", switch)
