"""Packet capture of a data link with tcpdump on a lab host, fetched over SFTP.

The agent's ``run`` waits for its command, so a capture runs on its own SSH
exec channel instead (``SSHSession.open_process``); stopping it signals
tcpdump's process group with INT, which makes tcpdump flush and exit.

    cap = Capture.start(session, "data0")
    ...                                   # the test
    path = cap.stop(Path("out/lab-a.pcap"))
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import paramiko

from hil import tools
from hil.errors import CommandTimeout, HilError, SSHError
from hil.ssh import SSHSession
from hil.ssh.channel import RemoteProcess

log = logging.getLogger(__name__)

SNAPLEN = 512  # headers of TCP, MPA, DDP and RDMAP fit; payload is not needed to debug CM
READY_TIMEOUT = 10.0  # tcpdump creates its file once the capture is live
STOP_TIMEOUT = 10.0
_POLL = 0.1


class Capture:
    """A running tcpdump on one host's netdev, writing to a remote temporary file."""

    def __init__(
        self, session: SSHSession, netdev: str, remote: str, process: RemoteProcess
    ) -> None:
        self.session = session
        self.netdev = netdev
        self.remote = remote
        self.process = process

    @classmethod
    def start(cls, session: SSHSession, netdev: str, snaplen: int = SNAPLEN) -> Capture:
        """Start tcpdump on ``netdev`` and return once it captures.

        ``CommandTimeout`` naming the host when tcpdump does not start
        within READY_TIMEOUT seconds (it is stopped again).
        """
        remote = f"/tmp/hil-{uuid.uuid4().hex[:12]}.pcap"
        # -U and --immediate-mode: each packet is on disk at once (otherwise what sits in the
        # kernel ring when tcpdump is stopped is lost, and a killed run keeps nothing).
        # -Z root: Debian's tcpdump otherwise drops to a user that cannot write /tmp files.
        # -p: the host's own traffic is all we want; promiscuous mode would log to the
        # kernel log, which the after-test checks read.
        argv = tools.argv(
            "tcpdump",
            "-i",
            netdev,
            "-n",
            "-p",
            "-U",
            "--immediate-mode",
            "-s",
            str(snaplen),
            "-Z",
            "root",
            "-w",
            remote,
        )
        process = session.open_process(argv, sudo=True)
        cap = cls(session, netdev, remote, process)
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
                err = self.process.stderr.read().decode(errors="replace").strip()
                raise SSHError(
                    self.session.name,
                    f"tcpdump on {self.netdev} exited {status}: {err[-300:]}; "
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

    def _end(self) -> None:
        """Signal tcpdump to flush and exit, and wait for it (bounded)."""
        self.session.run(
            tools.argv("kill", "-s", "INT", "--", f"-{self.process.pgid}"),
            timeout=STOP_TIMEOUT,
            check=False,
            sudo=True,
        )
        try:
            self.process.wait(STOP_TIMEOUT)
        finally:
            self.process.close(timeout=0.5)

    def stop(self, local: Path) -> Path:
        """Stop the capture, fetch it to ``local`` and remove the remote file."""
        try:
            self._end()
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.session.sftp().get(self.remote, str(local))
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise SSHError(
                    self.session.name, f"cannot fetch the capture {self.remote}: {e}"
                ) from None
        finally:
            self._remove()
        return local

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
