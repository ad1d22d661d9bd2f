"""Kernel module parameters on a host: read them, and pin a link's at pair setup.

Parameters live in ``/sys/module/DRIVER/parameters/NAME`` (one value and a
newline each); hil reads the ones it knows (:mod:`hil.inventory.modparams`)
with ``cat`` and sets them with ``tee`` through the agent, so a recorded host
serves them as files.  A change is journaled like every other one
(:mod:`hil.host.journal`): teardown, or the next reservation after a killed
run, writes the old value back.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import RemoteError
from hil.host.journal import agent_undo
from hil.host.rdmadev import READ_TIMEOUT
from hil.inventory.model import Pair, PinnedParam, Rnic
from hil.inventory.modparams import MODULE_PARAMS, module_param

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.agent import Runner
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal
    from hil.host.pairstate import PairState, PortState

log = logging.getLogger(__name__)

SYS_MODULE = "/sys/module"


def module_dir(driver: str) -> str:
    """The sysfs folder of a loaded (or built-in, with parameters) module."""
    return posixpath.join(SYS_MODULE, driver)


def read_params(agent: Runner, host_name: str, driver: str) -> dict[str, str]:
    """The values of ``driver``'s known parameters on the host, as sysfs prints them.

    ``{}`` for a driver without parameters (siw).  ``RemoteError`` naming the
    host and driver when the module is not loaded, or when it lacks one of
    the parameters (a kernel whose driver differs from the one hil knows).
    """
    params = MODULE_PARAMS.get(driver, {})
    if not params:
        return {}
    paths = [p.path for p in params.values()]
    r = agent.run(tools.argv("cat", *paths), timeout=READ_TIMEOUT)
    values = r.stdout.splitlines()
    if r.status == 0 and len(values) == len(paths):
        return dict(zip(params, (v.strip() for v in values), strict=True))
    _missing(agent, host_name, driver, paths, r.stderr)
    raise RemoteError(
        host_name,
        f"cannot read the parameters of module {driver} ({r.stderr.strip() or f'exit {r.status}'})",
    )


def _missing(agent: Runner, host_name: str, driver: str, paths: list[str], stderr: str) -> None:
    """Raise ``RemoteError`` when the module, or one of its parameters, is not there."""
    folder = module_dir(driver)
    if agent.run(tools.argv("stat", "-c", "%a", folder), timeout=READ_TIMEOUT).status != 0:
        raise RemoteError(
            host_name,
            f"module {driver} is not loaded ({folder} does not exist): load it "
            f"(modprobe {driver}) or check the inventory's driver for this host",
        )
    absent = [posixpath.basename(p) for p in paths if p + ":" in stderr]
    if absent:
        raise RemoteError(
            host_name,
            f"module {driver} has no parameter {', '.join(absent)} ({folder}/parameters); "
            "its kernel's driver differs from the one hil knows (Linux 6.1)",
        )


def pin_params(
    hosts: Hosts,
    pair: Pair,
    params: Sequence[PinnedParam],
    journal: Journal,
    state: PairState | None = None,
) -> dict[str, dict[str, str]]:
    """Set ``params`` on the pair's hosts whose port runs their driver; the values read back.

    A port runs its inventory ``driver``, unless pair setup (``state``) fell
    back to siw there: then the driver's parameters would shape nothing the run
    uses, and are left alone (and logged).  Each change is journaled (its undo
    writes the old value back) before it is made; a value already in place is
    left alone.  Returns, per host, each pinned parameter (``driver.name``) as
    sysfs prints it afterwards.  ``RemoteError`` naming the host when a module
    is not loaded, a write is refused, or a value reads back otherwise.
    """
    ports = (state.a, state.b) if state is not None else (None, None)
    pinned: dict[str, dict[str, str]] = {}
    sides = ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b))
    for (host, rnic), port in zip(sides, ports, strict=True):
        driver = running_driver(rnic, port)
        skipped = [p for p in params if p.driver == rnic.driver != driver]
        if skipped:
            log.warning(
                "%s runs the %s fallback, not %s: not pinning %s",
                host.name,
                driver,
                rnic.driver,
                ", ".join(map(str, skipped)),
            )
        mine = [p for p in params if p.driver == driver]
        if mine:
            pinned[host.name] = _pin_host(hosts.agent(host.name), host.name, mine, journal)
    return pinned


def running_driver(rnic: Rnic, port: PortState | None) -> str:
    """The driver a port runs: the inventory's, or its fallback when setup chose that."""
    fell_back = port is not None and port.rdma_device not in (None, rnic.rdma_device)
    return rnic.fallback if fell_back and rnic.fallback else rnic.driver


def _pin_host(
    agent: Agent, host: str, params: list[PinnedParam], journal: Journal
) -> dict[str, str]:
    drivers = dict.fromkeys(p.driver for p in params)
    before = {d: read_params(agent, host, d) for d in drivers}
    for p in params:
        old = before[p.driver][p.name]
        if old != p.value:
            _set(agent, host, p, old, journal)
    after = {d: read_params(agent, host, d) for d in drivers}
    for p in params:
        got = after[p.driver][p.name]
        if got != p.value:
            raise RemoteError(
                host,
                f"module parameter {p.driver}.{p.name} was set to {p.value} but reads back "
                f"{got}; the driver did not take the value (see its source for the values "
                "it accepts); it is restored at teardown",
            )
    return {f"{p.driver}.{p.name}": after[p.driver][p.name] for p in params}


def _set(agent: Agent, host: str, p: PinnedParam, old: str, journal: Journal) -> None:
    """Write ``p`` into sysfs, its undo (``old`` written back) journaled first."""
    path = module_param(p.driver, p.name).path
    # sysfs takes a value the way `echo VALUE > FILE` writes it: with a newline.
    undo = agent_undo(
        "run",
        f"restore module parameter {p.driver}.{p.name}={old}",
        argv=tools.argv("tee", path),
        input=f"{old}\n",
    )
    entry = journal.change(host, undo)
    r = agent.run(tools.argv("tee", path), input=f"{p.value}\n", timeout=READ_TIMEOUT)
    if r.status != 0:
        journal.forget(entry)
        why = r.why()
        raise RemoteError(
            host,
            f"cannot set module parameter {p.driver}.{p.name}={p.value} ({why}); "
            f"check that {path} is writable (mode 644) and that the agent runs as root",
        )
