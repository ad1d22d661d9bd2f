"""The QPs the CM layer makes on cm_ids: each with its own verbs resources, or bare ones
that share one PD and CQ per device.

On iWARP a connect or an accept needs a QP: the channel makes it here, after
ADDR_RESOLVED on the active side, after CONNECT_REQUEST on the passive side.
"""

from __future__ import annotations

import errno
from ctypes import byref, c_uint32

from ...protocol import QPInfo
from .cdll import RdmaError, call
from .cmabi import Lib
from .ibverbs import QPResources, SharedPD
from .ids import CMId
from .verbsabi import QP_NUM_OFFSET


def _no_device(handle: int, op: str, first: str) -> RdmaError:
    return RdmaError(op, errno.EINVAL, f"cm_id {handle} has no device yet: {first} first")


class DeviceQPs:
    """Makes QPs on a channel's cm_ids; holds the shared PD and CQ of each device."""

    def __init__(self, lib: Lib) -> None:
        self._lib = lib
        self._shared: dict[int, SharedPD] = {}  # per device context: create_bare's PD and CQ

    def create(self, cm: CMId, handle: int, depth: int, buf_size: int) -> QPInfo:
        """Give a cm_id a PD, a CQ, an RC QP and a registered buffer.

        Returns ``qp_num`` and the buffer's ``addr``, ``rkey`` and ``length``
        (what a peer needs for RDMA WRITEs into it).
        """
        verbs = cm.head().verbs
        if not verbs:
            raise _no_device(handle, "rdma_create_qp", "resolve its address")
        if cm.res is not None:
            raise RdmaError("rdma_create_qp", errno.EEXIST, f"cm_id {handle} has a QP already")
        res = QPResources(self._lib.verbs, verbs, depth, buf_size)
        try:
            call(
                "rdma_create_qp",
                self._lib.cm.rdma_create_qp,
                cm.ptr,
                res.pd,
                byref(res.init_attr()),
            )
        except RdmaError:
            res.release()
            raise
        cm.res = res
        return res.attach(int(cm.head().qp or 0))

    def shared_pd(self, cm: CMId, handle: int) -> SharedPD:
        """The one PD and CQ of the device ``handle``'s id is on (made at the first call):
        what :meth:`create_bare` uses; a listener may have it made before requests come,
        as librdmacm makes its own PD when an id first gets its device."""
        verbs = cm.head().verbs
        if not verbs:
            raise _no_device(handle, "ibv_alloc_pd", "bind it")
        shared = self._shared.get(verbs)
        if shared is None:
            shared = self._shared[verbs] = SharedPD(self._lib.verbs, verbs)
        return shared

    def create_bare(self, cm: CMId, handle: int) -> int:
        """An RC QP on the one PD and CQ of its device, with no buffer or receives.

        For connections that carry no traffic (a storm's; rdma-core's cmtime
        shares one PD and CQ too): the QP is the only per-connection verbs
        object.  Returns its qp_num.  Posting on it is refused (no buffer).
        """
        head = cm.head()
        if not head.verbs:
            raise _no_device(handle, "rdma_create_qp", "resolve its address")
        if head.qp:
            raise RdmaError("rdma_create_qp", errno.EEXIST, f"cm_id {handle} has a QP already")
        shared = self.shared_pd(cm, handle)
        call("rdma_create_qp", self._lib.cm.rdma_create_qp, cm.ptr, shared.pd, byref(shared.attr))
        return int(c_uint32.from_address(int(cm.head().qp or 0) + QP_NUM_OFFSET).value)

    def release(self) -> None:
        """Free the shared PDs and CQs (after every QP on them is gone)."""
        for shared in self._shared.values():
            shared.release()
        self._shared.clear()
