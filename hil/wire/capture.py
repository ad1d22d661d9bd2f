"""tcpdump on a lab host's netdev, bounded in size, fetched over SFTP.

The agent's ``run`` waits for its command, so a capture runs on its own SSH
exec channel instead (``SSHSession.open_process``), under a small shell
wrapper (``_WRAPPER``) that saves SSH round trips, each a fresh sshd exec
(and sudo) that costs a slow guest ~0.2 s: tcpdump's "listening on" line
(written once its socket is bound and its file open) says it captures; its
exit status comes on stdout when it ends; a line on the wrapper's stdin
stops it (TERM: it flushes and exits), and closing stdin removes the file.
Closing stdin is also what a lost controller or connection does, so a
capture never outlives its channel.

    cap = Capture.start(session, "data0")
    ...                                   # a test
    window = cap.cut(Path("out/t1.pcap"), count=20000)   # tcpdump goes on
    ...                                   # the next test
    fetched = cap.stop(Path("out/t2.pcap"))   # .path, and .notes

A cut (:meth:`Capture.cut`) hands over the packets since the last one as a
pcap of their own (:mod:`hil.wire.pcapwindow`), read over SFTP once the file
kept still, so that one tcpdump serves a whole pair run.

A capture keeps the first ``count`` packets (tcpdump ``-c``) of ``snaplen``
bytes each: the first, because the dissector decodes FPDUs only after it
has seen the MPA exchange, so the handshake must always be in the file.
When the bound is hit, or the kernel dropped packets, the fetched capture
says so in its notes.
"""

from __future__ import annotations

import logging
import re
import select
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hil import tools
from hil.errors import CommandTimeout, HilError, SSHError
from hil.ssh import SSHSession
from hil.ssh.channel import RemoteProcess
from hil.wire import pcapwindow

log = logging.getLogger(__name__)

SNAPLEN = 512  # headers of TCP, MPA, DDP and RDMAP fit; payload is not needed to judge CM
# Packets kept per capture: at SNAPLEN, at most ~10 MB. A CM test sends a few
# hundred; a test under traffic fills it, and its end is cut (noted).
COUNT = 20_000
READY_TIMEOUT = 10.0  # tcpdump says "listening on" once the capture is live
STOP_TIMEOUT = 10.0
_POLL = 0.02
_READY = b"listening on "
_STAT = re.compile(r"^(\d+) packets? (captured|dropped by kernel)$", re.MULTILINE)
# sh -c _WRAPPER hil-capture FILE TCPDUMP-ARGV...: runs tcpdump and prints its exit
# status when it ends; a reader of stdin stops it (TERM) at the first line or EOF, and
# removes FILE at the next (the wrapper exits with rm's status).  The reader gets stdin
# as fd 3: an asynchronous list's own stdin is /dev/null.  Hangup and broken pipe are
# ignored so that a lost connection still gets to the removal.  Before the TERM it waits
# until FILE stops growing (DRAIN_STEPS polls of DRAIN_S): tcpdump leaves what it has not
# yet read from its socket when TERM comes, and on a loaded host that was the last packet
# of the test (a close's last ACK), which the wire rules then miss.
DRAIN_S = 0.2
DRAIN_STEPS = 10
# A cut (a capture that goes on) polls the file's size over SFTP, which costs no
# process on the host; the size kept still for CUT_QUIET says tcpdump has caught up.
CUT_QUIET = 0.1
# A capture that is cut goes on for the next test, until its file holds ROLL_BYTES
# (a host's /tmp may be its RAM); a new one starts at the next test then.
ROLL_BYTES = 32 << 20
_CUT_POLL = 0.03
_WRAPPER = (
    "trap '' HUP PIPE; f=$1; shift; exec 3<&0; \"$@\" & pid=$!; "
    "{ read -r _ <&3; n=0; s=-1; "
    f'while [ $n -lt {DRAIN_STEPS} ] && z=$(stat -c %s -- "$f" 2>/dev/null) '
    f'&& [ "$z" != "$s" ]; do s=$z; n=$((n+1)); sleep {DRAIN_S:g}; done; '
    'kill -TERM "$pid" 2>/dev/null; read -r _ <&3; rm -f -- "$f"; } & '
    'reader=$!; wait "$pid"; echo "$?"; wait "$reader"'
)


