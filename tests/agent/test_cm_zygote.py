"""CM endpoint workers forked from the agent's zygote (hil/agent/remote/cm/zygote.py, spawn.py).

The real agent runs here with a fake librdmacm.so.1 (fake_librdmacm.c, built
with gcc, found first through LD_LIBRARY_PATH): the library is the boundary,
everything above it (agent, zygote, fork, worker, pipes) is the real thing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from agenttest import HOST_PYTHON, StrictAgent, process_running, wait_for

from hil.agent.client import AgentCallError
from hil.agent.remote.cm import spawn
from hil.agent.remote.errors import OpError

FAKE_SOURCE = Path(__file__).with_name("fake_librdmacm.c")


@pytest.fixture(scope="module")
def fake_lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the fake librdmacm.so.1."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the fake librdmacm")
    out = tmp_path_factory.mktemp("fakecm")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out / "librdmacm.so.1"), str(FAKE_SOURCE)],
        check=True,
        timeout=60,
    )
    return out


def _agent(lib_dir: Path) -> StrictAgent:
    return StrictAgent.local(["env", f"LD_LIBRARY_PATH={lib_dir}", HOST_PYTHON], name="zygote")


@pytest.fixture
def agent(fake_lib_dir: Path) -> Iterator[StrictAgent]:
    """The real agent, its workers on the fake librdmacm."""
    with _agent(fake_lib_dir) as a:
        yield a


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _open(agent: StrictAgent) -> tuple[int, int]:
    got = agent.call("cm_open", timeout=30)
    return got["endpoint"], got["pid"]


def test_a_worker_forked_from_the_zygote_answers(agent: StrictAgent) -> None:
    endpoint, pid = _open(agent)
    zygote = _ppid(pid)
    assert _ppid(zygote) == agent.hello.pid  # agent -> zygote -> worker
    assert b"hil_agent.remote.cm.zygote" in Path(f"/proc/{zygote}/cmdline").read_bytes()
    assert os.getsid(pid) == pid  # a session of its own, as start_new_session gave
    assert agent.call("cm_call", endpoint=endpoint, op="handles", timeout=10) == {"ids": []}
    assert agent.call("cm_close", endpoint=endpoint, timeout=10) == {"status": 0, "killed": False}
    assert wait_for(lambda: not process_running(pid))


def test_the_zygote_is_one_thread_and_loads_no_rdma_library(agent: StrictAgent) -> None:
    # A fork copies only the forking thread, and a child must hold no verbs context or
    # event channel of the zygote's: the worker loads librdmacm itself, after the fork.
    _, pid = _open(agent)
    zygote = _ppid(pid)
    assert "Threads:\t1\n" in Path(f"/proc/{zygote}/status").read_text()
    assert "librdmacm" not in Path(f"/proc/{zygote}/maps").read_text()
    assert "libibverbs" not in Path(f"/proc/{zygote}/maps").read_text()
    assert "librdmacm" in Path(f"/proc/{pid}/maps").read_text()


def test_many_opens_in_a_row_fork_from_one_zygote_and_leak_no_fd(agent: StrictAgent) -> None:
    agent_fds = Path(f"/proc/{agent.hello.pid}/fd")
    endpoint, pid = _open(agent)  # the zygote started, and its fds opened
    agent.call("cm_close", endpoint=endpoint, timeout=10)
    assert wait_for(lambda: not process_running(pid))
    before = len(list(agent_fds.iterdir()))
    opened = [_open(agent) for _ in range(12)]
    assert len({_ppid(pid) for _, pid in opened}) == 1
    assert len({pid for _, pid in opened}) == 12
    for endpoint, _ in opened:
        assert agent.call("cm_close", endpoint=endpoint, timeout=10)["status"] == 0
    # At most as many as before: ``before`` may still count the first worker's pipes,
    # which its reader threads close once they see EOF (later under load).
    assert wait_for(lambda: len(list(agent_fds.iterdir())) <= before, timeout=30)


def test_a_worker_that_dies_is_reported_with_its_signal(agent: StrictAgent) -> None:
    endpoint, pid = _open(agent)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(AgentCallError, match=r"\(exit status -9\)") as info:
        agent.call("cm_call", endpoint=endpoint, op="handles", timeout=10)
    assert info.value.kind == "cm_worker_died"
    endpoint, pid = _open(agent)
    assert agent.call("cm_kill", endpoint=endpoint)["pid"] == pid
    assert not process_running(pid)


def test_killing_the_zygote_kills_its_workers_and_the_next_open_starts_one(
    agent: StrictAgent,
) -> None:
    workers = [_open(agent) for _ in range(2)]
    zygote = _ppid(workers[0][1])
    os.kill(zygote, signal.SIGKILL)
    assert wait_for(lambda: not any(process_running(pid) for _, pid in workers))
    with pytest.raises(AgentCallError, match="exit status None") as info:
        agent.call("cm_call", endpoint=workers[0][0], op="handles", timeout=10)
    assert info.value.kind == "cm_worker_died"
    endpoint, pid = _open(agent)
    assert _ppid(pid) not in (zygote, agent.hello.pid)
    assert agent.call("cm_call", endpoint=endpoint, op="handles", timeout=10) == {"ids": []}


def test_the_agents_death_takes_the_zygote_and_its_workers(fake_lib_dir: Path) -> None:
    agent = _agent(fake_lib_dir)
    try:
        _, pid = _open(agent)
        zygote = _ppid(pid)
        os.kill(agent.hello.pid, signal.SIGKILL)
        assert wait_for(lambda: not process_running(zygote) and not process_running(pid))
    finally:
        agent.close()


def test_a_zygote_that_cannot_start_fails_naming_why(tmp_path: Path) -> None:
    zygote = spawn.Zygote(root=str(tmp_path))  # no hil_agent there: its import fails
    ours, theirs = socket.socketpair()
    with ours, theirs, pytest.raises(OpError) as info:
        zygote.fork([theirs.fileno()] * 3, timeout=30)
    assert info.value.kind == "os"
    # "died" when our request was sent before it exited, "is gone" when after.
    assert re.search(
        rf"the CM zygote \(pid {zygote.pid}\) (died|is gone) \(exit status 1\)", info.value.message
    )
    assert "No module named 'hil_agent'" in info.value.message


def test_a_zygote_that_does_not_answer_is_killed_so_that_the_next_fork_starts_another(
    tmp_path: Path,
) -> None:
    package = tmp_path / "hil_agent" / "remote" / "cm"
    package.mkdir(parents=True)
    for d in (tmp_path / "hil_agent", tmp_path / "hil_agent" / "remote", package):
        (d / "__init__.py").write_text("")
    # A zygote that hangs: it never reads its socket.
    (package / "zygote.py").write_text("import time\ndef main(fd, parent):\n    time.sleep(300)\n")
    zygote = spawn.Zygote(root=str(tmp_path))
    ours, theirs = socket.socketpair()
    with ours, theirs, pytest.raises(OpError) as info:
        zygote.fork([theirs.fileno()] * 3, timeout=1)
    assert info.value.message.startswith(
        f"the CM zygote (pid {zygote.pid}) did not fork within 1s; killed it, "
        "the next open starts another (exit status -9)"
    )
    assert zygote.dead
    assert not process_running(zygote.pid)
