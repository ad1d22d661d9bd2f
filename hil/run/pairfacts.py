"""What the tests of a pair run read once and reuse: kernels, kmemleak hosts, evidence targets.

Each is read on first use after the pair is set up, and forgotten when the
pair run restores it (a host recovered after a crash may boot another kernel).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import HilError
from hil.host import hwevidence, kmemleak

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.host.pairsetup import PairState
    from hil.run.provider import Provider

log = logging.getLogger(__name__)

UNAME_TIMEOUT = 30.0


class PairFacts:
    """Read-once facts of a set-up pair (see the module doc)."""

    def __init__(self, hosts: Hosts, names: tuple[str, str]) -> None:
        self._hosts = hosts
        self._names = names
        self._kernels: dict[str, str] | None = None
        self._kmemleak: tuple[str, ...] | None = None
        self._targets: dict[str, hwevidence.Target] | None = None
        self.targets_note = ""  # why there are no evidence targets, when there are none

    def kernels(self) -> tuple[str, ...]:
        """The kernel releases the pair's hosts run (``uname -r``), sorted, read once."""
        return tuple(sorted(set(self.kernel_by_host().values())))

    def kernel_by_host(self) -> dict[str, str]:
        """Each host's kernel release (``uname -r``), read once: the two ends of a mixed
        pair differ."""
        if self._kernels is None:
            found = {}
            for name in self._names:
                out = self._hosts.agent(name).run(tools.argv("uname", "-r"), timeout=UNAME_TIMEOUT)
                found[name] = out.stdout.strip() if out.status == 0 else f"unknown on {name}"
            self._kernels = found
        return self._kernels

    def kmemleak_hosts(self) -> tuple[str, ...]:
        """The hosts whose kernel runs kmemleak; the first time, what boot leaked is cleared."""
        if self._kmemleak is None:
            names = tuple(n for n in self._names if kmemleak.available(self._hosts.agent(n)))
            for name in names:
                kmemleak.clear(self._hosts.agent(name), name)
            self._kmemleak = names
        return self._kmemleak

    def targets(self, provider: Provider, state: PairState) -> dict[str, hwevidence.Target]:
        """Where each host's NIC counters and driver debugfs are, found once; none at all
        (``targets_note`` says why) when a host cannot tell."""
        if self._targets is None:
            try:
                drivers = {h.host: h.driver for h in provider.hosts}
                self._targets = {
                    port.host: hwevidence.locate(
                        self._hosts.agent(port.host),
                        port.host,
                        port.netdev,
                        port.rdma_device,
                        drivers[port.host],
                    )
                    for port in (state.a, state.b)
                }
            except HilError as e:
                log.warning("no hardware evidence this session: %s", e)
                self.targets_note = f"hardware evidence not taken: {e}"
                self._targets = {}
        return self._targets
