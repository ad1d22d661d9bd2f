"""A vendor's capture tool as a capture point: the inventory's ``start``, ``stop`` and
``fetch`` templates, run over SSH on the point's controller host.

``{id}`` names the capture (``hil-`` and 12 hex digits, the same in all three
commands), ``{link}`` the link, and ``fetch`` writes the capture to
``{pcap}``, a temporary file on the controller that is copied over SFTP and
removed.  ``start`` returning 0 is the tool's word that it captures.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Literal

import paramiko

from hil import tools
from hil.errors import HilError, SSHError
from hil.inventory import templates
from hil.ssh import SSHSession
from hil.wire.capture import Fetched
from hil.wire.plan import CommandPoint

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
FETCH_TIMEOUT = 120.0  # a tool may export a large capture


class CommandCapture:
    """A capture a vendor tool is taking, started by the point's ``start`` template."""

    def __init__(self, session: SSHSession, point: CommandPoint, capture_id: str) -> None:
        self.session = session
        self.point = point
        self.id = capture_id
        self.remote = f"/tmp/{capture_id}.pcap"
        self._stopped = False

    @classmethod
    def start(cls, session: SSHSession, point: CommandPoint) -> CommandCapture:
        """Run ``start`` and return once it succeeded; on failure its ``stop`` is run too
        (the tool may have started before it failed), and the error raised."""
        cap = cls(session, point, f"hil-{uuid.uuid4().hex[:12]}")
        try:
            session.run(cap._argv("start"), timeout=START_TIMEOUT, check=True)
        except HilError:
            cap.discard()
            raise
        log.info("%s: capture %s of link %s started", session.name, cap.id, point.link)
        return cap

    def _argv(self, which: Literal["start", "stop", "fetch"]) -> list[str]:
        spec = self.point.spec
        fields = {**dict(spec.vars), "id": self.id, "link": self.point.link}
        if which == "fetch":
            fields["pcap"] = self.remote
        argv = {"start": spec.start, "stop": spec.stop, "fetch": spec.fetch}[which]
        return templates.fill(argv, fields, f"link {self.point.link}: capture {which} template")

    def stop(self, local: Path) -> Fetched:
        """Run ``stop`` and ``fetch``, copy the capture to ``local``, remove it on the host."""
        try:
            self.session.run(self._argv("stop"), timeout=STOP_TIMEOUT, check=True)
            self.session.run(self._argv("fetch"), timeout=FETCH_TIMEOUT, check=True)
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.session.sftp().get(self.remote, str(local))
            except (OSError, paramiko.SSHException, EOFError) as e:
                raise SSHError(
                    self.session.name,
                    f"cannot fetch capture {self.id} from {self.remote}: {e}; "
                    "does the link's fetch template write the capture to {pcap}?",
                ) from None
        finally:
            self._remove()
        return Fetched(local)

    def cut(self, local: Path, count: int) -> Fetched:
        """A tool's capture cannot be cut while it runs: it is stopped and fetched to
        ``local`` (no longer :attr:`reusable`: the next window starts it again)."""
        del count  # the tool keeps its own bound
        self._stopped = True
        return self.stop(local)

    @property
    def reusable(self) -> bool:
        """Not stopped (a cut stops it), over a connection that is still up."""
        return not self._stopped and self.session.is_alive()

    def discard(self) -> None:
        """Run ``stop`` without fetching (unless a cut stopped it); never raises."""
        if self._stopped:
            return
        try:
            self.session.run(self._argv("stop"), timeout=STOP_TIMEOUT, check=True)
        except HilError as e:
            log.warning("%s: stopping capture %s failed: %s", self.session.name, self.id, e)
        self._remove()

    def _remove(self) -> None:
        try:
            self.session.run(
                tools.argv("rm", "-f", "--", self.remote), timeout=STOP_TIMEOUT, check=False
            )
        except HilError as e:
            log.warning("%s: could not remove %s: %s", self.session.name, self.remote, e)
