"""A netdev's driver, driver version, firmware and bus address, straight from the kernel.

The same ``SIOCETHTOOL`` ioctl (``ETHTOOL_GDRVINFO``) that ``ethtool -i``
makes, so hosts need no ethtool package: a ``struct ethtool_drvinfo`` buffer,
its address in a ``struct ifreq`` on an ``AF_INET`` datagram socket (any
socket of the agent's network namespace will do; nothing is sent on it).
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import socket
import struct
from collections.abc import Callable

from ..protocol import DrvInfoReply, ErrorKind, MethodName
from .errors import OpError

SIOCETHTOOL = 0x8946  # linux/sockios.h
ETHTOOL_GDRVINFO = 0x00000003  # linux/ethtool.h
IFNAMSIZ = 16
# struct ethtool_drvinfo (linux/ethtool.h): cmd, driver[32], version[32],
# fw_version[32], bus_info[32], erom_version[32], reserved2[12], then five
# __u32 counts (n_priv_flags, n_stats, testinfo_len, eedump_len, regdump_len).
_DRVINFO = struct.Struct("=I32s32s32s32s32s12s5I")
# struct ifreq: the name, then a union whose ifr_data is a pointer; the union
# is 24 bytes on 64-bit (struct ifmap), which the kernel copies in whole.
_IFREQ = struct.Struct(f"{IFNAMSIZ}sP")
_IFREQ_SIZE = 40


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def drvinfo(netdev: str) -> DrvInfoReply:
    """``driver``, ``version``, ``firmware`` and ``bus_info`` of ``netdev``.

    Fields the driver leaves empty are ``""`` (veth reports no firmware or
    bus).  A missing netdev raises ``not_found``; any other refusal ``os``
    with the errno (e.g. EOPNOTSUPP from a driver without ethtool ops).
    """
    name = netdev.encode()
    if not name or len(name) >= IFNAMSIZ or b"/" in name or b"\0" in name:
        raise OpError("bad_params", f"not a network interface name: {netdev!r}", netdev=netdev)
    buf = array.array("B", _DRVINFO.pack(ETHTOOL_GDRVINFO, *([b""] * 6), *([0] * 5)))
    address, _ = buf.buffer_info()
    ifreq = _IFREQ.pack(name, address).ljust(_IFREQ_SIZE, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            # The kernel writes the answer into buf, through the pointer in ifreq.
            fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    except OSError as e:
        code = e.errno or 0
        errname = errno.errorcode.get(code, str(code))
        message = f"SIOCETHTOOL (ETHTOOL_GDRVINFO) on {netdev}: {os.strerror(code)} ({errname})"
        kind: ErrorKind = "not_found" if code == errno.ENODEV else "os"
        if code == errno.ENODEV:
            message += "; no such network interface in the agent's network namespace"
        raise OpError(kind, message, errno=code, errname=errname, netdev=netdev) from None
    _cmd, driver, version, firmware, bus, *_ = _DRVINFO.unpack(buf.tobytes())
    return {
        "netdev": netdev,
        "driver": _text(driver),
        "version": _text(version),
        "firmware": _text(firmware),
        "bus_info": _text(bus),
    }


METHODS: dict[MethodName, Callable[..., object]] = {
    "ethtool_drvinfo": drvinfo,
}
