"""The plugin's state for one pytest session: which pair it holds, and how.

Kept apart from the hooks so the reservation logic reads top to bottom.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from hil.errors import EXIT_INFRA, HilError, InputError
from hil.inventory import Inventory, Pair, load
from hil.inventory.require import parse_requirement, select
from hil.reservation import Claim, Heartbeat, Holder, Lease, open_store, reserve
from hil.reservation.store import Store


@dataclass(frozen=True)
class Reserved:
    """What ``hil_pair`` gives a test: the pair, its lease, the inventory."""

    pair: Pair
    lease: Lease
    inventory: Inventory


class HilSession:
    """Reserve (or adopt) a pair at start, renew it, release it at the end."""

    def __init__(self, config: pytest.Config, inventory_path: str | None) -> None:
        self.config = config
        self.inventory_path = inventory_path
        self.reserved: Reserved | None = None
        self.error: HilError | None = None
        self._heartbeat: Heartbeat | None = None
        self.store: Store | None = None
        self._adopted = False

    def describe_request(self) -> str:
        """The inventory and what we ask of it, for the header."""
        opt = self.config.getoption
        if opt("hil_lease"):
            return f"lease {opt('hil_lease')}"
        what = f"pair {opt('hil_pair')}" if opt("hil_pair") else (
            " ".join(opt("hil_require")) or "any pair"
        )
        return f"{self.inventory_path} ({what})"

    def start(self) -> None:
        """Reserve or adopt; a failure is kept and reported by ``hil_pair``."""
        try:
            self._start()
        except HilError as e:
            self.error = e

    def _start(self) -> None:
        opt = self.config.getoption
        if not self.inventory_path:
            raise InputError("--hil-lease needs the inventory the lease was taken from: "
                             "pass --hil-inventory FILE (or set HIL_INVENTORY)")
        inventory = load(self.inventory_path)
        self.store = open_store(opt("hil_store"))
        if opt("hil_lease"):
            lease = self.store.get(opt("hil_lease"))
            self._adopted = True
        else:
            lease = reserve(
                self.store,
                self._claims(inventory),
                self._holder(),
                ttl=opt("hil_ttl"),
                wait=opt("hil_wait"),
                progress=self._progress,
            )
        self.reserved = Reserved(inventory.pair(lease.pair), lease, inventory)
        self._heartbeat = Heartbeat(self.store, lease)
        self._heartbeat.start()

    def _claims(self, inventory: Inventory) -> list[Claim]:
        opt = self.config.getoption
        if opt("hil_pair"):
            try:
                pairs = [inventory.pair(opt("hil_pair"))]
            except KeyError as e:
                raise InputError(str(e.args[0])) from None
        else:
            reqs = [parse_requirement(r) for r in opt("hil_require")]
            pairs = select(inventory, reqs)
            if not pairs:
                raise InputError(f"{inventory.path}: no pair meets {' '.join(opt('hil_require'))}")
        return [Claim(p.name, (p.host_a.name, p.host_b.name)) for p in pairs]

    def _holder(self) -> Holder:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        return Holder.current(note=f"pytest {worker}" if worker else "pytest")

    def _progress(self, message: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"hil: {message}")

    def header_lines(self) -> list[str]:
        """Lines for the session header: the pair and the holder, or the failure."""
        if self.error is not None:
            return [f"hil: no pair from {self.describe_request()}: {self.error}"]
        if self.reserved is None:
            return [f"hil: {self.describe_request()}"]
        lease = self.reserved.lease
        pair = self.reserved.pair
        how = "adopted" if self._adopted else "reserved"
        return [
            f"hil: pair {pair.name} ({pair.link.a} <-> {pair.link.b}) {how}, "
            f"lease {lease.id} until {lease.expires.isoformat(timespec='seconds')}",
            f"hil: holder {lease.holder}",
        ]

    def require_reserved(self) -> Reserved:
        """The reserved pair, or a test failure saying why there is none."""
        if self.reserved is None:
            why = self.error or "the session did not reserve a pair"
            pytest.fail(f"hil: no pair from {self.describe_request()}: {why}", pytrace=False)
        return self.reserved

    def unmet(self, requirements: list[str]) -> str | None:
        """Why the reserved pair fails ``requirements``, or None when it meets them."""
        assert self.reserved is not None
        pair = self.reserved.pair
        for text in requirements:
            req = parse_requirement(text)
            if pair.name not in {p.name for p in select(self.reserved.inventory, [req])}:
                return f"pair {pair.name} does not meet {text}"
        return None

    def stop_if_lease_lost(self) -> None:
        """End the run when the heartbeat found our lease taken over."""
        if self._heartbeat is not None and self._heartbeat.lost is not None:
            pytest.exit(f"hil: {self._heartbeat.lost}", returncode=EXIT_INFRA)

    def finish(self) -> None:
        """Stop renewing; release unless the lease was adopted."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self.reserved is not None and not self._adopted:
            try:
                self.store.release(self.reserved.lease.id)
            except HilError as e:
                self._progress(f"could not release lease {self.reserved.lease.id}: {e}")
        if self.store is not None:
            self.store.close()

