"""Make the wire rules' test captures: real packets from a small MPA peer, recorded by tcpdump.

    sudo .venv/bin/python tests/wire/make_captures.py [--out DIR] [NAME ...]

(default DIR tests/data/wire, default every capture).  Each capture is one
TCP connection from 127.0.0.1 to 127.0.0.2:7174, made with plain sockets
and mpa_peer.py's frames, in a private network namespace (``unshare
--net``: nothing else is on its loopback, and the drop rules of
``no-listener-silent`` and ``pull-carrier-retransmits`` stay in it).  tcpdump (``-i lo -n -U
--immediate-mode -s 512 -w FILE tcp``, and the end mark) is started and seen listening
before the first SYN and stopped with SIGINT once it wrote the last packet (a datagram
sent last, :data:`MARK`, taken out of the file after); a side
told to ``hold`` closes only after that, so the capture ends with the
connection open.  A link pull also writes NAME.clock.json: this host's
(CLOCK_REALTIME, CLOCK_MONOTONIC) read before tcpdump started and after it
stopped, and the CLOCK_MONOTONIC times of the connect, the pull and the
restore, so a test can place the packets on a timeline of those times.
tests/data/wire/README.md says what each capture shows.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mpa_peer import (
    CRC,
    ENHANCED,
    KEY_REP,
    KEY_REQ,
    MARKER,
    REJECT,
    frame,
    recv_exactly,
    send_fpdu,
)

from hil import tools
from hil.wire import pcapwindow

ACTIVE = "127.0.0.1"
PASSIVE = "127.0.0.2"
PORT = 7174
# What the tests' timelines say the application gave (hil's sequences' defaults).
CONNECT_PDATA = b"hil"
ACCEPT_PDATA = b"hil-accept"
REJECT_PDATA = b"no thanks"
WRONG_REJECT_PDATA = b"go away"
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "wire"
TIMEOUT_S = 10.0
IRD_ORD = struct.pack("!HH", 1, 1)  # what siw sends: IRD = ORD = 1, no control bits
# How a side leaves the connection: FIN and close after the peer's FIN, RST, only a FIN
# (the socket stays open), or nothing.
Ending = Literal["fin", "rst", "shut", "hold"]
SILENT_CONNECT_S = 1.5  # long enough for one SYN retransmission (the first RTO is 1 s)
# A pull under traffic: the writer sends one 1 KiB FPDU every 10 ms, for a while before
# the pull and through it; 2 s pulled hold three retransmissions (the RTO starts at
# 200 ms and doubles), and the writer aborts at the restore, before the fourth.
WRITE = send_fpdu(bytes(1000))
WRITE_EVERY_S = 0.01
BEFORE_PULL_S = 0.3
PULLED_S = 2.0
TCP_INFO_TOTAL_RETRANS = 100  # offset of tcpi_total_retrans in Linux's struct tcp_info
_NFT_DROP = f"""
table inet hil_wire_capture {{
    chain input {{
        type filter hook input priority 0; policy accept;
        ip daddr {PASSIVE} tcp dport {PORT} drop
    }}
}}
"""


def _reply(pdata: bytes, flags: int = ENHANCED, revision: int = 2) -> bytes:
    """An MPA reply; with H set its private data starts with the IRD/ORD words (siw's
    reject has them too)."""
    return frame(KEY_REP, flags, revision, (IRD_ORD if flags & ENHANCED else b"") + pdata)


REQUEST = frame(KEY_REQ, ENHANCED, 2, IRD_ORD + CONNECT_PDATA)  # as siw sends it


@dataclass(frozen=True)
class Handshake:
    """One MPA handshake: the passive side's answer, then who ends the connection first
    and how; the other side waits for that FIN (unless it holds) and ends as ``then``."""

    answer: bytes
    first: Literal["active", "passive"]
    first_end: Ending
    then: Ending
    request: bytes = REQUEST

    def end_of(self, side: str) -> tuple[bool, Ending]:
        """Whether ``side`` ends first, and how it ends."""
        first = side == self.first
        return first, self.first_end if first else self.then


@dataclass(frozen=True)
class NoListener:
    """A connect to a port with no listener: refused (RST) or, with ``drop``, unanswered."""

    drop: bool


@dataclass(frozen=True)
class Pull:
    """A pull of the passive side's end while the active side writes: with ``drop``, what
    hil's blackhole pull does (an nftables rule dropping the passive side's input), else
    nothing; at the restore the writer aborts (zero linger: RST)."""

    drop: bool


@dataclass(frozen=True)
class Capture:
    """One capture file: its name and the exchange it records."""

    name: str
    exchange: Handshake | NoListener | Pull


CAPTURES = (
    Capture(
        "mpa-bad-flags",
        Handshake(_reply(ACCEPT_PDATA, MARKER | CRC, 1), "active", "fin", "fin"),
    ),
    Capture("mpa-accept-close-fin", Handshake(_reply(ACCEPT_PDATA), "active", "fin", "fin")),
    Capture(
        "reject-wrong-pdata-no-teardown",
        Handshake(_reply(WRONG_REJECT_PDATA, ENHANCED | REJECT), "passive", "hold", "hold"),
    ),
    Capture(
        "reject-fin",
        Handshake(_reply(REJECT_PDATA, ENHANCED | REJECT), "passive", "fin", "fin"),
    ),
    Capture(
        "reject-only-active-closes",
        Handshake(_reply(REJECT_PDATA, ENHANCED | REJECT), "active", "shut", "hold"),
    ),
    Capture("no-listener-silent", NoListener(drop=True)),
    Capture("no-listener-rst", NoListener(drop=False)),
    Capture("close-fin-one-side", Handshake(_reply(ACCEPT_PDATA), "active", "fin", "rst")),
    Capture(
        "mpa-request-no-pdata",
        Handshake(
            _reply(ACCEPT_PDATA), "active", "fin", "fin", frame(KEY_REQ, ENHANCED, 2, IRD_ORD)
        ),
    ),
    Capture("pull-carrier-retransmits", Pull(drop=True)),
    Capture("pull-that-did-not-pull", Pull(drop=False)),
)
NAMES = tuple(c.name for c in CAPTURES)


class CaptureError(Exception):
    """A capture could not be made as described (tcpdump failed, the peer misbehaved)."""


def _run(argv: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise CaptureError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


# A datagram sent to the capture last: once tcpdump has written it, it has written every
# packet before it (after a fixed wait it had not always, on a loaded machine).  It is
# taken out of the file again: a capture holds the exchange's TCP only.
MARK = b"hil-make-captures-end"


def _drop_mark(path: Path) -> None:
    """Take the :data:`MARK` datagram's record out of the pcap ``path``."""
    data = path.read_bytes()
    length = struct.Struct(f"{pcapwindow.byte_order(data)}8xI4x")  # a record's captured length
    kept, at = [data[: pcapwindow.HEADER]], pcapwindow.HEADER
    while at < len(data):
        end = at + pcapwindow.RECORD + length.unpack_from(data, at)[0]
        if MARK not in data[at:end]:
            kept.append(data[at:end])
        at = end
    path.write_bytes(b"".join(kept))


