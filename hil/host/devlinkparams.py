"""devlink parameters on a host: read an irdma port's, and pin a link's at pair setup.

An E810 port's RDMA mode is its PCI function's devlink parameters, which
``ice`` registers (:mod:`hil.inventory.devlinkparams`).  hil reads them with
``devlink -j dev param show`` and sets them with ``devlink dev param set
pci/BDF name NAME value V cmode runtime`` through the agent (argument lists).
A change is journaled like every other one (:mod:`hil.host.journal`) before
it is made: teardown, or the next reservation after a killed run, sets the
old value back.  Switching ``enable_iwarp`` unplugs and replugs the RDMA
device (ice_devlink.c ``ice_devlink_enable_iw_set``: ``ice_unplug_aux_dev``,
``ice_plug_aux_dev``), so it is done at pair setup, before the provider is
read, never during a test.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.errors import RemoteError
from hil.host.irdmadev import pci_function
from hil.host.journal import agent_undo
from hil.host.modparams import running_driver
from hil.host.rdmadev import READ_TIMEOUT
from hil.inventory.devlinkparams import DEVLINK_DRIVER, OFF_VALUES
from hil.inventory.model import Pair, PinnedDevlink, Rnic

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.agent import Runner
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal
    from hil.host.pairstate import PairState

log = logging.getLogger(__name__)

# A set that switches the RDMA mode replugs the auxiliary device and waits for
# irdma's probe (ice_plug_aux_dev -> auxiliary_device_add, synchronous): far
# longer than a read; 30 s is an allowance, not a measurement.
SET_TIMEOUT = 30.0
# How pinned parameters are named beside module parameters (PairRun.pinned, the report).
PREFIX = "devlink"


def parse_values(params: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """name -> (value as devlink prints it, cmode) from devlink's JSON list of parameters."""
    values: dict[str, tuple[str, str]] = {}
    for p in params:
        for v in p.get("values", []):
            value = json.dumps(v.get("value")).strip('"')
            values[str(p.get("name"))] = (value, str(v.get("cmode")))
    return values


def read_devlink(agent: Runner, host: str, handle: str) -> dict[str, tuple[str, str]]:
    """The devlink parameters of ``handle`` (``pci/0000:17:00.0``) on ``host``.

    ``RemoteError`` naming the host when devlink cannot say, or shows no
    parameters for the function (i40e's X722 registers none).
    """
    r = agent.run(tools.argv("devlink", "-j", "dev", "param", "show"), timeout=READ_TIMEOUT)
    try:
        shown: dict[str, Any] = json.loads(r.stdout) if r.status == 0 else {}
    except ValueError:
        shown = {}
    if not shown:
        raise RemoteError(host, f"cannot read devlink dev param show ({r.why()})")
    params = shown.get("param", {}).get(handle)
    if not params:
        raise RemoteError(
            host,
            f"devlink shows no parameters of {handle}: its driver registers none "
            "(i40e, an X722) or it is not an E810 function",
        )
    return parse_values(params)


def pin_devlink(
    hosts: Hosts,
    pair: Pair,
    params: Sequence[PinnedDevlink],
    journal: Journal,
    state: PairState | None = None,
) -> dict[str, dict[str, str]]:
    """Set ``params`` on the PCI function of each end that runs irdma; the values read back.

    An end whose pair setup fell back to siw is left alone (and logged), as
    :func:`hil.host.modparams.pin_params` does.  Values that switch a feature
    off are set first (``OFF_VALUES``: ice refuses iWARP while RoCEv2 is on);
    each change is journaled before it is made; a value in place is left
    alone.  Returns, per host, ``devlink.NAME`` -> the value read back.
    ``RemoteError`` naming the host when devlink refuses a value or it reads
    back otherwise.
    """
    if not params:
        return {}
    ports = (state.a, state.b) if state is not None else (None, None)
    ordered = sorted(params, key=lambda p: p.value not in OFF_VALUES)
    pinned: dict[str, dict[str, str]] = {}
    sides = ((pair.host_a.name, pair.rnic_a), (pair.host_b.name, pair.rnic_b))
    for (host, rnic), port in zip(sides, ports, strict=True):
        driver = running_driver(rnic, port)
        if driver != DEVLINK_DRIVER:
            if rnic.driver == DEVLINK_DRIVER:
                log.warning("%s runs the %s fallback: not pinning devlink parameters", host, driver)
            continue
        pinned[host] = _pin_host(hosts.agent(host), host, rnic, ordered, journal)
    return pinned


def _pin_host(
    agent: Agent, host: str, rnic: Rnic, params: list[PinnedDevlink], journal: Journal
) -> dict[str, str]:
    if rnic.rdma_device is None:
        raise RemoteError(
            host,
            f"port {rnic.name} pins devlink parameters but has no rdma_device in the "
            "inventory: hil finds the PCI function through it",
        )
    handle = f"pci/{pci_function(agent, host, rnic.rdma_device)}"
    before = read_devlink(agent, host, handle)
    for p in params:
        if p.name not in before:
            raise RemoteError(
                host,
                f"{handle} has no devlink parameter {p.name} (its kernel's ice is older "
                "than the one hil knows: local_forwarding came with 6.12)",
            )
        old = before[p.name][0]
        if old != p.value:
            _set(agent, host, handle, p, old, journal)
    after = read_devlink(agent, host, handle)
    for p in params:
        if after[p.name][0] != p.value:
            raise RemoteError(
                host,
                f"devlink parameter {p.name} of {handle} was set to {p.value} but reads back "
                f"{after[p.name][0]}; it is restored at teardown",
            )
    return {f"{PREFIX}.{p.name}": after[p.name][0] for p in params}


def set_argv(handle: str, name: str, value: str) -> list[str]:
    """``devlink dev param set HANDLE name NAME value VALUE cmode runtime``."""
    return tools.argv(
        "devlink", "dev", "param", "set", handle, "name", name, "value", value, "cmode", "runtime"
    )


def _set(
    agent: Agent, host: str, handle: str, p: PinnedDevlink, old: str, journal: Journal
) -> None:
    """Set ``p`` on ``handle``, its undo (``old`` set back) journaled first."""
    undo = agent_undo(
        "run",
        f"restore devlink parameter {p.name}={old} on {handle}",
        argv=set_argv(handle, p.name, old),
    )
    undo["timeout"] = SET_TIMEOUT
    entry = journal.change(host, undo)
    r = agent.run(set_argv(handle, p.name, p.value), timeout=SET_TIMEOUT)
    if r.status != 0:
        journal.forget(entry)
        # devlink prints the driver's extack message ("Error: ice: ...") before the errno line
        why = "; ".join(r.stderr.strip().splitlines()) or r.why()
        raise RemoteError(
            host,
            f"cannot set devlink parameter {p.name}={p.value} on {handle} ({why}); "
            "enable_iwarp and enable_roce are exclusive: pin the other one false too",
        )
