"""The one error an operation raises to answer a call with a structured error."""

from __future__ import annotations


class OpError(Exception):
    """A failed operation: ``kind`` is machine-readable, ``details`` JSON-safe.

    Kinds the client knows: ``timeout`` (a bounded operation overran),
    ``wait_timeout`` (a wanted state did not come), ``netlink`` (an errno from
    the kernel), ``not_found``, ``rdma_unavailable``, ``command_failed``,
    ``os``, ``bad_params``, ``unknown_method``, ``internal``.
    """

    def __init__(self, kind: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details