class Tcpdump:
    """tcpdump on the namespace's loopback, writing ``path``; running once constructed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mark = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.mark.bind((ACTIVE, 0))
        argv = tools.argv(
            "tcpdump",
            "-i",
            "lo",
            "-n",
            "-U",
            "--immediate-mode",
            "-s",
            "512",
            "-w",
            str(path),
            f"tcp or udp port {self.mark.getsockname()[1]}",
        )
        self.proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + TIMEOUT_S
        seen = ""
        # tcpdump says "listening on lo" once its socket is bound: only then is it recording.
        while "listening on" not in seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stderr], [], [], max(left, 0))
            line = self.proc.stderr.readline() if ready else ""
            if not line:
                self.proc.kill()
                self.proc.wait(TIMEOUT_S)
                raise CaptureError(f"tcpdump did not start listening: {seen.strip()!r}")
            seen += line

    def stop(self) -> None:
        """SIGINT, as a user's Ctrl-C, once tcpdump has written every packet (:data:`MARK`):
        it flushes the file and exits 0."""
        time.sleep(0.2)  # the last ACK of a close is sent after the socket call returned
        with self.mark:
            self.mark.sendto(MARK, self.mark.getsockname())
        deadline = time.monotonic() + TIMEOUT_S
        while MARK not in self.path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise CaptureError("tcpdump did not write the last packet")
            time.sleep(0.01)
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise CaptureError("tcpdump did not stop on SIGINT") from None
        if self.proc.returncode != 0:
            raise CaptureError(f"tcpdump exited {self.proc.returncode}: {err.strip()}")
        _drop_mark(self.path)


def _receive_frame(sock: socket.socket, key: bytes) -> None:
    """Read one whole MPA frame (key, flags, revision, length, private data)."""
    head = recv_exactly(sock, 20)
    if head[:16] != key:
        raise ConnectionError(f"expected MPA key {key!r}, got {head[:16]!r}")
    recv_exactly(sock, struct.unpack("!H", head[18:])[0])


def _until_eof(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass  # the peer answered our FIN with a RST: that is what the capture is for


def _finish(sock: socket.socket, first: bool, how: Ending) -> None:
    """``fin``: shut down writing (FIN), read to the peer's FIN, close (reading everything
    first: unread data would turn close() into a RST); ``rst``: close with a zero
    linger; ``shut``: only the FIN; ``hold``: nothing.  The side that is not first
    waits for the peer's FIN."""
    if how == "hold":
        return
    if how == "shut":
        sock.shutdown(socket.SHUT_WR)
        return
    if not first:
        _until_eof(sock)
    if how == "rst":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    else:
        sock.shutdown(socket.SHUT_WR)
        _until_eof(sock)
    sock.close()


