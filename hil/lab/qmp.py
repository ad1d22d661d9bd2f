"""A small QMP client: QEMU's JSON machine protocol over a unix socket.

Used by the lab (``quit`` on shutdown) and by link pulls of mode
``carrier``: ``set_link(qmp_path, "data0", up=False, timeout=5)`` makes the
guest see NO-CARRIER on the NIC whose QEMU netdev id is ``data0``.

QEMU (7.2) offers no QMP query of a link's state, so there is no
``query_link``: read the state where it matters, in the guest
(``/sys/class/net/DEV/carrier``).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Self

from hil.errors import LabError

DEFAULT_TIMEOUT = 10.0
# QEMU binds its QMP socket and listens a moment later: a connect in between is
# refused although QEMU is fine (seen once in a loaded CI run, 2026-12-06).  A
# refused connect is retried this long before it means "no QEMU".
REFUSED_RETRY = 2.0


class QMPError(LabError):
    """QMP failed: socket unreachable, no answer in time, or an error reply."""


class QMPClient:
    """One QMP session: connect, negotiate capabilities, execute commands.

    Every read is bounded by the deadline given to the call, so a QEMU that
    stops answering raises ``QMPError`` instead of hanging.
    """

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = str(path)
        self._timeout = timeout
        self._buf = b""
        self._sock = self._new_socket()
        try:
            self._connect(time.monotonic() + min(timeout, REFUSED_RETRY))
            deadline = time.monotonic() + timeout
            greeting = self._read_message(deadline)
            if "QMP" not in greeting:
                raise QMPError(f"QMP {self.path}: unexpected greeting {greeting!r}")
            self._call("qmp_capabilities", None, deadline)
        except OSError as e:
            self._sock.close()
            raise QMPError(
                f"QMP {self.path}: cannot connect ({e}); is the lab guest running? "
                "check `hil lab status`"
            ) from e
        except QMPError:
            self._sock.close()
            raise

    def _connect(self, refused_until: float) -> None:
        while True:
            try:
                self._sock.connect(self.path)
                return
            except ConnectionRefusedError:
                if time.monotonic() >= refused_until:
                    raise
                time.sleep(0.05)
                self._sock.close()  # a fresh socket per attempt
                self._sock = self._new_socket()

    def _new_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self._timeout)
        return sock

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the session (QEMU keeps running)."""
        self._sock.close()

    def execute(
        self, command: str, arguments: dict[str, Any] | None = None, timeout: float | None = None
    ) -> Any:
        """Run ``command`` and return its ``return`` value; QMPError on error replies."""
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        return self._call(command, arguments, deadline)

    def _call(self, command: str, arguments: dict[str, Any] | None, deadline: float) -> Any:
        msg: dict[str, Any] = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        try:
            self._sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as e:
            raise QMPError(f"QMP {self.path}: sending {command} failed: {e}") from e
        while True:
            reply = self._read_message(deadline)
            if "event" in reply:
                continue  # asynchronous events interleave with replies
            if "error" in reply:
                err = reply["error"]
                raise QMPError(f"QMP {self.path}: {command} failed: {err.get('desc', err)}")
            if "return" in reply:
                return reply["return"]
            raise QMPError(f"QMP {self.path}: unexpected reply to {command}: {reply!r}")

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QMPError(f"QMP {self.path}: no answer within the timeout; QEMU may be hung")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError as e:
                raise QMPError(
                    f"QMP {self.path}: no answer within the timeout; QEMU may be hung"
                ) from e
            except OSError as e:
                raise QMPError(f"QMP {self.path}: read failed: {e}") from e
            if not chunk:
                raise QMPError(f"QMP {self.path}: QEMU closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as e:
            raise QMPError(f"QMP {self.path}: not JSON: {line[:200]!r}") from e
        if not isinstance(msg, dict):
            raise QMPError(f"QMP {self.path}: not a QMP message: {line[:200]!r}")
        return msg


def set_link(socket_path: str, netdev_id: str, up: bool, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Plug (``up=True``) or pull the cable of QEMU netdev ``netdev_id``."""
    with QMPClient(socket_path, timeout) as qmp:
        qmp.execute("set_link", {"name": netdev_id, "up": up})


def quit_qemu(socket_path: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Ask QEMU to exit now (like pulling the power cord)."""
    with QMPClient(socket_path, timeout) as qmp:
        try:
            qmp.execute("quit")
        except QMPError as e:
            if "closed the connection" not in str(e):
                raise


def reboot_resets(socket_path: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Make a reboot reset the guest instead of ending QEMU, which vng's ``-no-reboot``
    asks for: a QMP ``system_reset`` (a power cycle) and a reboot in the guest then work.

    It stays set for the guest's life: with it set only around a
    ``system_reset`` and put back right after, QEMU 7.2 still ended within
    20 s (a second reset while the guest boots again, most likely the
    firmware's, counts as a reboot).  So a panic (vng boots with
    ``panic=-1``) reboots the guest: its console log keeps the panic, and the
    guest comes back by itself, fresh.
    """
    with QMPClient(socket_path, timeout) as qmp:
        qmp.execute("set-action", {"reboot": "reset"})
