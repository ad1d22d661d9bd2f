"""Power a lab host off, on, or cycle it, the way its inventory ``power:`` says.

``power(hosts, "t6-a", "cycle", fence=..., timeout=60)`` calls ``fence``
immediately before it acts (it raises ``LeaseLost`` when the caller's lease
was taken over, so a paused run never power-cycles the next holder's host),
then switches the power, then drops the host's SSH session and agent from
``hosts``: they died with the power.  A power action is not journaled: there
is nothing to undo, the host comes back as it boots.

Modes: ``command`` (below: the entry's argument lists run over SSH on its
controller host) and whatever another package registers
(:mod:`hil.host.extensions`), such as the virtual lab's ``qmp``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hil.errors import HilError, InputError, RemoteError
from hil.host.extensions import ExtensionRegistry
from hil.inventory import templates

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Host, Power, PowerAction

log = logging.getLogger(__name__)

POWER_TIMEOUT = 60.0  # one power action: a PDU's or a BMC's tool, or QEMU's monitor

# ``switch(hosts, host, power, action, timeout)`` carries out ``action`` on ``host``.
PowerFn = Callable[["Hosts", "Host", "Power", "PowerAction", float], None]
_power_modes = ExtensionRegistry[PowerFn]("power registered for mode", "provides it")
Fence = Callable[[], None]


class PowerFailed(RemoteError):
    """A power action did not complete; the message names the host, action and controller."""


def register_power_mode(mode: str, switch: PowerFn) -> None:
    """Let hosts whose ``power:`` has ``mode`` be switched by ``switch``."""
    _power_modes.register(switch, name=mode)


def power_mode(mode: str) -> PowerFn:
    """The switch of ``mode``; InputError when nothing registered it."""
    return _power_modes[mode]


def power_of(host: Host) -> Power:
    """``host``'s power entry; InputError when the inventory gives it none."""
    if host.power is None:
        raise InputError(
            f"{host.name}: the inventory gives it no power entry, so hil cannot switch it; "
            "add `power:` to the host (docs/inventory.md, Power)"
        )
    return host.power


def may_cycle(host: Host) -> bool:
    """Whether hil's recovery may power-cycle ``host`` by itself."""
    return host.power is not None and host.power.recover


def power(
    hosts: Hosts,
    name: str,
    action: PowerAction,
    *,
    fence: Fence | None,
    timeout: float = POWER_TIMEOUT,
) -> None:
    """Switch host ``name``'s power (``cycle``, ``on``, ``off``); see the module doc.

    InputError when the inventory gives the host no ``power:``; PowerFailed
    when the action fails; whatever ``fence`` raises (LeaseLost) before anything.
    """
    host = hosts.host(name)
    spec = power_of(host)
    switch = power_mode(spec.mode)
    if fence is not None:
        fence()
    log.info("%s: power %s (%s)", name, action, spec.mode)
    started = time.monotonic()
    try:
        switch(hosts, host, spec, action, timeout)
    finally:
        hosts.forget(name)
    log.info("%s: power %s done in %.1f s", name, action, time.monotonic() - started)


def _command(hosts: Hosts, host: Host, spec: Power, action: PowerAction, timeout: float) -> None:
    """A ``command`` entry: its argument list for ``action`` on its controller; a cycle
    without a ``cycle`` list is ``off`` then ``on``."""
    if action == "cycle" and not spec.cycle:
        deadline = time.monotonic() + timeout
        _command(hosts, host, spec, "off", timeout)
        _command(hosts, host, spec, "on", max(1.0, deadline - time.monotonic()))
        return
    argv_template: tuple[str, ...] = getattr(spec, action)
    if not argv_template:
        raise InputError(f"{host.name}: its power entry has no `{action}` command")
    assert spec.controller is not None  # the loader requires it for command entries
    fields = {**dict(spec.vars), "host": host.name}
    argv = templates.fill(argv_template, fields, f"{host.name}: power {action} template")
    try:
        hosts.session(spec.controller).run(argv, timeout=timeout, check=True)
    except HilError as e:
        raise PowerFailed(
            host.name,
            f"power {action} through controller {spec.controller} failed: {e}; "
            "check the power controller and the host's power entry",
        ) from e


register_power_mode("command", _command)
