"""What a pair run asks for: which pair (a name, requirements or a lease), how it holds
it, and the module parameters it pins; and taking the lease it asks for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.errors import InputError
from hil.inventory.model import PinnedParam
from hil.inventory.modparams import overridden, parse_override
from hil.inventory.require import parse_requirement, select
from hil.reservation import Claim, Holder, Lease, reserve

if TYPE_CHECKING:
    from hil.inventory.model import Inventory, Pair
    from hil.reservation.store import Store

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PairRequest:
    """Which pair a run wants and how it holds it.

    ``pair`` names one pair; else ``require`` (``driver=iw_cxgb4`` ...)
    selects any that meets all; neither: any pair of the inventory.
    ``lease`` adopts a live lease instead of reserving.  ``rdma=False`` sets
    the pair up without RDMA devices (hosts without RDMA): no provider then.
    ``module_params`` override the link's: ``DRIVER.NAME=VALUE`` as given on
    the command line (``--hil-module-param``, for a matrix run), checked when
    the pair is set up, before anything changes.
    """

    pair: str | None = None
    require: tuple[str, ...] = ()
    lease: str | None = None
    holder: str = "hil"
    ttl: float = 300.0
    wait: float = 0.0
    rdma: bool = True
    module_params: tuple[str, ...] = ()

    def describe(self) -> str:
        """The request in words, for headers and errors."""
        if self.lease:
            return f"lease {self.lease}"
        if self.pair:
            return f"pair {self.pair}"
        return " ".join(self.require) or "any pair"


def claims_for(inventory: Inventory, pair: str | None, require: Iterable[str]) -> list[Claim]:
    """The claims a pair name or a list of requirements stands for (all pairs if neither)."""
    require = list(require)
    if pair:
        try:
            pairs = [inventory.pair(pair)]
        except KeyError as e:
            raise InputError(str(e.args[0])) from None
    else:
        pairs = select(inventory, [parse_requirement(r) for r in require])
        if not pairs:
            raise InputError(f"{inventory.path}: no pair meets {' '.join(require)}")
    return [Claim(p.name, (p.host_a.name, p.host_b.name)) for p in pairs]


def take_lease(
    inventory: Inventory, store: Store, request: PairRequest, progress: Progress | None = None
) -> Lease:
    """The lease ``request`` asks for: the one it adopts (checked to hold a pair of
    ``inventory``), else a new one on a pair it claims, waiting as long as it says."""
    if request.lease:
        lease = store.get(request.lease)
        if lease.pair not in inventory.links:
            raise InputError(
                f"lease {lease.id} holds pair {lease.pair}, which {inventory.path} does not have"
            )
        return lease
    return reserve(
        store,
        claims_for(inventory, request.pair, request.require),
        Holder.current(request.holder),
        ttl=request.ttl,
        wait=request.wait,
        progress=progress,
    )


def module_params_for(pair: Pair, request: PairRequest) -> tuple[PinnedParam, ...]:
    """The module parameters a run of ``request`` pins on ``pair``: the link's,
    overridden by the request's.

    InputError when an override is not a known parameter a run can set, or
    names a driver that neither port uses.
    """
    drivers = {pair.rnic_a.driver, pair.rnic_b.driver}
    overrides = [parse_override(text) for text in request.module_params]
    for p in overrides:
        if p.driver not in drivers:
            raise InputError(
                f"module parameter {p} is for {p.driver}, but pair {pair.name}'s ports "
                f"use {' and '.join(sorted(drivers))}"
            )
    return overridden(pair.link.module_params, overrides)
