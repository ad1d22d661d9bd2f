"""The peer's end of one TCP connection: roles, reading frames, writing segments, and
the record of every frame.

Role ``active`` connects to the DUT's listener; ``passive`` listens (bound when the
endpoint is made, so the caller learns the port) and accepts one connection.  Every
blocking call waits at most until the deadline it is given (``time.monotonic()``).

Reading: what comes next is known from the state, as a real endpoint knows it: the
passive end first reads an MPA request, the active end an MPA reply, then FPDUs
(RFC 5044 7).  Bytes are gathered across TCP segments until the frame is whole (an MPA
frame: 20 bytes, then PD_Length more; an FPDU: its ULPDU_Length's worth, pad and CRC).
A close is recorded as its own entry: ``fin`` (the DUT closed) or ``rst`` (it reset).

Writing: TCP_NODELAY is on, and a step's bytes go out in writes of its ``segments``
sizes (the rest in one write), so each write leaves as its own TCP segment; with a
``gap``, that many seconds apart (a frame that arrives in pieces over time).

The record: one entry per frame, ``{"t_ns", "dir": "tx"|"rx", "frame", "fields",
"raw"}`` (``t_ns``: this host's CLOCK_MONOTONIC; ``raw``: the first 256 bytes, hex);
closes are ``{"t_ns", "dir", "frame": "fin"|"rst"}``.  Sent frames are recorded with
the fields decoded from the bytes sent, so an override shows as the DUT sees it.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from ...protocol import fpdu, mpa, rdmap
from ...protocol.frames import Fields, FrameError, raw

Entry = dict[str, Any]
CLOSES = ("fin", "rst")


class PeerError(Exception):
    """The connection could not be made or used (a timeout, refused, reset on write)."""


class Endpoint:
    """One connection of the peer, in ``role`` with the DUT at ``address:port``
    (passive: the address and port the peer listens on; port 0 picks one)."""

    def __init__(self, role: str, address: str, port: int, src: str | None = None) -> None:
        if role not in ("active", "passive"):
            raise PeerError(f"role: {role!r} is neither 'active' nor 'passive'")
        self.role = role
        self.record: list[Entry] = []
        self.request: Fields | None = None  # the MPA request, sent or received
        self.reply: Fields | None = None
        self.read_request: Fields | None = None  # the last one received
        self.closed = ""  # "fin" or "rst" once the DUT closed
        self._close_told = False
        self._target = (address, port)
        self._src = src
        self._msn: dict[int, int] = {}
        self._buf = b""
        self._sock: socket.socket | None = None
        self._listener: socket.socket | None = None
        self._ends = ["", ""]  # local, remote: read while the sockets are open
        if role == "passive":
            self._listener = _listening(address, port)

    @property
    def local(self) -> str:
        """``ip:port`` of this end (the listener's before a connection), kept after a close."""
        sock = self._sock or self._listener
        if sock is not None:
            self._ends[0] = _address(sock.getsockname())
        return self._ends[0]

    @property
    def remote(self) -> str:
        """``ip:port`` of the DUT's end once connected ("" before), kept after a close."""
        return self._ends[1]

    @property
    def crc_on(self) -> bool:
        """CRC in use: C=1 in the request or the reply (RFC 5044 7.1)."""
        return any(f and f.get("c") == 1 for f in (self.request, self.reply))

    def open(self, deadline: float) -> None:
        """Connect (active) or accept (passive), once; at most until ``deadline``."""
        if self._sock is not None:
            return
        try:
            self._sock = self._accept(deadline) if self._listener else self._connect(deadline)
        except socket.timeout:  # noqa: UP041 -- not TimeoutError before python 3.10
            raise PeerError(f"{self.role}: no connection in time ({self._target})") from None
        except OSError as e:
            raise PeerError(f"{self.role} {self._target}: {e.strerror or e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._ends = [_address(self._sock.getsockname()), _address(self._sock.getpeername())]

    def _connect(self, deadline: float) -> socket.socket:
        sock = socket.socket(_family(self._target[0]), socket.SOCK_STREAM)
        try:
            sock.settimeout(_left(deadline))
            if self._src:
                sock.bind((self._src, 0))
            sock.connect(self._target)
        except OSError:
            sock.close()
            raise
        return sock

    def _accept(self, deadline: float) -> socket.socket:
        assert self._listener is not None
        self._listener.settimeout(_left(deadline))
        sock, _ = self._listener.accept()
        self._listener.close()
        self._listener = None
        return sock

    def encode(self, fields: Fields) -> tuple[bytes, Entry]:
        """The bytes of one frame (``fields["frame"]`` and its overrides, over the state's
        defaults) and its record entry (stamped when written)."""
        kind = fields.get("frame")
        if kind in CLOSES:
            return b"", {"dir": "tx", "frame": kind}
        if kind in mpa.KEYS:
            base = mpa.reply_defaults(self.request) if kind == "mpa_reply" and self.request else {}
            data = mpa.encode(kind, {**base, **fields})
            got = mpa.decode(kind, data)
            setattr(self, "request" if kind == "mpa_request" else "reply", got)
        elif kind == "fpdu":
            data, got = self._fpdu(fields)
        else:
            raise FrameError(f"frame: {kind!r} is none of mpa_request, mpa_reply, fpdu, fin, rst")
        return data, {"dir": "tx", "frame": kind, "fields": got, "raw": raw(data)}

    def _fpdu(self, fields: Fields) -> tuple[bytes, Fields]:
        if fields.get("opcode") == "read_response" and self.read_request:
            rr = self.read_request
            # Answer the last READ request: its sink, and as many bytes as it asked for.
            pattern = bytes(i & 0xFF for i in range(rr.get("size", 0))).hex()
            fields = {
                "stag": rr.get("sink_stag"),
                "to": rr.get("sink_to"),
                "payload": pattern,
                **fields,
            }
        qn = fields.get("qn", rdmap.queue(str(fields.get("opcode", "send"))))
        msn = self._msn.get(qn, 1) if isinstance(qn, int) else 1
        data = fpdu.encode(fields, self.crc_on, msn)
        got = fpdu.decode(data, self.crc_on)
        if got.get("t") == 0 and got.get("l") == 1:
            # RFC 5041 4.3: a queue's first MSN is 1, one more for each message.
            self._msn[got["qn"]] = got["msn"] + 1 & 0xFFFFFFFF
        return data, got

    def write(self, data: bytes, segments: list[int], deadline: float, gap: float = 0.0) -> None:
        """Send ``data``: a write per ``segments`` size, the rest in one more, ``gap``
        seconds between writes (never past ``deadline``)."""
        if self._sock is None:
            raise PeerError("write before the connection")
        pieces: list[bytes] = []
        pos = 0
        for n in segments:
            pieces.append(data[pos : pos + n])
            pos += n
        if pos < len(data):
            pieces.append(data[pos:])
        try:
            for i, piece in enumerate(pieces):
                if i and gap:
                    time.sleep(max(0.0, min(gap, deadline - time.monotonic())))
                self._sock.settimeout(_left(deadline))
                self._sock.sendall(piece)
        except OSError as e:
            raise PeerError(f"write: {e.strerror or e}") from None

    def close_tx(self, how: str) -> None:
        """Close our end: ``fin`` (shutdown for writing) or ``rst`` (an abort)."""
        if self._sock is None:
            return
        if how == "rst":
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close()
        else:
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # already reset by the DUT: the record says so

    def stamp(self, entry: Entry) -> Entry:
        """Add ``entry`` to the record, stamped now."""
        entry = {"t_ns": time.monotonic_ns(), **entry}
        self.record.append(entry)
        return entry

    def read(self, deadline: float) -> Entry | None:
        """The next frame or close the DUT sends, recorded; None at ``deadline``."""
        if self._sock is None:
            return None
        if self.closed:
            return self._tell_close()
        kind = self._next_kind()
        need = mpa.HEADER if kind != "fpdu" else fpdu.LENGTH
        if not self._fill(need, deadline):
            return self._cut(kind)
        need = self._size(kind)
        if not self._fill(need, deadline):
            return self._cut(kind)
        data, self._buf = self._buf[:need], self._buf[need:]
        return self.stamp(self._decoded(kind, data))

    def _next_kind(self) -> str:
        if self.role == "passive" and self.request is None:
            return "mpa_request"
        if self.role == "active" and self.reply is None:
            return "mpa_reply"
        return "fpdu"

    def _size(self, kind: str) -> int:
        if kind == "fpdu":
            (length,) = struct.unpack_from("!H", self._buf)
            return fpdu.size(length)
        return mpa.HEADER + mpa.pd_length(self._buf)

    def _decoded(self, kind: str, data: bytes) -> Entry:
        if kind == "fpdu":
            got = fpdu.decode(data, self.crc_on)
            if got.get("opcode") == "read_request":
                self.read_request = got
        else:
            got = mpa.decode(kind, data)
            setattr(self, "request" if kind == "mpa_request" else "reply", got)
        return {"dir": "rx", "frame": kind, "fields": got, "raw": raw(data)}

    def _cut(self, kind: str) -> Entry | None:
        """After a read that ended short: the partial frame the DUT closed in (its close
        comes with the next read), else the close; None when the deadline came first."""
        if not self.closed:
            return None
        if not self._buf:
            return self._tell_close()
        data, self._buf = self._buf, b""
        partial = self._decoded(kind, data)
        why = partial["fields"].get("error", f"{len(data)} bytes")
        partial["fields"]["error"] = f"cut short by the close: {why}"
        return self.stamp(partial)

    def _tell_close(self) -> Entry | None:
        """The DUT's close, recorded once (None after)."""
        if self._close_told:
            return None
        self._close_told = True
        return self.stamp({"dir": "rx", "frame": self.closed})

    def _fill(self, n: int, deadline: float) -> bool:
        """Read until ``n`` bytes are buffered; False at the deadline or a close."""
        assert self._sock is not None
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:  # noqa: UP041 -- not TimeoutError before python 3.10
                return False
            except ConnectionResetError:
                self.closed = "rst"
                return False
            if not chunk:
                self.closed = "fin"
                return False
            self._buf += chunk
        return True

    def close(self) -> None:
        """Close the socket(s); the record stays."""
        for sock in (self._sock, self._listener):
            if sock is not None:
                sock.close()
        self._sock = self._listener = None


def _listening(address: str, port: int) -> socket.socket:
    sock = socket.socket(_family(address), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(1)
    except OSError as e:
        sock.close()
        raise PeerError(f"listen on {address}:{port}: {e.strerror or e}") from None
    return sock


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _address(name: Any) -> str:
    host, port = name[0], name[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("deadline passed")  # noqa: UP041 -- python 3.9: not TimeoutError
    return left
