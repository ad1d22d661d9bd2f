"""tcpdump on a lab host's netdev, bounded in size, fetched over SFTP.

The agent's ``run`` waits for its command, so a capture runs on its own SSH
exec channel instead (``SSHSession.open_process``); stopping it signals
tcpdump's process group with INT, which makes tcpdump flush and exit.

    cap = Capture.start(session, "data0")
    ...                                   # the test
    fetched = cap.stop(Path("out/lab-a.pcap"))   # .path, and .notes

A capture keeps the first ``count`` packets (tcpdump ``-c``) of ``snaplen``
bytes each: the first, because the dissector decodes FPDUs only after it
has seen the MPA exchange, so the handshake must always be in the file.
When the bound is hit, or the kernel dropped packets, the fetched capture
says so in its notes.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import paramiko

from hil import tools
from hil.errors import CommandTimeout, HilError, SSHError
from hil.ssh import SSHSession
from hil.ssh.channel import RemoteProcess

log = logging.getLogger(__name__)

SNAPLEN = 512  # headers of TCP, MPA, DDP and RDMAP fit; payload is not needed to judge CM
# Packets kept per capture: at SNAPLEN, at most ~10 MB. A CM test sends a few
# hundred; a test under traffic fills it, and its end is cut (noted).
COUNT = 20_000
READY_TIMEOUT = 10.0  # tcpdump creates its file once the capture is live
STOP_TIMEOUT = 10.0
_POLL = 0.1
_STAT = re.compile(r"^(\d+) packets? (captured|dropped by kernel)$", re.MULTILINE)


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
        argv = tools.argv(
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
        sftp = self.session.sftp()
        while True:
            status = self.process.poll()
            if status is not None:
                raise SSHError(
                    self.session.name,
                    f"tcpdump on {self.netdev} exited {status}: {self._stderr()[-300:]}; "
                    f"is tcpdump installed and the netdev right?",
                )
            try:
                sftp.stat(self.remote)
                return
            except FileNotFoundError:
                pass
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise SSHError(self.session.name, f"cannot stat {self.remote}: {e}") from None
            if time.monotonic() >= deadline:
                raise CommandTimeout(
                    self.session.name,
                    f"tcpdump on {self.netdev} did not start capturing within "
                    f"{READY_TIMEOUT:g}s; check the host's load and tcpdump",
                )
            time.sleep(_POLL)

    def _stderr(self) -> str:
        """What tcpdump wrote to stderr so far (never waits for more)."""
        chan = self.process.channel
        err = bytearray()
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        return err.decode(errors="replace").strip()

    def _end(self) -> list[str]:
        """Signal tcpdump to flush and exit (unless its bound ended it already), wait for it
        (bounded); notes on how it ended."""
        self.session.run(
            tools.argv("kill", "-s", "INT", "--", f"-{self.process.pgid}"),
            timeout=STOP_TIMEOUT,
            check=False,
            sudo=True,
        )
        try:
            status = self.process.wait(STOP_TIMEOUT)
            err = self._stderr()
        finally:
            self.process.close(timeout=0.5)
        return self._notes(status, err)

    def _notes(self, status: int, err: str) -> list[str]:
        where = f"{self.session.name} {self.netdev}"
        stats = {kind: int(n) for n, kind in _STAT.findall(err)}
        notes = []
        if stats.get("captured", 0) >= self.count:
            notes.append(
                f"{where}: the capture stopped at its bound of {self.count} packets; "
                "what came later is not in it"
            )
        elif status != 0:  # tcpdump exits 0 on our INT and at its bound
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
            notes = self._end()
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.session.sftp().get(self.remote, str(local))
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise SSHError(
                    self.session.name, f"cannot fetch the capture {self.remote}: {e}"
                ) from None
        finally:
            self._remove()
        return Fetched(local, tuple(notes))

    def discard(self) -> None:
        """Stop the capture and remove its file without fetching it; never raises."""
        try:
            self._end()
        except HilError as e:
            log.warning("%s: stopping tcpdump failed: %s", self.session.name, e)
        self._remove()

    def _remove(self) -> None:
        try:
            self.session.run(
                tools.argv("rm", "-f", "--", self.remote),
                timeout=STOP_TIMEOUT,
                check=False,
                sudo=True,
            )
        except HilError as e:
            log.warning("%s: could not remove %s: %s", self.session.name, self.remote, e)
