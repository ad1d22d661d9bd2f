"""The one error an operation raises to answer a call with a structured error."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TypeVar

from ..protocol import ErrorKind

T = TypeVar("T")


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


def held(table: Mapping[int, T], lock: threading.Lock, key: int, missing: str) -> T:
    """``table[key]``, read under ``lock``; ``OpError("not_found", missing)`` when absent."""
    with lock:
        value = table.get(key)
    if value is None:
        raise OpError("not_found", missing)
    return value
