"""The agent's request loop in-process: the watchdog, malformed lines, agent bugs."""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

import pytest

from hil.agent.remote import main
from hil.agent.remote.errors import OpError


class Lines:
    """A stand-in for the agent's stdout that hands each line to the test."""

    def __init__(self) -> None:
        self.q: queue.Queue[dict[str, Any]] = queue.Queue()

    def write(self, data: bytes) -> None:
        self.q.put(json.loads(data))

    def flush(self) -> None:
        pass

    def next(self) -> dict[str, Any]:
        return self.q.get(timeout=10)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[main.Server, Lines]]:
    release = threading.Event()

    def stuck() -> str:  # an op that cannot bound itself
        release.wait(10)
        return "late"

    def broken() -> None:
        raise ValueError("agent bug")

    monkeypatch.setitem(main.METHODS, "stuck", stuck)
    monkeypatch.setitem(main.METHODS, "broken", broken)
    out = Lines()
    yield main.Server(cast(BinaryIO, out)), out  # the server only writes and flushes
    release.set()


def _request(rid: int, method: str, timeout: float = 5.0, **params: object) -> bytes:
    return json.dumps({"id": rid, "method": method, "params": params, "timeout": timeout}).encode()


def test_watchdog_answers_an_overrun_once_and_drops_the_late_result(
    server: tuple[main.Server, Lines],
) -> None:
    srv, out = server
    srv.handle(_request(1, "stuck", timeout=0.1))
    answer = out.next()
    assert answer == {
        "id": 1,
        "error": {"type": "timeout", "message": "stuck did not finish within 0.1s", "details": {}},
    }
    srv.handle(_request(2, "ping"))
    assert out.next()["id"] == 2
    assert out.q.empty()


def test_malformed_line_gets_an_error_without_id(server: tuple[main.Server, Lines]) -> None:
    srv, out = server
    srv.handle(b"{not json")
    answer = out.next()
    assert answer["id"] is None and answer["error"]["type"] == "bad_request"


def test_an_agent_bug_is_reported_with_its_traceback(server: tuple[main.Server, Lines]) -> None:
    srv, out = server
    srv.handle(_request(3, "broken"))
    error = out.next()["error"]
    assert error["type"] == "internal" and error["message"] == "ValueError: agent bug"
    assert "raise ValueError" in error["details"]["traceback"]


def test_a_signal_during_shutdown_neither_deadlocks_nor_exits_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cut connection closes stdin and has the SSH watcher send SIGTERM at once: the
    handler may run while the main thread holds the children's lock in shutdown."""
    from hil.agent.remote import system

    exits: list[int] = []
    killed: list[object] = []

    def exit_(status: int) -> None:
        exits.append(status)
        raise SystemExit(status)

    def kill_group(proc: object) -> None:  # the SIGTERM handler runs here
        killed.append(proc)
        main.shutdown(1)

    monkeypatch.setattr(main, "_exiting", threading.Lock())
    monkeypatch.setattr(os, "_exit", exit_)
    monkeypatch.setattr(system, "_children", {"child"})
    monkeypatch.setattr(system, "_closed", False)
    monkeypatch.setattr(system, "_kill_group", kill_group)
    done = threading.Thread(target=lambda: pytest.raises(SystemExit, main.shutdown, 0))
    done.start()
    done.join(5)
    assert not done.is_alive(), "shutdown deadlocked on a signal arriving inside it"
    assert (exits, killed) == ([0], ["child"])
    with pytest.raises(OpError, match="the agent is exiting and does not start sleep"):
        system.run(["sleep", "1"], timeout=1)
