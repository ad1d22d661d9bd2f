"""The one error an operation raises to answer a call with a structured error."""

from __future__ import annotations

from .protocol import ErrorKind


class OpError(Exception):
    """A failed operation: ``kind`` is machine-readable, ``details`` JSON-safe.

    The kinds are ``protocol.ErrorKind``: ``timeout`` (a bounded operation
    overran), ``wait_timeout`` (a wanted state did not come), ``netlink`` (an
    errno from the kernel), ``not_found``, ``rdma_unavailable``,
    ``command_failed``, ``os``, ``bad_params``, ``unknown_method``,
    ``internal``, and for CM endpoints ``rdma`` and ``cm_worker_died``.
    """

    def __init__(self, kind: ErrorKind, message: str, **details: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details
