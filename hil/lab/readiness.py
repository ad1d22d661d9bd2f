"""When is a lab up: every guest runs a command over hil's SSH layer.

Readiness is checked the way suites will reach the guests: through
``hil.ssh`` with the lab inventory, the lab's key and its known_hosts
(host keys verified strictly).  A cheap SSH banner poll comes first, and a
guest whose QEMU exits meanwhile fails at once with its log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from hil import tools
from hil.errors import HilError, LabError
from hil.inventory import loader
from hil.inventory.model import Host
from hil.lab.guests import log_tail, ssh_banner
from hil.lab.state import GuestState, LabState, qemu_alive
from hil.ssh import SSHSession

POLL = 0.5
SSH_TIMEOUT = 15.0


def wait_ready(
    state: LabState, inventory: Path, deadline: float, say: Callable[[str], None]
) -> None:
    """Wait until every guest answers over SSH, or raise LabError at ``deadline``."""
    inv = loader.load(inventory)
    started = time.monotonic()
    for g in state.guests:
        _wait_banner(g, deadline)
        last = _wait_session(g, inv.hosts[g.name], deadline)
        if last is not None:
            raise LabError(
                f"{g.name}: SSH not ready within the boot timeout: {last}\n"
                f"guest log {g.log}:\n{log_tail(Path(g.log))}"
            )
        say(f"lab: {g.name} SSH-ready (+{time.monotonic() - started:.1f} s)")


def _wait_banner(g: GuestState, deadline: float) -> None:
    while not ssh_banner(g.ssh_port):
        _check_alive(g)
        if time.monotonic() > deadline:
            raise LabError(
                f"{g.name}: no SSH on 127.0.0.1:{g.ssh_port} within the boot timeout; "
                f"guest log {g.log}:\n{log_tail(Path(g.log))}"
            )
        time.sleep(POLL)


def _wait_session(g: GuestState, host: Host, deadline: float) -> str | None:
    """None once ``true`` ran over SSH; else the last error at the deadline."""
    last = "no attempt"
    while time.monotonic() < deadline:
        _check_alive(g)
        try:
            with SSHSession.connect(host, timeout=SSH_TIMEOUT, ssh_config=None) as s:
                s.run(tools.argv("true"), timeout=SSH_TIMEOUT)
            return None
        except HilError as e:
            last = str(e)
        time.sleep(POLL)
    return last


def _check_alive(g: GuestState) -> None:
    if not qemu_alive(g):
        raise LabError(
            f"{g.name}: the guest stopped while booting; guest log {g.log}:\n"
            f"{log_tail(Path(g.log))}"
        )
