"""Tool peers (hil/cm/toolpeers.py) off the lab: the registry, each tool's argument list,
what counts as a failure, and a tool's start, listener and stop through a fake agent (the
boundary); the lab run is suites/test_interop_tools.py."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from hil.agent.types import CommandResult
from hil.cm import toolpeers
from hil.cm.steps import StepFailed
from hil.cm.toolpeers import TOOL_PEERS, ToolContext, ToolPeer, ToolRun, register_tool_peer
from hil.errors import InputError
from hil.judge.timeline import Action, Timeline
from hil.registry import Registry


class FakeAgent:
    """A tool host's agent: ``run`` blocks a tool's argv until :attr:`release` is set (or
    pkill'd by ``kill``); its listener shows in ``rdma_resource_rows`` once started."""

    def __init__(self, listens: bool = True, exits: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.release = threading.Event()
        self.listens, self.exits = listens, exits
        self.started = threading.Event()

    def run(self, argv: list[str], timeout: float = 60.0) -> CommandResult:
        self.calls.append(list(argv))
        name = argv[0].rsplit("/", 1)[-1]
        if name == "pgrep":
            return CommandResult(tuple(argv), 0, "4242\n", "")
        if name == "kill":
            self.release.set()
            return CommandResult(tuple(argv), 0, "", "")
        if name in ("ss", "rdma"):
            return CommandResult(tuple(argv), 0, f"{name}'s rows\n", "")
        self.started.set()
        if self.exits is not None:
            return CommandResult(tuple(argv), self.exits, "", "cmatose: bind address failed\n")
        self.release.wait(timeout)
        return CommandResult(tuple(argv), -15, "data transfers complete\n", "")

    def rdma_resource_rows(self, kind: str) -> list[dict[str, Any]]:
        assert kind == "cm_id"
        if not (self.listens and self.started.is_set()):
            return []
        # iproute2 6.1's rows: the port in src-addr (tests/cm/test_regress_held.py).
        return [
            {"state": "LISTEN", "src-addr": "198.18.0.2:7471", "dst-addr": "0.0.0.0:0"},
            {"state": "CONNECT", "src-addr": "198.18.0.2:1", "dst-addr": "198.18.0.1:2"},
        ]


class FakeSession:
    active, passive = "a", "b"

    def __init__(self, agent: FakeAgent) -> None:
        self._agent = agent

    def address(self, side: str) -> str:
        return {"a": "198.18.0.1", "b": "198.18.0.2"}[side]

    def port(self) -> int:
        return 7471

    def host(self, side: str) -> str:
        return f"guest-{side}"

    def agent(self, side: str) -> FakeAgent:
        return self._agent

    def other(self, side: str) -> str:
        return "a" if side == "b" else "b"

    @contextlib.contextmanager
    def recording(self, name: str) -> Iterator[FakeRecording]:
        yield FakeRecording(self._agent)


class FakeRecording:
    def __init__(self, agent: FakeAgent) -> None:
        self.session = FakeSession(agent)
        self.actions: list[Action] = []

    def add_action(self, action: Action) -> None:
        self.actions.append(action)

    def timeline(self) -> Timeline:
        return Timeline("tool", "siw", ("guest-a", "guest-b"), tuple(self.actions))


def context(name: str, agent: FakeAgent) -> ToolContext:
    peer = TOOL_PEERS[name]
    tool_side = "b" if peer.role == "server" else "a"
    hil_side = "a" if tool_side == "b" else "b"
    return ToolContext(FakeRecording(agent), peer, hil_side, tool_side)  # type: ignore[arg-type]


def test_the_built_in_peers_and_their_argument_lists() -> None:
    assert TOOL_PEERS.names() == (
        "ucmatose-server", "ucmatose-client", "cmtime-client", "rping-server", "rping-client",
        "ib_send_bw-client",
    )  # fmt: skip
    agent = FakeAgent()
    server = context("ucmatose-server", agent)
    assert server.host == "guest-b"  # a server tool on the passive side
    assert server.argv[1:] == ("-b", "198.18.0.2", "-p", "7471", "-C", "10", "-S", "3000")
    client = context("ucmatose-client", agent)
    assert client.host == "guest-a"  # a client tool on the active side, to hil's listener
    assert client.argv[1:5] == ("-s", "198.18.0.2", "-b", "198.18.0.1")
    assert context("cmtime-client", agent).argv[-2:] == ("-c", "4")
    assert context("rping-server", agent).argv[1:] == (
        "-s", "-a", "198.18.0.2", "-p", "7471", "-S", "3000", "-v",
    )  # fmt: skip
    assert context("rping-client", agent).argv[1:] == (
        "-c", "-a", "198.18.0.2", "-I", "198.18.0.1", "-p", "7471", "-C", "3", "-S", "3000",
        "-V", "-v",
    )  # fmt: skip
    # ib_send_bw -R's client on A: both of its connections to hil's one listener on B.
    send_bw = context("ib_send_bw-client", agent)
    assert send_bw.host == "guest-a"
    assert send_bw.argv[0].rsplit("/", 1)[-1] == "ib_send_bw"
    assert send_bw.argv[1:] == (
        "-R", "-F", "-p", "7471", "-n", "5", "-s", "3000", "--source_ip", "198.18.0.1",
        "198.18.0.2",
    )  # fmt: skip


def test_a_second_peer_of_one_name_is_refused_and_an_unknown_one_named() -> None:
    with pytest.raises(InputError, match="tool peer 'ucmatose-server' is registered already"):
        register_tool_peer(TOOL_PEERS["ucmatose-server"])
    with pytest.raises(InputError, match="no tool peer 'ib_send_bw-server'.*rping-client"):
        TOOL_PEERS["ib_send_bw-server"]


def test_a_server_tool_is_waited_for_until_it_listens_then_stopped_if_still_running() -> None:
    agent = FakeAgent()
    ctx = context("ucmatose-server", agent)
    ctx.start()  # returns once the fake's listener on 7471 shows
    (started,) = ctx.rec.actions  # type: ignore[attr-defined]
    assert (started.side, started.name, started.params["argv"]) == (
        "b",
        "tool_peer",
        " ".join(ctx.argv),
    )
    status, out, _ = ctx.finish(0.05)
    assert [c[0].rsplit("/", 1)[-1] for c in agent.calls] == ["stdbuf", "pgrep", "kill"]
    # Line-buffered, so a killed tool's last lines are kept; stdbuf execs it, so pgrep
    # finds the tool's own command line.
    assert list(agent.calls[0][1:]) == ["-oL", *ctx.argv]
    assert agent.calls[1][1:] == ["-f", "-x", " ".join(ctx.argv)]
    assert agent.calls[2][1] == "4242"
    assert (status, out) == (-15, "data transfers complete\n")


def test_a_stalled_exchange_fails_with_both_hosts_sockets_and_cm_ids_read_before_the_kill(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What each end still holds (unread bytes, an id waiting for ESTABLISHED) is read
    while the tool runs, so the failure tells a stalled peer from a lost wakeup."""

    def stalls(ctx: ToolContext) -> dict[str, Any]:
        ctx.start()
        raise StepFailed("guest-a", "no completion within 30s waiting for ping 0")

    rping = TOOL_PEERS["rping-server"]
    stalling = Registry[ToolPeer]("tool peer", name_of=lambda p: p.name)
    stalling.register(dataclasses.replace(rping, serve=stalls))
    monkeypatch.setattr(toolpeers, "TOOL_PEERS", stalling)
    agent = FakeAgent()
    with pytest.raises(StepFailed) as failed:
        toolpeers.run_tool_peer(FakeSession(agent), "rping-server")  # type: ignore[arg-type]
    notes = "\n".join(failed.value.__notes__)
    for host in ("guest-a", "guest-b"):
        assert f"--- {host}: ss -tnoei state all ( sport = :7471 or dport = :7471 )" in notes
        assert f"--- {host}: rdma resource show cm_id\nrdma's rows" in notes
    names = [c[0].rsplit("/", 1)[-1] for c in agent.calls]
    assert names.index("ss") < names.index("kill")


def test_a_server_tool_that_ends_before_it_listens_fails_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolpeers, "LISTEN_POLL_S", 0.01)
    # It never listens: a listener shown while its run returns would race the step's look.
    ctx = context("ucmatose-server", FakeAgent(listens=False, exits=1))
    with pytest.raises(StepFailed, match="ucmatose ended before it listened"):
        ctx.start()
    assert ctx.finish(1.0)[0] == 1


def test_a_server_tool_that_never_listens_fails_at_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(toolpeers, "START_S", 0.05)
    monkeypatch.setattr(toolpeers, "LISTEN_POLL_S", 0.01)
    ctx = context("ucmatose-server", FakeAgent(listens=False))
    with pytest.raises(StepFailed, match="ucmatose did not listen within 0.05 s"):
        ctx.start()
    ctx.finish(0.0)


def run_of(peer: ToolPeer, status: int | None, stdout: str, **facts: Any) -> ToolRun:
    """A finished run of ``peer`` on guest-b with the tool's ``status`` and ``stdout``."""
    tl = Timeline("tool", "siw", ("guest-a", "guest-b"), ())
    return ToolRun(peer, "guest-b", ("ucmatose",), status, stdout, "", tl, facts)


def test_ucmatose_passes_only_with_each_send_whole_and_its_completion_line() -> None:
    peer = TOOL_PEERS["ucmatose-server"]
    good = {"received": [3000] * 10, "sent": 10, "error": None}
    assert run_of(peer, 0, "data transfers complete\n", **good).failures() == []
    short = {**good, "received": [3000] * 9 + [1500]}
    assert run_of(peer, None, "", **short).failures() == [
        f"hil received SENDs of {short['received']} bytes, not {[3000] * 10}",
        "ucmatose on guest-b was killed",
        "ucmatose on guest-b never printed 'data transfers complete'",
    ]
    stopped = {"received": [], "sent": 0, "error": "no completion within 30s"}
    assert run_of(peer, 0, "data transfers complete", **stopped).failures()[0] == (
        "hil's exchange stopped: no completion within 30s"
    )


def test_cmtime_passes_only_with_each_connection_established_and_closed() -> None:
    peer = TOOL_PEERS["cmtime-client"]
    out = "disconnect    :  120.1\n"
    assert run_of(peer, 0, out, established=4, disconnected=4).failures() == []
    assert run_of(peer, 0, out, established=4, disconnected=3).failures() == [
        "hil's listener saw 3 of cmtime's 4 connections disconnected"
    ]


def test_rping_passes_only_with_every_ping_checked_and_printed_as_hil_sent_it() -> None:
    peer = TOOL_PEERS["rping-server"]
    texts = [f"rdma-ping-{k}: ABC" for k in range(3)]
    checks = [{"ping": k, "size": 3000, "ok": True, "offset": -1} for k in range(3)]
    out = "".join(f"server ping data: {t}\n" for t in texts)
    assert run_of(peer, 0, out, checks=checks, text=texts, error=None).failures() == []
    bad = [*checks[:2], {**checks[2], "ok": False, "offset": 7}]
    wrong = out.replace("rdma-ping-1: ABC", "rdma-ping-1: ABD")
    assert run_of(peer, 0, wrong, checks=bad, text=texts, error=None).failures() == [
        "ping 2: byte 7 of 3000 differs",
        f"rping printed the pings {[texts[0], 'rdma-ping-1: ABD', texts[2]]}, not hil's {texts}",
    ]
    # Against rping's client, its own -V is the tool's check; hil checks what it read.
    client = TOOL_PEERS["rping-client"]
    done = "ping data: rdma-ping-2: ABC\n"
    assert run_of(
        client, 0, done, checks=checks[:2], text=texts, error="no completion"
    ).failures() == [
        "hil's rping stopped: no completion",
        "hil checked 2 of 3 pings",
    ]


def test_ib_send_bw_passes_only_with_perftests_messages_sends_and_credits() -> None:
    peer = TOOL_PEERS["ib_send_bw-client"]
    # perftest's REPORT_FMT: " %-7lu    %-10lu       %-7.2lf ...", once every SEND completed.
    out = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    out += " 3000       5                0.00               12.34 		   0.004313\n"
    dest = {"lid": 0, "out_reads": 1, "qpn": 7, "psn": 0x12345, "rkey": 9, "vaddr": 4096}
    good = {
        "version": "6.06",
        "cycle_buffer": 4096,
        "cache_line": 64,
        "mtu": "3",
        "dest": dest,
        "received": [3000] * 5,
        "credits": [2, 4],
        "control": [[16, 4, 4, 2, 56], [56] * 6],
    }
    assert run_of(peer, 0, out, **good).failures() == []
    bad = {
        **good,
        "version": "5.60",
        "cache_line": 0,
        "mtu": "",
        "dest": {**dest, "psn": 1 << 24},
        "received": [3000] * 4,
        "credits": [2],
        "control": [[16, 4, 4, 4, 56], [56] * 6],
    }
    assert run_of(peer, 1, "", **bad).failures() == [
        "ib_send_bw's control messages were [[16, 4, 4, 4, 56], [56, 56, 56, 56, 56, 56]] "
        "bytes, not [[16, 4, 4, 2, 56], [56, 56, 56, 56, 56, 56]]",
        "ib_send_bw sent version '5.60', not '6.06'",
        "ib_send_bw's cache_line 0 is not a cache line size (a power of 2)",
        "ib_send_bw's MTU '' is no enum ibv_mtu (1..5)",
        f"ib_send_bw's QP parameters {bad['dest']} lack a 24-bit PSN or a credit slot",
        f"hil received SENDs of {[3000] * 4} bytes, not {[3000] * 5}",
        "hil wrote the credits [2], not [2, 4]",
        "ib_send_bw on guest-b exited 1",
        f"ib_send_bw on guest-b never printed {toolpeers.SEND_BW_DONE!r}",
    ]


# The connection state of ci/suites' failed ib_send_bw-client exchange (2026-12-07):
# hil's server (lab7cdd-1) accepted the tool's connection and never saw it established.
STALLED_STATE = """\
--- lab7cdd-1: ss -tnoei state all ( sport = :23583 or dport = :23583 )
State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
ESTAB  40     0         198.18.0.2:23583   198.18.0.1:42632 ino:2756 sk:2 <->
--- lab7cdd-1: rdma resource show cm_id
link siw_data0/1 cm-idn 107 state LISTEN ps TCP src-addr 198.18.0.2:23583 dst-addr 0.0.0.0:0
link siw_data0/1 cm-idn 108 lqpn 1 qp-type RC state CONNECT ps TCP src-addr 198.18.0.2:23583 dst-addr 198.18.0.1:42632
--- lab7cdd-0: ss -tnoei state all ( sport = :23583 or dport = :23583 )
ESTAB 0      0         198.18.0.1:42632   198.18.0.2:23583 ino:2920 sk:1 <->
--- lab7cdd-0: rdma resource show cm_id
link siw_data0/1 cm-idn 94 lqpn 1 qp-type RC state CONNECT ps TCP pid 5389 comm ib_send_bw src-addr 198.18.0.1:42632 dst-addr 198.18.0.2:23583
"""  # noqa: E501


def test_an_accept_never_established_is_read_from_the_connection_state() -> None:
    stuck = ToolContext.waiting_accepts(STALLED_STATE, "lab7cdd-1")
    assert stuck == [
        "link siw_data0/1 cm-idn 108 lqpn 1 qp-type RC state CONNECT ps TCP "
        "src-addr 198.18.0.2:23583 dst-addr 198.18.0.1:42632"
    ]
    established = STALLED_STATE.replace("state CONNECT ps TCP src", "state CONNECTED ps TCP src")
    assert ToolContext.waiting_accepts(established, "lab7cdd-1") == []
    assert ToolContext.waiting_accepts(STALLED_STATE, "lab7cdd-9") == []
