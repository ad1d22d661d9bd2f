"""The controller's end of the agent protocol: handshake, calls, error mapping.

One reader thread reads the agent's stdout and hands each answer to the call
waiting on its id, so many threads may call one agent at once.  Every call
waits at most its timeout (plus a grace for the agent's own timeout answer to
arrive); an agent that dies fails every pending call with its stderr tail.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from hil.agent.remote import AGENT_GRACE, PROTOCOL_VERSION
from hil.agent.transport import Channel
from hil.errors import AgentError, CommandTimeout, WaitTimeout

DEFAULT_TIMEOUT = 30.0
HANDSHAKE_TIMEOUT = 30.0
CLOSE_TIMEOUT = 10.0
# Beyond the agent's own grace: the time its timeout answer may take to travel.
CLIENT_GRACE = AGENT_GRACE + 1.5


class AgentCallError(AgentError):
    """A call the agent answered with an error; ``kind`` and ``details`` say which.

    ``kind`` is the agent's error type (``netlink``, ``not_found``,
    ``rdma_unavailable``, ``command_failed``, ``os``, ``bad_params``,
    ``unknown_method``, ``internal``); ``errno`` is set for kernel errors, so a
    caller can tolerate one specific failure (e.g. EEXIST) and re-raise the rest.
    """

    def __init__(self, host: str, method: str, kind: str, message: str, details: dict) -> None:
        self.method = method
        self.kind = kind
        self.details = details
        self.errno: int | None = details.get("errno")
        super().__init__(host, f"agent {method}: {message}")


@dataclass(frozen=True)
class Hello:
    """What the agent announced in its handshake."""

    protocol: int
    hash: str
    pid: int
    python: str
    kernel: str
    uid: int
    methods: tuple[str, ...]


class _Pending:
    """A call waiting for its answer."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer: dict | None = None


class AgentClient:
    """A handshaken agent on ``channel``; ``host`` names it in every error."""

    def __init__(
        self,
        channel: Channel,
        host: str,
        expect_hash: str | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.host = host
        self._channel = channel
        self._log = logging.getLogger(f"hil.agent.{host}")
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._dead: str | None = None
        self._hello = _Pending()
        self._reader = threading.Thread(target=self._read, name=f"agent-{host}", daemon=True)
        self._reader.start()
        try:
            self.hello = self._handshake(expect_hash, handshake_timeout)
        except BaseException:
            channel.close(CLOSE_TIMEOUT)
            raise

    def _handshake(self, expect_hash: str | None, timeout: float) -> Hello:
        if not self._hello.event.wait(timeout):
            raise AgentError(
                self.host,
                f"agent sent no handshake within {timeout:g}s{self._stderr_suffix()}; "
                "check that the host's python3 runs (inventory 'python')",
            )
        msg = self._hello.answer
        if msg is None:
            raise AgentError(self.host, f"no agent handshake: {self._dead}")
        if msg.get("agent") != "hil" or msg.get("protocol") != PROTOCOL_VERSION:
            raise AgentError(
                self.host,
                f"agent speaks protocol {msg.get('protocol')!r}, this controller "
                f"speaks {PROTOCOL_VERSION}: the host runs another hil version's agent",
            )
        if expect_hash is not None and msg.get("hash") != expect_hash:
            raise AgentError(
                self.host,
                f"agent reports build {str(msg.get('hash'))[:12]}, expected "
                f"{expect_hash[:12]}: the file on the host is not the one built; delete "
                f"{expect_hash}.pyz from its agent cache (~/.cache/hil/agent) and retry",
            )
        try:
            return Hello(
                protocol=msg["protocol"],
                hash=msg["hash"],
                pid=msg["pid"],
                python=msg["python"],
                kernel=msg["kernel"],
                uid=msg["uid"],
                methods=tuple(msg.get("methods", ())),
            )
        except KeyError as e:
            raise AgentError(self.host, f"agent handshake lacks {e}: {msg}") from None

    def _stderr_suffix(self) -> str:
        tail = self._channel.stderr_tail().strip()
        return f"; agent stderr:\n{tail}" if tail else ""

    def _read(self) -> None:
        try:
            for raw in iter(self._channel.readline, b""):
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = None
                if not isinstance(msg, dict):
                    self._log.warning("agent printed a non-protocol line: %r", raw[:200])
                    continue
                self._dispatch(msg)
        except Exception as e:  # noqa: BLE001 - whatever the transport raises, the agent is gone
            self._log.debug("agent channel read failed: %s", e)
        finally:
            self._on_death()

    def _dispatch(self, msg: dict) -> None:
        if not self._hello.event.is_set():
            self._hello.answer = msg
            self._hello.event.set()
            return
        with self._lock:
            pending = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if pending is None:
            self._log.debug("answer for a call nobody waits for (timed out?): %s", msg.get("id"))
            return
        pending.answer = msg
        pending.event.set()

    def _on_death(self) -> None:
        status = self._channel.exit_status(wait=1.0)
        dead = f"agent exited (status {status}){self._stderr_suffix()}"
        with self._lock:  # with call(): no call registers after this
            self._dead = dead
            pending, self._pending = self._pending, {}
        self._hello.event.set()
        for p in pending.values():
            p.event.set()

    def call(self, method: str, timeout: float = DEFAULT_TIMEOUT, **params: Any) -> Any:
        """Call ``method`` on the agent; its result, or a HilError naming the host."""
        rid = next(self._ids)
        pending = _Pending()
        with self._lock:
            if self._dead is not None:
                raise AgentError(self.host, f"agent {method}: {self._dead}")
            self._pending[rid] = pending
        line = json.dumps({"id": rid, "method": method, "params": params, "timeout": timeout})
        try:
            with self._write_lock:
                self._channel.write(line.encode() + b"\n")
        except (OSError, ValueError):
            with self._lock:
                self._pending.pop(rid, None)
            raise AgentError(
                self.host, f"agent {method}: channel closed{self._stderr_suffix()}"
            ) from None
        if not pending.event.wait(timeout + CLIENT_GRACE):
            with self._lock:
                self._pending.pop(rid, None)
            raise CommandTimeout(
                self.host,
                f"agent {method} did not answer within {timeout:g}s "
                "(agent hung or the connection stalled)",
            )
        if pending.answer is None:
            raise AgentError(self.host, f"agent {method}: {self._dead}")
        return self._result(method, timeout, pending.answer)

    def _result(self, method: str, timeout: float, answer: dict) -> Any:
        error = answer.get("error")
        if error is None:
            return answer.get("result")
        kind = error.get("type", "internal")
        message = error.get("message", "")
        if kind == "timeout":
            raise CommandTimeout(self.host, f"agent {method} (timeout {timeout:g}s): {message}")
        if kind == "wait_timeout":
            raise WaitTimeout(f"{self.host}: {message}")
        raise AgentCallError(self.host, method, kind, message, error.get("details") or {})

    @property
    def alive(self) -> bool:
        """False once the agent's stdout closed."""
        return self._dead is None

    def close(self) -> None:
        """Close the agent's stdin so it exits; wait for it, kill it if it lingers."""
        self._channel.close(CLOSE_TIMEOUT)
        self._reader.join(CLOSE_TIMEOUT)
