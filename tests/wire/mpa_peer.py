"""Both ends of a tiny MPA exchange over loopback: traffic for tshark to judge.

Just enough of the wire format (RFC 5044 request/reply frames, one FPDU
holding an RDMAP TERMINATE, RFC 5040/5041) to give the decoder's tests
connections siw does not make on demand: revision 1 with CRC and private
data, an enhanced reply whose IRD/ORD words carry control bits, a
TERMINATE, a reject.  The bytes are written here; what they mean is
tshark's word, which the tests read through hil.wire.decode.
"""

from __future__ import annotations

import socket
import struct

KEY_REQ = b"MPA ID Req Frame"
KEY_REP = b"MPA ID Rep Frame"
MARKER, CRC, REJECT, ENHANCED = 0x80, 0x40, 0x20, 0x10
TIMEOUT = 10.0


def frame(key: bytes, flags: int, rev: int, pdata: bytes) -> bytes:
    """An MPA request or reply frame."""
    return key + bytes([flags, rev]) + struct.pack(">H", len(pdata)) + pdata


def untagged_fpdu(opcode: int, queue: int, payload: bytes) -> bytes:
    """One FPDU: a last, untagged DDP segment (MSN 1, MO 0) of RDMAP ``opcode``."""
    # DDP control: last flag, version 1; RDMAP control: version 1 and the opcode.
    ddp = bytes([0x41, 0x40 | opcode]) + bytes(4) + struct.pack(">III", queue, 1, 0)
    ulpdu = ddp + payload
    pad = bytes(-(2 + len(ulpdu)) % 4)
    return struct.pack(">H", len(ulpdu)) + ulpdu + pad + bytes(4)  # CRC field (zero: not checked)


def send_fpdu(message: bytes) -> bytes:
    """An RDMAP Send (opcode 3) of ``message`` on the send queue (QN 0)."""
    return untagged_fpdu(3, 0, message)


def terminate_fpdu(layer_etype: int, code: int) -> bytes:
    """An RDMAP TERMINATE (opcode 7, QN 2): layer and error type in one byte, then the code."""
    return untagged_fpdu(7, 2, bytes([layer_etype, code, 0, 0]))


def exchange(host: str, port: int, request: bytes, reply: bytes, fpdu: bytes = b"") -> None:
    """Connect, send ``request``, answer ``reply``, then ``fpdu``; both sides close (FIN)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as srv:
        srv.bind((host, port))
        srv.listen()
        with socket.create_connection((host, port), timeout=TIMEOUT) as cli:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(TIMEOUT)
                cli.sendall(request)
                _receive(conn, len(request))
                conn.sendall(reply)
                _receive(cli, len(reply))
                if fpdu:
                    cli.sendall(fpdu)
                    _receive(conn, len(fpdu))
                cli.shutdown(socket.SHUT_WR)
                _receive(conn, 0)  # the FIN
            # conn closed: its FIN; cli closes last


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``sock``; ConnectionError when the peer closes first."""
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(got)} of {size} bytes")
        got += chunk
    return got


def _receive(sock: socket.socket, size: int) -> None:
    recv_exactly(sock, size)
    if size == 0 and sock.recv(1) != b"":
        raise ConnectionError("expected the peer's FIN, got data")
