"""The C boundary of the ctypes layer: loading a library, calling it, and its errors.

Shared by both sides of the layer (:mod:`.cmabi` for librdmacm,
:mod:`.verbsabi` for libibverbs): each loads its library with :func:`load`
and calls it through :func:`call`, so a failure reads the same from either.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Mapping
from typing import NoReturn


class RdmaError(OSError):
    """A librdmacm or libibverbs call failed; ``op`` names it, ``errno`` is the C errno."""

    def __init__(self, op: str, err: int, detail: str = "") -> None:
        name = errno.errorcode.get(err, str(err))
        text = f"{op}: {name} ({os.strerror(err)})" + (f": {detail}" if detail else "")
        super().__init__(err, text)
        self.op = op

    def __str__(self) -> str:
        return str(self.strerror)


class RdmaUnavailable(RdmaError):
    """This host cannot do RDMA: no library, no RDMA device, or no RDMA CM in the kernel."""


def call(op: str, fn: object, *args: object) -> None:
    """Call a C function that returns 0 on success, raising :class:`RdmaError` otherwise.

    librdmacm returns -1 and sets errno; libibverbs and provider ops return
    the errno itself.
    """
    ret = fn(*args)  # type: ignore[operator]
    if ret > 0:
        raise RdmaError(op, ret)
    if ret < 0:
        raise RdmaError(op, ctypes.get_errno() or (-ret if ret < -1 else errno.EIO))


def fail(op: str) -> NoReturn:
    """Raise for a C function that returned NULL and set errno."""
    raise RdmaError(op, ctypes.get_errno() or errno.EIO)


Signatures = Mapping[str, tuple[object, list[object]]]


def load(soname: str, signatures: Signatures, package: str) -> ctypes.CDLL:
    """dlopen a library and type the functions we call."""
    try:
        lib = ctypes.CDLL(soname, use_errno=True)
    except OSError as exc:
        raise RdmaUnavailable(
            "dlopen", errno.ENOENT, f"{soname}: {exc}; install rdma-core's {package}"
        ) from None
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib
