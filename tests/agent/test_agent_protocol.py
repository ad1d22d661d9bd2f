"""The real agent's side of the protocol: handshake, ids, errors, timeouts, exit."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from agenttest import HOST_PYTHON, close_during_run, pids_with_cmdline, process_running, wait_for

from hil.agent import PROTOCOL_VERSION, Agent, AgentCallError, build
from hil.errors import AgentError, CommandTimeout


def test_handshake_announces_version_build_pid_python_and_kernel(host_agent: Agent) -> None:
    hello = host_agent.hello
    bundle = build()
    assert hello.protocol == PROTOCOL_VERSION
    assert hello.hash == bundle.sha256 == hashlib.sha256(bundle.path.read_bytes()).hexdigest()
    assert process_running(hello.pid) and hello.pid == host_agent.ping()
    assert hello.kernel == os.uname().release
    assert hello.python.startswith("3.")
    assert "links" in hello.methods and "kmsg_read" in hello.methods


def test_unknown_method_is_a_structured_error(host_agent: Agent) -> None:
    with pytest.raises(
        AgentCallError, match=r"testhost: agent frobnicate: no method 'frobnicate'"
    ) as e:
        host_agent.call("frobnicate")
    assert e.value.kind == "unknown_method"
    assert "links" in e.value.details["known"]


def test_bad_params_are_a_structured_error(host_agent: Agent) -> None:
    with pytest.raises(AgentCallError, match="unexpected keyword argument 'colour'") as e:
        host_agent.call("links", colour="blue")
    assert e.value.kind == "bad_params"


def test_concurrent_calls_each_get_their_own_answer(host_agent: Agent) -> None:
    words = [f"w{i}" for i in range(24)]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda w: host_agent.run(["echo", w]).stdout.strip(), words))
    assert outs == words


def test_a_slow_call_does_not_block_others(host_agent: Agent) -> None:
    slow_done = threading.Event()

    def slow() -> None:
        host_agent.run(["sleep", "2"], timeout=10)
        slow_done.set()

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        for _ in range(5):
            host_agent.ping()
        assert not slow_done.is_set()  # the quick calls came back while sleep still ran
    finally:
        worker.join()
    assert slow_done.is_set()


def test_call_that_exceeds_its_timeout_is_killed_on_the_host(host_agent: Agent) -> None:
    argv = ["sleep", f"{900 + uuid.uuid4().int % 99}.5"]  # unique, to find it in /proc
    with pytest.raises(
        CommandTimeout, match=r"testhost: agent run \(timeout 0.5s\): sleep .* killed"
    ):
        host_agent.run(argv, timeout=0.5)
    assert pids_with_cmdline(argv) == []
    assert host_agent.ping()  # the session goes on


def test_agent_killed_mid_call_gives_agent_error(host_agent: Agent) -> None:
    argv = ["sleep", f"{600 + uuid.uuid4().int % 99}.5"]
    errors: list[Exception] = []

    def call() -> None:
        try:
            host_agent.run(argv, timeout=60)
        except AgentError as e:
            errors.append(e)

    worker = threading.Thread(target=call)
    worker.start()
    try:
        assert wait_for(lambda: len(pids_with_cmdline(argv)) == 1)  # the call is under way
        os.kill(host_agent.hello.pid, signal.SIGKILL)
        worker.join(10)
        assert not worker.is_alive()
        assert len(errors) == 1 and "agent exited (status -9)" in str(errors[0])
        assert not host_agent.alive
    finally:
        for pid in pids_with_cmdline(argv):  # a SIGKILLed agent cannot end its children
            os.kill(pid, signal.SIGKILL)
        worker.join(10)


def test_closing_stdin_ends_the_agent_and_everything_it_started() -> None:
    argv = ["sleep", f"{800 + uuid.uuid4().int % 99}.25"]
    agent = Agent.local([HOST_PYTHON], name="testhost")
    errors = close_during_run(agent, argv)
    assert not process_running(agent.hello.pid)
    assert wait_for(lambda: pids_with_cmdline(argv) == [])
    assert len(errors) == 1 and "agent exited" in str(errors[0])
