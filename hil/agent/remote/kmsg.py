"""The kernel log from a cursor, through /dev/kmsg.

A cursor is an open /dev/kmsg descriptor positioned at the end of the log when
it was made; reading it returns every record the kernel logged since, and
moves it on.  Cursors live as long as the agent (closed when it exits).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable

from ..protocol import KmsgReadReply, KmsgRecordReply, MethodName
from .errors import OpError, held

KMSG = "/dev/kmsg"
_RECORD_MAX = 8192  # the kernel refuses reads shorter than one record (~1 KiB)
_cursors: dict[int, int] = {}
_lock = threading.Lock()
_ids = itertools.count(1)


def parse(record: bytes) -> KmsgRecordReply:
    """One /dev/kmsg record: ``prio,seq,usec,flags[,...];message`` + key lines."""
    text = record.decode("utf-8", errors="replace")
    header, _, rest = text.partition(";")
    message = rest.split("\n", 1)[0]
    fields = header.split(",")
    level = int(fields[0])
    return {
        "seq": int(fields[1]),
        "usec": int(fields[2]),
        "priority": level & 7,
        "facility": level >> 3,
        "message": message,
    }


def cursor() -> int:
    """A new cursor at the current end of the kernel log."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise OpError("os", f"cannot open {KMSG}: {e.strerror}", errno=e.errno) from None
    os.lseek(fd, 0, os.SEEK_END)
    with _lock:
        cid = next(_ids)
        _cursors[cid] = fd
    return cid


def _fd(cid: int) -> int:
    return held(_cursors, _lock, cid, f"no kmsg cursor {cid} (made by another agent, or closed)")


def read(cursor: int) -> KmsgReadReply:
    """Records logged since ``cursor`` was made or last read; ``lost`` counts
    records the ring buffer overwrote before we read them."""
    fd = _fd(cursor)
    records: list[KmsgRecordReply] = []
    lost = 0
    while True:
        try:
            chunk = os.read(fd, _RECORD_MAX)
        except BlockingIOError:
            break
        except BrokenPipeError:
            # EPIPE: records were overwritten; the next read resumes after them.
            lost += 1
            continue
        if not chunk:
            break
        records.append(parse(chunk))
    return {"records": records, "lost": lost}


def close(cursor: int) -> None:
    """Forget ``cursor`` and close its descriptor."""
    with _lock:
        fd = _cursors.pop(cursor, None)
    if fd is not None:
        os.close(fd)


def close_all() -> None:
    """Close every cursor (the agent is exiting)."""
    with _lock:
        fds = list(_cursors.values())
        _cursors.clear()
    for fd in fds:
        os.close(fd)


METHODS: dict[MethodName, Callable[..., object]] = {
    "kmsg_cursor": cursor,
    "kmsg_read": read,
    "kmsg_close": close,
}