def _handshake(hs: Handshake, stop: Callable[[], None]) -> None:
    listener = socket.create_server((PASSIVE, PORT))
    listener.settimeout(TIMEOUT_S)
    held: list[socket.socket] = []
    failed: list[BaseException] = []

    def passive() -> None:
        try:
            sock, _ = listener.accept()
            sock.settimeout(TIMEOUT_S)
            held.append(sock)
            _receive_frame(sock, KEY_REQ)
            sock.sendall(hs.answer)
            _finish(sock, *hs.end_of("passive"))
        except (OSError, ConnectionError) as e:
            failed.append(e)

    thread = threading.Thread(target=passive, daemon=True)
    thread.start()
    active = socket.create_connection((PASSIVE, PORT), TIMEOUT_S, (ACTIVE, 0))
    held.append(active)
    active.sendall(hs.request)
    _receive_frame(active, KEY_REP)
    _finish(active, *hs.end_of("active"))
    thread.join(TIMEOUT_S)
    stop()
    for s in [*held, listener]:
        s.close()
    if failed or thread.is_alive():
        raise CaptureError(f"the passive side failed: {failed or 'still running'}")


def _no_listener(nl: NoListener, stop: Callable[[], None]) -> None:
    if nl.drop:
        _run(tools.argv("nft", "-f", "-"), _NFT_DROP)
    try:
        socket.create_connection((PASSIVE, PORT), SILENT_CONNECT_S, (ACTIVE, 0)).close()
        got = "a connection"
    except TimeoutError:
        got = "no answer"
    except ConnectionRefusedError:
        got = "a RST"
    stop()
    if nl.drop:
        _run(tools.argv("nft", "delete", "table", "inet", "hil_wire_capture"))
    want = "no answer" if nl.drop else "a RST"
    if got != want:
        raise CaptureError(f"the SYN got {got}, not {want}")


def _write_until(sock: socket.socket, end_ns: int) -> None:
    while time.monotonic_ns() < end_ns:
        sock.sendall(WRITE)
        time.sleep(WRITE_EVERY_S)


