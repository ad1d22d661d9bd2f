"""The wire judge on the virtual lab: rdma-core's own tools, captured at both ends.

``rping`` and ``cmtime`` (rdma-core, not hil's agent) run between the lab's
siw guests while hil captures the link at its capture points (tcpdump on
both ends, :class:`hil.wire.linkcapture.LinkCapture`); the capture files are
then judged by ``hil wire judge``, as a lab engineer would judge a capture
from anywhere.  It must decode every connection and pass.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
from rpingstate import FINDING, lost_wakeup
from vlab import VirtualLab, lab_pair_run

from hil import tools
from hil.agent.agent import Agent
from hil.errors import CommandTimeout
from hil.run import PairRun
from hil.wire.decode import decode
from hil.wire.linkcapture import LinkCapture
from hil.wire.plan import capture_plan

pytestmark = pytest.mark.lab

TOOL_TIMEOUT = 120.0
# The client gives up first, so that a hang is looked at while the server still holds it.
CLIENT_TIMEOUT = 60.0
CMTIME_CONNECTIONS = 10
RPING_COUNT = 3
SERVER_GRACE_S = 20.0


@pytest.fixture(scope="module")
def lab_run(virtual_lab: VirtualLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PairRun]:
    """The lab's pair, reserved and set up for this module."""
    with lab_pair_run(virtual_lab, tmp_path_factory.mktemp("wire"), "tests/wire") as run:
        yield run


def _serve_and_connect(
    run: PairRun, server: list[str], client: list[str], server_exits: bool = True
) -> None:
    """``server`` on host B in the background, then ``client`` on host A, which must end 0.

    A server that waits for more clients (cmtime, ``server_exits=False``) is stopped
    after the client.  rping's server is given SERVER_GRACE_S to exit 0 after its
    client did; one still running then is stopped and said so: after the exchange it
    joins its CQ thread (rdma-core librdmacm/examples/rping.c, rping_run_server's
    ``pthread_join(cb->cqthread)``), which waits on a CQ event that, on a loaded
    machine, did not come within 120 s in one run of three.  What this test judges
    is the capture of an exchange the client saw complete; the server's exit is not.
    """
    b = run.hosts.agent(run.pair.host_b.name)
    a = run.hosts.agent(run.pair.host_a.name)
    done: dict[str, object] = {}

    def serve() -> None:
        try:
            done["server"] = b.run(server, timeout=TOOL_TIMEOUT, check=False)
        except CommandTimeout as e:
            done["server"] = e

    t = threading.Thread(target=serve)
    t.start()
    stopped = False
    try:
        # A refused rping client hangs instead of exiting: connect once the server listens.
        port = int(server[server.index("-p") + 1])
        _wait_listening(b, port)
        try:
            got = a.run(client, timeout=CLIENT_TIMEOUT, check=False)
        except CommandTimeout as e:
            _triage_hang(b, port, e)
        assert got.status == 0, f"{client[0]} client failed: {got.stderr}"
    finally:
        t.join(SERVER_GRACE_S if server_exits else 5)
        if t.is_alive():  # its argv is ours: stop this server only
            stopped = True
            if server_exits:
                print(f"{server[0]} server still ran {SERVER_GRACE_S} s after its client: stopped")
            for pid in b.run(tools.argv("pgrep", "-f", "-x", " ".join(server))).stdout.split():
                b.run(tools.argv("kill", pid))
            t.join(TOOL_TIMEOUT + 10)
    if server_exits and not stopped:
        assert getattr(done.get("server"), "status", None) == 0, f"{server[0]} server: {done}"


def _triage_hang(server: Agent, port: int, hang: CommandTimeout) -> NoReturn:
    """A client that hung: an expected failure when the server holds siw's lost wakeup
    (its accepted id still in CONNECT: docs/findings/siw-rtr-lost-wakeup.md, seen here
    in a fresh-clone ci/tests on 2026-12-07, the server killed at 120 s), else a failure."""
    found = lost_wakeup(server, server.host, port)
    if found:
        pytest.xfail(f"known finding {FINDING} of siw (Linux 6.1.192): {found}; {hang}")
    pytest.fail(f"{hang}; the server's ids on port {port} are not the known lost wakeup")


def _wait_listening(agent: Agent, port: int, timeout: float = 60.0) -> None:
    """Until a TCP socket listens on ``port`` (siw listens with a kernel TCP socket)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = agent.run(tools.argv("cat", "/proc/net/tcp", "/proc/net/tcp6")).stdout
        rows = (line.split() for line in table.splitlines()[1:])
        # local_address is ADDR:PORT in hex, st 0A is LISTEN.
        if any(r[1].endswith(f":{port:04X}") and r[3] == "0A" for r in rows if len(r) > 3):
            return
        time.sleep(0.5)
    raise AssertionError(f"nothing listens on TCP port {port} on {agent.host} after {timeout}s")


def test_rping_and_cmtime_captured_at_both_ends_pass_hil_wire_judge(
    lab_run: PairRun, tmp_path: Path
) -> None:
    pair = lab_run.pair
    assert pair.rnic_a.address is not None and pair.rnic_b.address is not None
    a_addr, b_addr = str(pair.rnic_a.address.ip), str(pair.rnic_b.address.ip)
    plan = capture_plan(pair, lab_run.provider.driver)
    assert plan.usable, plan.reason
    with LinkCapture.start(lab_run.hosts, plan) as capture:
        _serve_and_connect(
            lab_run,
            tools.argv("rping", "-s", "-a", b_addr, "-p", "7174", "-C", str(RPING_COUNT)),
            tools.argv("rping", "-c", "-a", b_addr, "-p", "7174", "-C", str(RPING_COUNT)),
        )
        count = str(CMTIME_CONNECTIONS)
        _serve_and_connect(
            lab_run,
            tools.argv("cmtime", "-b", b_addr, "-p", "7175", "-c", count),
            tools.argv("cmtime", "-s", b_addr, "-p", "7175", "-c", count),
            server_exits=False,
        )
        captured = capture.stop(tmp_path)
    assert set(captured.files) == {pair.host_a.name, pair.host_b.name}, captured.notes

    exchange = decode(captured.files)
    by_port: dict[int, int] = {}
    for conn in exchange.connections:
        assert {conn.active[0], conn.passive[0]} == {a_addr, b_addr}
        by_port[conn.passive[1]] = by_port.get(conn.passive[1], 0) + 1
        assert conn.mpa("request") and conn.mpa("reply"), conn.name
        assert set(conn.points) == set(captured.files), f"{conn.name} seen by {conn.points}"
    assert by_port == {7174: 1, 7175: CMTIME_CONNECTIONS}

    cli = subprocess.run(
        [sys.executable, "-m", "hil", "wire", "judge", *map(str, captured.files.values())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "wire rules hold" in cli.stdout + cli.stderr
    assert "mpa-revision-and-flags" in cli.stdout
