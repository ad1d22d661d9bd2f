"""Sysctls and commands through the real agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.agent import Agent, AgentCallError
from hil.errors import CommandFailed


def test_sysctl_set_returns_old_value_and_stays_in_the_namespace(agent: Agent) -> None:
    outside = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    inside = agent.sysctl("net.ipv4.ip_forward")
    flipped = "0" if inside == "1" else "1"
    assert agent.set_sysctl("net.ipv4.ip_forward", flipped) == inside
    assert agent.sysctl("net.ipv4.ip_forward") == flipped
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == outside
    assert agent.set_sysctl("net.ipv4.ip_forward", inside) == flipped


def test_sysctl_with_slashes_reaches_names_holding_dots(agent: Agent) -> None:
    agent.add_link("hv.5", "veth", peer="hv5p")
    assert agent.sysctl("net/ipv4/conf/hv.5/rp_filter") in {"0", "1", "2"}


def test_sysctl_errors_are_clear(agent: Agent) -> None:
    with pytest.raises(
        AgentCallError, match=r"no sysctl net.ipv4.nope \(/proc/sys/net/ipv4/nope does not exist\)"
    ) as e:
        agent.sysctl("net.ipv4.nope")
    assert e.value.kind == "not_found"
    with pytest.raises(AgentCallError, match=r"not a sysctl name: '../../etc/passwd'") as e:
        agent.sysctl("../../etc/passwd")
    assert e.value.kind == "bad_params"
    with pytest.raises(
        AgentCallError, match=r"cannot set sysctl net.ipv4.ip_forward=banana: Invalid argument"
    ):
        agent.set_sysctl("net.ipv4.ip_forward", "banana")


def test_run_returns_status_stdout_stderr_and_takes_input(host_agent: Agent) -> None:
    r = host_agent.run(["sh", "-c", "read x; echo out:$x; echo err >&2; exit 3"], input="hi\n")
    assert (r.status, r.stdout, r.stderr) == (3, "out:hi\n", "err\n")
    assert r.argv[0] == "sh"


def test_run_passes_arguments_without_a_shell(host_agent: Agent) -> None:
    r = host_agent.run(["echo", "$(id)", ";", "rm", "-rf", "/"])
    assert r.stdout == "$(id) ; rm -rf /\n"


def test_run_check_raises_command_failed_with_stderr(host_agent: Agent) -> None:
    with pytest.raises(
        CommandFailed, match=r"testhost: ls /nonexistent-hil exited 2: .*No such file"
    ) as e:
        host_agent.run(["ls", "/nonexistent-hil"], check=True)
    assert e.value.status == 2


def test_run_of_a_missing_program_is_clear(host_agent: Agent) -> None:
    with pytest.raises(AgentCallError, match=r"cannot start no-such-tool-hil: No such file") as e:
        host_agent.run(["no-such-tool-hil"])
    assert e.value.kind == "os"
