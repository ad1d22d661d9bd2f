"""Helpers shared by the agent's tests (imported as a top-level module by pytest)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hil.agent import Agent, protocol
from hil.errors import AgentError

HOST_PYTHON = "/usr/bin/python3"  # the host's python, not the controller venv's


class StrictAgent(Agent):
    """The real agent, every answer checked strictly against hil.agent.protocol.

    A reply must be what its method declares, with no undeclared key (the
    client itself ignores those); a call that succeeded must have sent only
    declared params.  ``checked`` names the methods whose replies passed, so
    the agent tests are also the protocol's round-trip tests.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.checked: set[str] = set()
        super().__init__(*args, **kwargs)

    def call(self, method: str, timeout: float | None = None, **params: Any) -> Any:
        raw = super().call(method, timeout, **params)
        if protocol.is_method_name(method):
            declared = protocol.METHODS[method]
            declared.check_params(params)
            declared.decode(raw, strict=True)
            if method == "cm_call":
                protocol.CM_OPS[params["op"]].decode(raw, strict=True)
            self.checked.add(method)
        return raw


def process_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pids_with_cmdline(argv: list[str]) -> list[int]:
    """Live processes whose command line is exactly ``argv``."""
    want = "\0".join(argv) + "\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_text() == want and process_running(int(entry.name)):
                found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def needs_root() -> None:
    """Skip unless root: network namespaces and sshd labs need it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces (run the tests as root)")


def close_during_run(agent: Agent, argv: list[str]) -> list[AgentError]:
    """Close ``agent`` while it runs ``argv`` (a unique command line); the call's errors.

    The caller then checks that the agent and ``argv`` are gone and that the
    interrupted call failed.
    """
    errors: list[AgentError] = []

    def call() -> None:
        try:
            agent.run(argv, timeout=60)
        except AgentError as e:
            errors.append(e)

    worker = threading.Thread(target=call)
    try:
        worker.start()
        assert wait_for(lambda: len(pids_with_cmdline(argv)) == 1)
    finally:
        agent.close()
        worker.join(10)
    return errors
