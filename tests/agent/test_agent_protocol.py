"""The real agent's side of the protocol: handshake, ids, errors, timeouts, exit, and
its real replies decoded as declared (the declarations against the functions that
serve them: test_protocol_spec.py)."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from agenttest import (
    HOST_PYTHON,
    StrictAgent,
    close_during_run,
    pids_with_cmdline,
    process_running,
    wait_for,
)

from hil.agent import PROTOCOL_VERSION, Agent, AgentCallError, build, protocol
from hil.errors import AgentError, CommandTimeout
from hil.timeouts import configured


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
        CommandTimeout,
        match=r"testhost: timeout \(agent call layer, 0.5 s\) waiting for testhost's agent "
        r"to finish run: sleep .* killed",
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


def test_real_replies_decode_as_declared(agent: StrictAgent) -> None:
    """One call of each method a network namespace without RDMA can answer, every
    reply decoded strictly (StrictAgent); the RDMA methods are checked against a
    stand-in rdma tool (test_agent_rdma.py), the CM endpoint's operations in
    tests/cm/test_cmworker.py and on the virtual lab."""
    agent.ping()
    agent.add_link("rt0", "veth", peer="rt1")
    assert agent.set_link("rt0", up=True, mtu=1400).mtu == 1500
    agent.set_link("rt1", up=True)
    assert agent.wait_link("rt0", carrier=True, timeout=10).carrier
    assert agent.link("rt0").mtu == 1400 and "rt0" in {x.name for x in agent.links()}
    agent.add_address("rt0", "198.18.7.1/24")
    agent.delete_address("rt0", "198.18.7.1/24")
    agent.add_address("rt0", "198.18.7.1/24")
    assert [str(a.address) for a in agent.addresses("rt0") if a.scope == 0] == ["198.18.7.1/24"]
    assert [str(a.address) for a in agent.flush_addresses("rt0", family=4)] == ["198.18.7.1/24"]
    assert agent.driver_info("rt0").driver == "veth"
    old = agent.set_sysctl("net.ipv4.ip_forward", 1)
    assert agent.sysctl("net.ipv4.ip_forward") == "1"
    agent.set_sysctl("net.ipv4.ip_forward", old)
    assert agent.run(["true"]).status == 0
    cursor = agent.kmsg_cursor()
    agent.kmsg_read(cursor)
    agent.kmsg_close(cursor)
    assert protocol.CM_NOW.decode(agent.call("cm_now"))["t_us"] > 0
    assert protocol.CLOCK_PAIR.decode(agent.call("clock_pair"))["wall_us"] > 0
    assert agent.call("cm_endpoints") == []
    # The namespace is this test's own: its loopback up, probes to a port nobody
    # answers (their reply is a reply too; the exchange: tests/agent/test_clockpeer.py).
    agent.set_link("lo", up=True)
    assert agent.call("clock_echo", 0.3, address="127.0.0.1", port=0) == {"answered": 0}
    nobody = agent.call(
        "clock_probe", 0.3, src="127.0.0.1", dst="127.0.0.1", port=9, count=1, budget_s=0.1
    )
    assert nobody["samples"] == [] and nobody["sent"] >= 1
    agent.delete_link("rt0")
    needs_rdma = {m for m in protocol.METHOD_NAMES if m.startswith("rdma_")} | {
        "cm_open",
        "cm_call",
        "cm_kill",
        "cm_close",
    }
    # Decoded strictly in test_agent_probe.py and tests/agent/remote/peer/test_peer_op.py.
    needs_a_peer = {"tcp_exchange", "peer_run", "peer_resume", "peer_close"}
    needs_rdma.add("cm_close_race")
    assert agent.checked == set(protocol.METHOD_NAMES) - needs_rdma - needs_a_peer


def _python39() -> str | None:
    """A python 3.9 that runs: on PATH, or one pyenv keeps."""
    found = [
        shutil.which("python3.9"),
        *glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")),
    ]
    for python in filter(None, found):
        if subprocess.run([python, "-c", "pass"], capture_output=True, check=False).returncode == 0:
            return python
    return None


def test_the_agent_runs_on_the_oldest_python_it_supports() -> None:
    """python 3.9: the protocol's declarations load there (its annotations stay
    strings), and the first netlink call may race the pyroute2 preload."""
    python = _python39()
    if python is None:
        pytest.skip("no python 3.9 here (on PATH or under ~/.pyenv)")
    with StrictAgent.local([python], name="py39") as agent:
        assert agent.hello.python.startswith("3.9.")
        assert "lo" in {x.name for x in agent.links()}
        assert agent.run(["true"]).status == 0
        agent.call("cm_now")
        assert agent.checked == {"links", "run", "cm_now"}


def test_a_frozen_agent_meets_the_agent_call_layers_configured_bound(host_agent: Agent) -> None:
    """The real agent stopped (SIGSTOP, as a host that hangs): a call that names no
    bound gives up after the configured one, naming the layer; the agent goes on after."""
    os.kill(host_agent.hello.pid, signal.SIGSTOP)
    try:
        with configured(agent_call_s=0.3), pytest.raises(CommandTimeout) as e:
            host_agent.ping()
    finally:
        os.kill(host_agent.hello.pid, signal.SIGCONT)
    assert str(e.value).startswith(
        "testhost: timeout (agent call layer, 0.3 s) waiting for testhost's agent to answer "
        "ping (no answer at all"
    )
    assert host_agent.ping() == host_agent.hello.pid
