"""A pair after setup (:func:`hil.host.pairsetup.setup_pair`): both configured ends.

Its own module so that what reads a set-up pair (module parameter pinning,
the provider, reports) does not import pair setup itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class PortState:
    """One configured end of the pair."""

    host: str
    port: str
    netdev: str
    address: str | None
    mtu: int
    rdma_device: str | None  # None when setup ran with rdma=False
    created: bool  # True when setup created the RDMA device (siw fallback)


@dataclass(frozen=True)
class PairState:
    """The pair after setup: both ends, and whether A reached B."""

    pair: str
    a: PortState
    b: PortState
    reached: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for ``hil host setup --json`` and reports."""
        return {
            "pair": self.pair,
            "a": asdict(self.a),
            "b": asdict(self.b),
            "reached": self.reached,
        }
