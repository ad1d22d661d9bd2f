"""Kernel module parameters on a host: read them, and pin a link's at pair setup.

Parameters live in ``/sys/module/DRIVER/parameters/NAME`` (one value and a
newline each); hil reads the ones it knows (:mod:`hil.inventory.modparams`)
with ``cat`` through the agent, so a recorded host serves them as files.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import RemoteError
from hil.inventory.modparams import MODULE_PARAMS

if TYPE_CHECKING:
    from hil.agent import Agent

READ_TIMEOUT = 15.0
SYS_MODULE = "/sys/module"


def module_dir(driver: str) -> str:
    """The sysfs folder of a loaded (or built-in, with parameters) module."""
    return posixpath.join(SYS_MODULE, driver)


def read_params(agent: Agent, host_name: str, driver: str) -> dict[str, str]:
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


def _missing(agent: Agent, host_name: str, driver: str, paths: list[str], stderr: str) -> None:
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
