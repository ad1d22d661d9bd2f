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


def terminate_fpdu(layer_etype: int, code: int) -> bytes:
    """One FPDU: an untagged DDP segment (QN 2, MSN 1) carrying an RDMAP TERMINATE."""
    ddp = bytes([0x41, 0x47]) + bytes(4) + struct.pack(">III", 2, 1, 0)
    ulpdu = ddp + bytes([layer_etype, code, 0, 0])
    return struct.pack(">H", len(ulpdu)) + ulpdu + bytes(4)  # CRC field (zero: not checked)


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


def _receive(sock: socket.socket, size: int) -> None:
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(got)} of {size} bytes")
        got += chunk
    if size == 0 and sock.recv(1) != b"":
        raise ConnectionError("expected the peer's FIN, got data")
