"""The controller's end of the agent protocol: handshake, calls, error mapping.

One reader thread reads the agent's stdout and hands each answer to the call
waiting on its id, so many threads may call one agent at once.  Every call
waits at most its timeout (plus a grace for the agent's own timeout answer to
arrive); an agent that dies fails every pending call with its stderr tail.

Typed calls go through :func:`request` (and :func:`cm_request` for a CM
endpoint's operations): params as the method's ``TypedDict`` from
``hil.agent.protocol``, the reply decoded against its declaration.
``AgentClient.call`` is the untyped way in (a method name and keyword
params, the raw JSON result back).  The typed calls are :mod:`hil.agent.calls`',
the handshake's checks :mod:`hil.agent.handshake`'s; this module still names
their public names.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from typing import Any

from hil.agent.calls import Caller as Caller
from hil.agent.calls import call_bound as call_bound
from hil.agent.calls import cm_request as cm_request
from hil.agent.calls import decode_reply as decode_reply
from hil.agent.calls import request as request
from hil.agent.handshake import Hello as Hello
from hil.agent.handshake import read_hello
from hil.agent.protocol import AGENT_GRACE, ErrorBody, ErrorKind, Request
from hil.agent.transport import Channel
from hil.errors import AgentError, CommandTimeout, WaitTimeout
from hil.timeouts import expired

CLOSE_TIMEOUT = 10.0
# Beyond the agent's own grace: the time its timeout answer may take to travel.
CLIENT_GRACE = AGENT_GRACE + 1.5


class AgentCallError(AgentError):
    """A call the agent answered with an error; ``kind`` and ``details`` say which.

    ``kind`` is the agent's error type (``protocol.ErrorKind``: ``netlink``,
    ``not_found``, ``rdma_unavailable``, ``command_failed``, ``os``,
    ``bad_params``, ``unknown_method``, ``internal``, ``rdma``...); ``errno``
    is set for kernel errors, so a caller can tolerate one specific failure
    (e.g. EEXIST) and re-raise the rest.
    """

    def __init__(
        self, host: str, method: str, kind: ErrorKind, message: str, details: dict[str, Any]
    ) -> None:
        self.method = method
        self.kind: ErrorKind = kind
        self.details = details
        errno = details.get("errno")
        self.errno: int | None = errno if isinstance(errno, int) else None
        super().__init__(host, f"agent {method}: {message}")


class _Pending:
    """A call waiting for its answer."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer: dict[str, Any] | None = None


class AgentClient:
    """A handshaken agent on ``channel``; ``host`` names it in every error."""

    def __init__(
        self,
        channel: Channel,
        host: str,
        expect_hash: str | None = None,
        handshake_timeout: float | None = None,
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
            self.hello = self._handshake(expect_hash, call_bound(handshake_timeout))
        except BaseException:
            channel.close(CLOSE_TIMEOUT)
            raise

    def _handshake(self, expect_hash: str | None, timeout: float) -> Hello:
        if not self._hello.event.wait(timeout):
            raise AgentError(
                self.host,
                f"agent sent no handshake within {timeout:g}s (the agent call layer's "
                f"bound){self._stderr_suffix()}; check that the host's python3 runs "
                "(inventory 'python'); a slow host (a debug kernel under TCG) needs a larger "
                "bound: --hil-timeout-agent",
            )
        msg = self._hello.answer
        if msg is None:
            raise AgentError(self.host, f"no agent handshake: {self._dead}")
        return read_hello(self.host, msg, expect_hash)

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

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if not self._hello.event.is_set():
            self._hello.answer = msg
            self._hello.event.set()
            return
        rid = msg.get("id")
        with self._lock:
            pending = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if pending is None:
            self._log.debug("answer for a call nobody waits for (timed out?): %s", rid)
            return
        pending.answer = msg
        pending.event.set()

    def _on_death(self) -> None:
        status = self._channel.exit_status(wait=1.0)
        if status is None:
            dead = (
                "the agent ended without an exit status (killed by a signal, or its SSH "
                f"connection was cut, or the host or its sshd went down){self._stderr_suffix()}"
            )
        else:
            dead = f"agent exited (status {status}){self._stderr_suffix()}"
        with self._lock:  # with call(): no call registers after this
            self._dead = dead
            pending, self._pending = self._pending, {}
        self._hello.event.set()
        for p in pending.values():
            p.event.set()

    def call(self, method: str, timeout: float | None = None, **params: Any) -> Any:
        """Call ``method`` on the agent, bounded by ``timeout`` (default: the agent call
        layer's); its raw result, or a HilError naming the host.

        Untyped: :func:`request` is the typed way (the ``Agent`` methods use it).
        """
        timeout = call_bound(timeout)
        rid = next(self._ids)
        pending = _Pending()
        with self._lock:
            if self._dead is not None:
                raise AgentError(self.host, f"agent {method}: {self._dead}")
            self._pending[rid] = pending
        req: Request = {"id": rid, "method": method, "params": params, "timeout": timeout}
        line = json.dumps(req)
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
                expired("agent call", timeout, f"{self.host}'s agent to answer {method}")
                + " (no answer at all: the agent hung or the connection stalled)",
            )
        if pending.answer is None:
            raise AgentError(self.host, f"agent {method}: {self._dead}")
        return self._result(method, timeout, pending.answer)

    def _result(self, method: str, timeout: float, answer: dict[str, Any]) -> Any:
        if "error" not in answer:
            return answer.get("result")
        error = decode_reply(self, f"{method} error", ErrorBody, answer["error"])
        kind, message = error["type"], error["message"]
        if kind == "timeout":
            waiting = f"{self.host}'s agent to finish {method}"
            raise CommandTimeout(self.host, f"{expired('agent call', timeout, waiting)}: {message}")
        if kind == "wait_timeout":
            waiting = f"{method} on {self.host}"
            raise WaitTimeout(f"{self.host}: {expired('agent call', timeout, waiting)}: {message}")
        raise AgentCallError(self.host, method, kind, message, error["details"])

    @property
    def alive(self) -> bool:
        """False once the agent's stdout closed."""
        return self._dead is None

    @property
    def death(self) -> str | None:
        """How the agent ended (its exit status, or a lost connection); None while alive."""
        return self._dead

    def close(self) -> None:
        """Close the agent's stdin so it exits; wait for it, kill it if it lingers."""
        self._channel.close(CLOSE_TIMEOUT)
        self._reader.join(CLOSE_TIMEOUT)
