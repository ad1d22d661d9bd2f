"""What a timeline records: the events a host's channel delivered, the controller's actions.

Both carry ``t_us`` on the controller's time base and the side (``a`` or
``b``) of the pair they happened on; :mod:`hil.judge.timeline` puts them
together with the clocks and the after-run evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SIDES = ("a", "b")


@dataclass(frozen=True)
class Event:
    """One RDMA CM event as a host's event channel delivered it.

    ``status`` is the kernel's (a negative errno or 0); ``id`` names the cm_id
    within its host (e.g. ``"b:4"``), ``listen_id`` the listener a
    CONNECT_REQUEST came through; ``seq`` is the position in the channel's
    delivery order; ``conn`` ties the events of one logical connection on
    both sides together (filled by the sequence when it knows).  ``local``
    and ``remote`` are the id's endpoints when the event came, ``"ip:port"``
    (``"[v6]:port"``), "" when not known: the connection's 4-tuple on the wire.
    ``responder_resources`` and ``initiator_depth`` are the event's ``param.conn``
    IRD/ORD words as reported (rdma_get_cm_event(3); None: not read).
    """

    host: str
    side: str
    t_us: int
    host_t_us: int
    type: str
    status: int = 0
    id: str = ""
    listen_id: str | None = None
    private_data: str = ""
    conn: str | None = None
    seq: int = 0
    local: str = ""
    remote: str = ""
    responder_resources: int | None = None
    initiator_depth: int | None = None

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"event side must be one of {SIDES}, not {self.side!r}")
        bytes.fromhex(self.private_data)  # raises ValueError on non-hex text

    @property
    def private_bytes(self) -> bytes:
        """The private data as bytes."""
        return bytes.fromhex(self.private_data)

    def brief(self) -> str:
        """A one-line rendering for messages: ``a:3 ESTABLISHED(0) @12.345ms``."""
        conn = f" conn={self.conn}" if self.conn else ""
        when = f"@{self.t_us / 1000:.3f}ms"
        return f"{self.id} {self.type}({self.status}) {when} on {self.host}{conn}"


@dataclass(frozen=True)
class Action:
    """Something the controller made a host do, and how it went.

    ``result`` is ``"ok"`` or the failure as an errno name (``"ECONNREFUSED"``)
    or number; ``duration_us`` is how long the call took on the host (how long
    a destroy blocked).  ``id`` names the cm_id acted on, when there is one.
    """

    t_us: int
    side: str
    name: str
    id: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    result: str | int = "ok"
    duration_us: int | None = None

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"action side must be one of {SIDES}, not {self.side!r}")

    @property
    def ok(self) -> bool:
        """True when the operation succeeded."""
        return self.result == "ok"

    @property
    def end_us(self) -> int:
        """When the call returned (its start when no duration was measured)."""
        return self.t_us + (self.duration_us or 0)

    def brief(self) -> str:
        """A one-line rendering for messages."""
        target = f" {self.id}" if self.id else ""
        took = f" took {self.duration_us / 1000:.1f}ms" if self.duration_us is not None else ""
        return f"{self.side}:{self.name}{target} -> {self.result} @{self.t_us / 1000:.3f}ms{took}"


def split_endpoint(text: str) -> tuple[str, int] | None:
    """An event's ``local``/``remote`` text as (address, port): ``198.18.0.1:7174``,
    ``[fe80::1]:7174`` or ``fe80::1:7174`` (the last colon begins the port); None for
    ``""`` or text that names no port."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)