@dataclass(frozen=True)
class Fetched:
    """A capture file on the controller, and what to know about it."""

    path: Path
    notes: tuple[str, ...] = ()


class Capture:
    """A running tcpdump on one host's netdev, writing to a remote temporary file."""

    def __init__(
        self, session: SSHSession, netdev: str, remote: str, process: RemoteProcess, count: int
    ) -> None:
        self.session = session
        self.netdev = netdev
        self.remote = remote
        self.process = process
        self.count = count
        self._err = bytearray()  # tcpdump's stderr so far
        self._header = b""  # the file's global header, once a cut read it
        self._at = pcapwindow.HEADER  # where the next cut's records start
        self.status: int | None = None  # tcpdump's exit status, once it ended by itself

    @classmethod
    def start(
        cls,
        session: SSHSession,
        netdev: str,
        *,
        snaplen: int = SNAPLEN,
        count: int = COUNT,
        promiscuous: bool = False,
    ) -> Capture:
        """Start tcpdump on ``netdev`` and return once it captures.

        ``promiscuous`` for a capture host on a mirror port or tap, which
        sees frames addressed to others.  ``CommandTimeout`` naming the host
        when tcpdump does not start within READY_TIMEOUT seconds (it is
        stopped again).
        """
        remote = f"/tmp/hil-{uuid.uuid4().hex[:12]}.pcap"
        # -U and --immediate-mode: each packet is on disk at once (otherwise what sits in the
        # kernel ring when tcpdump is stopped is lost, and a killed run keeps nothing).
        # -Z root: Debian's tcpdump otherwise drops to a user that cannot write /tmp files.
        # -p: a pair host's own traffic is all we want; promiscuous mode would log to the
        # kernel log, which the after-test checks read.
        tcpdump = tools.argv(
            "tcpdump",
            "-i",
            netdev,
            "-n",
            *([] if promiscuous else ["-p"]),
            "-U",
            "--immediate-mode",
            "-s",
            str(snaplen),
            "-c",
            str(count),
            "-Z",
            "root",
            "-w",
            remote,
        )
        argv = tools.argv("sh", "-c", _WRAPPER, "hil-capture", remote, *tcpdump)
        process = session.open_process(argv, sudo=True)
        cap = cls(session, netdev, remote, process, count)
        try:
            cap._wait_ready()
        except HilError:
            cap.discard()
            raise
        log.info("%s: capturing %s into %s", session.name, netdev, remote)
        return cap

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        chan = self.process.channel
        while _READY not in self._read_stderr():
            if chan.recv_ready() or chan.eof_received:  # the wrapper's word that it ended
                raise SSHError(
                    self.session.name,
                    f"tcpdump on {self.netdev} exited: {self._stderr()[-300:]}; "
                    "is tcpdump installed and the netdev right?",
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommandTimeout(
                    self.session.name,
                    f"tcpdump on {self.netdev} did not start capturing within "
                    f"{READY_TIMEOUT:g}s; check the host's load and tcpdump",
                )
            select.select([chan], [], [], min(remaining, _POLL))

    def _read_stderr(self) -> bytes:
        """tcpdump's stderr so far (never waits for more)."""
        chan = self.process.channel
        while chan.recv_stderr_ready():
            self._err += chan.recv_stderr(65536)
        return bytes(self._err)

    def _stderr(self) -> str:
        return self._read_stderr().decode(errors="replace").strip()

    def _end(self) -> int:
        """Stop tcpdump (unless its bound ended it already); its exit status (bounded wait)."""
        self.process.write(b"stop\n")
        line = self.process.readline(STOP_TIMEOUT).strip()
        if not line.isdigit():
            raise SSHError(
                self.session.name,
                f"tcpdump on {self.netdev} ended without a status: {self._stderr()[-300:]}",
            )
        return int(line)

    def _notes(self, status: int, err: str) -> list[str]:
        where = f"{self.session.name} {self.netdev}"
        stats = {kind: int(n) for n, kind in _STAT.findall(err)}
        notes = []
        if stats.get("captured", 0) >= self.count:
            notes.append(
                f"{where}: the capture stopped at its bound of {self.count} packets; "
                "what came later is not in it"
            )
        elif status != 0:  # tcpdump exits 0 on our TERM and at its bound
            notes.append(f"{where}: tcpdump exited {status}: {err[-300:]}")
        if stats.get("dropped by kernel", 0):
            notes.append(
                f"{where}: the kernel dropped {stats['dropped by kernel']} packets "
                "before tcpdump saw them"
            )
        return notes

    def stop(self, local: Path) -> Fetched:
        """Stop the capture, fetch it to ``local`` and remove the remote file."""
        try:
            status = self._end()
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.session.sftp().get(self.remote, str(local))
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise SSHError(
                    self.session.name, f"cannot fetch the capture {self.remote}: {e}"
                ) from None
        finally:
            self._remove()
        # After the wrapper ended: tcpdump's statistics have all arrived by then.
        return Fetched(local, tuple(self._notes(status, self._stderr())))

    @property
    def reusable(self) -> bool:
        """Another cut can follow: tcpdump still captures, over a connection that is still
        up, into a file under ROLL_BYTES (a larger one is started anew)."""
        chan = self.process.channel
        return (
            self.status is None
            and self._at < ROLL_BYTES
            and self.session.is_alive()
            and not (chan.closed or chan.eof_received or chan.recv_ready())
        )

    def cut(self, local: Path, count: int) -> Fetched:
        """The packets since the last cut (the first ``count``) written to ``local`` as a
        pcap of their own; tcpdump goes on.  Waits first until the file stops growing
        (tcpdump has written what its socket held).  SSHError when it cannot be read."""
        try:
            size = self._settled_size()
            with self.session.sftp().open(self.remote, "rb") as f:
                if not self._header:
                    self._header = f.read(pcapwindow.HEADER)
                f.seek(self._at)
                data = f.read(max(size - self._at, 0))
            order = pcapwindow.byte_order(self._header)
        except (OSError, paramiko.SSHException, EOFError, HilError) as e:
            raise SSHError(
                self.session.name, f"cannot read the capture {self.remote}: {e}"
            ) from None
        found = pcapwindow.records(data, order, count)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(self._header + data[: found.kept])
        self._at += found.complete
        notes = self._ended_notes()
        if found.packets > count:
            notes.append(
                f"{self.session.name} {self.netdev}: the test sent {found.packets} packets; "
                f"the first {count} are kept, what came later is not in the capture"
            )
        return Fetched(local, tuple(notes))

    def _settled_size(self) -> int:
        """The file's size once it kept still for CUT_QUIET (at most DRAIN_S * DRAIN_STEPS)."""
        sftp = self.session.sftp()
        size = sftp.stat(self.remote).st_size or 0
        start = still = time.monotonic()
        while (
            time.monotonic() - still < CUT_QUIET
            and time.monotonic() - start < DRAIN_S * DRAIN_STEPS
        ):
            time.sleep(_CUT_POLL)
            now = sftp.stat(self.remote).st_size or 0
            if now != size:
                size, still = now, time.monotonic()
        return size

    def _ended_notes(self) -> list[str]:
        """Once tcpdump ended by itself (its packet bound, an error): why, as notes."""
        if self.status is not None or not self.process.channel.recv_ready():
            return []
        line = self.process.readline(STOP_TIMEOUT).strip()
        self.status = int(line) if line.isdigit() else -1
        err = self._stderr()
        notes = self._notes(self.status, err)
        if self.status != 0 and not notes:
            notes.append(f"{self.session.name} {self.netdev}: tcpdump ended: {err[-300:]}")
        return notes

    def discard(self) -> None:
        """Stop the capture and remove its file without fetching it; never raises."""
        self._remove()

    def _remove(self) -> None:
        """Close the wrapper's stdin (it stops tcpdump if still running and removes the
        file); when it does not say it did, signal its group and remove the file."""
        try:
            if self.process.close(timeout=STOP_TIMEOUT) == 0:
                return
            self.session.run(
                tools.argv("rm", "-f", "--", self.remote),
                timeout=STOP_TIMEOUT,
                check=False,
                sudo=True,
            )
        except HilError as e:
            log.warning("%s: could not remove %s: %s", self.session.name, self.remote, e)