def _retransmitted(sock: socket.socket) -> int:
    """How many segments the kernel retransmitted on ``sock`` (tcpi_total_retrans)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, TCP_INFO_TOTAL_RETRANS)[0])


def _pull(pl: Pull, stop: Callable[[], None]) -> dict[str, int]:
    """The handshake, traffic, the pull and the restore; their CLOCK_MONOTONIC times (ns)."""
    listener = socket.create_server((PASSIVE, PORT))
    listener.settimeout(TIMEOUT_S)
    failed: list[BaseException] = []

    def passive() -> None:
        try:
            sock, _ = listener.accept()
            with sock:
                sock.settimeout(TIMEOUT_S)
                _receive_frame(sock, KEY_REQ)
                sock.sendall(_reply(ACCEPT_PDATA))
                _until_eof(sock)  # reads all the writer sends: it is never the window
        except (OSError, ConnectionError) as e:
            failed.append(e)

    thread = threading.Thread(target=passive, daemon=True)
    thread.start()
    at = {"connect": time.monotonic_ns()}
    active = socket.create_connection((PASSIVE, PORT), TIMEOUT_S, (ACTIVE, 0))
    with active:
        active.sendall(REQUEST)
        _receive_frame(active, KEY_REP)
        at["established"] = time.monotonic_ns()
        _write_until(active, at["established"] + int(BEFORE_PULL_S * 1e9))
        at["pull"] = time.monotonic_ns()
        if pl.drop:
            _run(tools.argv("nft", "-f", "-"), _NFT_DROP)
        _write_until(active, at["pull"] + int(PULLED_S * 1e9))
        at["restore"] = time.monotonic_ns()
        if pl.drop:
            _run(tools.argv("nft", "delete", "table", "inet", "hil_wire_capture"))
        retransmitted = _retransmitted(active)
        active.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    thread.join(TIMEOUT_S)
    stop()
    listener.close()
    if failed or thread.is_alive():
        raise CaptureError(f"the passive side failed: {failed or 'still running'}")
    if bool(retransmitted) != pl.drop:
        raise CaptureError(f"the writer retransmitted {retransmitted} segments (drop {pl.drop})")
    return at


def _clock_sample() -> dict[str, int]:
    # Both clocks read one after the other: the pcap's stamps are CLOCK_REALTIME.
    return {"wall_ns": time.time_ns(), "monotonic_ns": time.monotonic_ns()}


def make(capture: Capture, out: Path) -> Path:
    """Record ``capture`` into ``out``/NAME.pcap (in a network namespace of its own), a
    pull's clock samples and times into NAME.clock.json."""
    path = out / f"{capture.name}.pcap"
    before = _clock_sample()
    dump = Tcpdump(path)
    try:
        if isinstance(capture.exchange, Handshake):
            _handshake(capture.exchange, dump.stop)
        elif isinstance(capture.exchange, NoListener):
            _no_listener(capture.exchange, dump.stop)
        else:
            at = _pull(capture.exchange, dump.stop)
            clock = {
                "host": socket.gethostname(),
                "samples": [before, _clock_sample()],
                "monotonic_ns": at,
            }
            path.with_suffix(".clock.json").write_text(json.dumps(clock, indent=1) + "\n")
    finally:
        dump.mark.close()
        if dump.proc.poll() is None:
            dump.proc.kill()
            dump.proc.wait(TIMEOUT_S)
    return path


def _inside(names: list[str], out: Path) -> int:
    _run(tools.argv("ip", "link", "set", "lo", "up"))
    for c in CAPTURES:
        if c.name in names:
            print(make(c, out))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Make the named captures (all by default); 0 when each was made as described."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(NAMES)}")
    p.add_argument("--out", type=Path, default=DATA, help="where to write NAME.pcap")
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        print(
            f"make_captures: no capture {', '.join(unknown)} (known: {', '.join(NAMES)})",
            file=sys.stderr,
        )
        return 2
    out = args.out.resolve()
    try:
        if args.inside:
            return _inside(names, out)
        if os.geteuid() != 0:
            print("make_captures: needs root (unshare --net, tcpdump, nft)", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
        inner = [sys.executable, __file__, "--inside", "--out", str(out)]
        done = subprocess.run(
            [*tools.argv("unshare", "--net", "--"), *inner, *names],
            cwd=ROOT,
            timeout=TIMEOUT_S * 4 * len(names),
            check=False,
        )
        return done.returncode
    except (CaptureError, OSError, subprocess.TimeoutExpired) as e:
        print(f"make_captures: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
