"""An RDMA device as sysfs shows it: which driver runs it, read through the agent.

Files are read with ``cat`` and ``readlink -f`` through the agent's ``run``
(argv lists), so a recorded host (tests/data/t6) serves them as files.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import InputError, RemoteError
from hil.judge.profiles import PROVIDERS, provider_named

if TYPE_CHECKING:
    from hil.agent import Agent

SYSFS_IB = "/sys/class/infiniband"
SYSFS_NET = "/sys/class/net"
READ_TIMEOUT = 15.0


def read_file(agent: Agent, host: str, path: str) -> str:
    """A sysfs (or procfs) file's content, stripped; RemoteError naming host and file."""
    r = agent.run(tools.argv("cat", path), timeout=READ_TIMEOUT)
    if r.status != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
        raise RemoteError(host, f"cannot read {path} ({why})")
    return r.stdout.strip()


def device_driver(agent: Agent, host: str, device: str) -> str:
    """The provider behind RDMA device ``device`` on ``host``, as sysfs tells it.

    Its ``node_desc`` names the registered providers (iw_cxgb4's parent PCI
    function is bound by ``cxgb4``, not ``iw_cxgb4``, so the description comes
    first); else the driver of its parent device.
    """
    base = posixpath.join(SYSFS_IB, device)
    desc = read_file(agent, host, posixpath.join(base, "node_desc"))
    for spec in PROVIDERS.values():
        if desc.startswith(spec.node_desc):
            return spec.driver
    link = agent.run(
        tools.argv("readlink", "-f", posixpath.join(base, "device", "driver")), timeout=READ_TIMEOUT
    )
    parent = posixpath.basename(link.stdout.strip()) if link.status == 0 else ""
    if parent:
        try:
            return provider_named(parent).driver
        except InputError:
            return parent  # a driver hil has no profile for: the profile says so
    raise RemoteError(
        host,
        f"RDMA device {device}: cannot tell its driver (node_desc "
        f"{desc!r}, no parent device driver); is it an RNIC hil knows?",
    )
