"""The virtual lab's carrier pull: QEMU unplugs a guest NIC's cable over QMP.

Registered with host control (:mod:`hil.host.extensions`) through the
``hil.host`` entry point in pyproject.toml, so that host control pulls and
restores a lab cable without importing the lab: the pull mode ``carrier``
and the journal's undo kind ``qmp``; ``register`` also registers the lab's
power mode ``qmp`` (:mod:`hil.lab.power`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hil.errors import InputError
from hil.host.journal import agent_undo, register_undo_kind
from hil.host.linkctl import CARRIER_TIMEOUT, STEP_TIMEOUT, Change, register_pull_mode
from hil.lab.qmp import set_link

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.host.linkctl import LinkControl
    from hil.inventory.model import Link, Pull


def qmp_undo(socket: str, netdev: str, up: bool, what: str) -> dict[str, Any]:
    """An undo entry that sets a QEMU NIC's link through the QMP ``socket``."""
    return {"kind": "qmp", "socket": socket, "netdev": netdev, "up": up, "what": what}


def undo_qmp(hosts: Hosts, host: str, entry: dict[str, Any], timeout: float) -> None:
    """Carry out a ``qmp`` journal entry: plug the cable back in (or out)."""
    set_link(entry["socket"], entry["netdev"], bool(entry["up"]), timeout=timeout)


def pull_carrier(control: LinkControl, link: Link, pull: Pull, change: Change) -> None:
    """Unplug the cable of ``link`` over QMP; its undo also waits for carrier at the end."""
    if pull.qmp is None or pull.qmp_netdev is None:
        raise InputError(f"link {link.name}: the carrier pull needs qmp and qmp_netdev")
    what = f"plug the cable of link {link.name} back in (QMP {pull.qmp_netdev})"
    undo = qmp_undo(pull.qmp, pull.qmp_netdev, True, what)
    if pull.end is not None:
        netdev = control.netdev(pull.end)
        wait = agent_undo("wait_link", f"wait for carrier on {netdev}", netdev=netdev, carrier=True)
        # Journaled under the end's host, so the wait runs there.
        undo["then"] = [{**wait, "timeout": CARRIER_TIMEOUT}]
    change(undo)
    set_link(pull.qmp, pull.qmp_netdev, False, timeout=STEP_TIMEOUT)


def register() -> None:
    """Register the carrier pull, the qmp undo and the qmp power with host control (the
    entry point)."""
    from hil.lab import power  # it imports control, which most carrier pulls never need

    register_undo_kind("qmp", undo_qmp)
    register_pull_mode("carrier", pull_carrier)
    power.register()
