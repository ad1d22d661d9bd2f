"""The cm_ids of one channel, named by small integer handles (never raw pointers).

Handles cross the agent's JSON channel; pointers are what events name.  The
table maps both ways, and remembers destroyed ids' pointers, so that an
event the kernel delivers for an id after its destroy still names it.
"""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict

from .cdll import RdmaError
from .cmabi import CMIdHead
from .ibverbs import QPResources

RETIRED_KEPT = 4096  # destroyed ids remembered per channel (their pointers, for late events)


class CMId:
    """A cm_id and the verbs resources the layer made for its QP."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.res: QPResources | None = None

    def head(self) -> CMIdHead:
        """The id's first fields (device context, QP, route addresses), read in place."""
        return CMIdHead.from_address(self.ptr)


class IdTable:
    """Live cm_ids by handle and by pointer, and destroyed ids' pointers.

    Safe to use from two threads: a blocking destroy may run in one while
    another reads events.
    """

    def __init__(self) -> None:
        self._ids: dict[int, CMId] = {}
        self._by_ptr: dict[int, int] = {}
        # Destroyed ids' pointers -> their former handles, so an event the kernel
        # delivers for an id after its destroy still names it (no-event-after-destroy
        # judges it) instead of arriving with no id; dropped when malloc hands the
        # pointer to a new id, and bounded (oldest first) for a long-lived worker.
        self._retired: OrderedDict[int, int] = OrderedDict()
        self._next = 1
        self._lock = threading.Lock()

    def register(self, ptr: int) -> int:
        """A new handle for the cm_id at ``ptr``."""
        with self._lock:
            handle = self._next
            self._next += 1
            self._ids[handle] = CMId(ptr)
            self._by_ptr[ptr] = handle
            self._retired.pop(ptr, None)
        return handle

    def get(self, handle: int) -> CMId:
        """The live id of ``handle``; RdmaError EBADF when there is none."""
        try:
            return self._ids[handle]
        except KeyError:
            raise RdmaError("cm_id", errno.EBADF, f"no cm_id with handle {handle}") from None

    def live(self, ptr: int) -> bool:
        """True when ``ptr`` is a live id of this table."""
        return ptr in self._by_ptr

    def known(self, ptr: int) -> int | None:
        """The handle of a live id, else the one a destroyed id had, else None."""
        with self._lock:
            return self._by_ptr.get(ptr, self._retired.get(ptr))

    def retire(self, handle: int, cm: CMId) -> None:
        """Forget a destroyed id, keeping its handle for events that name its pointer."""
        with self._lock:
            del self._ids[handle]
            self._by_ptr.pop(cm.ptr, None)
            self._retired[cm.ptr] = handle
            while len(self._retired) > RETIRED_KEPT:
                self._retired.popitem(last=False)

    def handles(self) -> list[int]:
        """The handles of the live ids, oldest first."""
        return sorted(self._ids)
