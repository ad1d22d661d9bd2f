"""rdma-core's own tools as scripted peers: a tool on one host of the pair, hil's CM
endpoint on the other, one connection's exchange as the tool's source says it goes.

    run = run_tool_peer(cm, "ucmatose-server")   # ucmatose -b B on B, hil connects from A
    assert not run.failures(), run.output()

A :class:`ToolPeer` names the tool, its role (``server``: it listens on the session's
passive side and hil's endpoint connects from the active side; ``client``: it
connects from the active side to hil's listener on the passive side), its argument
list, hil's part (``serve``) and what the tool prints when it did its part.  The tool
runs through the agent of its host (an argument list, never a shell; bounded by
:data:`TOOL_TIMEOUT_S`, after which the agent kills it) in a thread of its own while
hil's part runs; a tool still running when hil's part ended is given
:data:`EXIT_GRACE_S`, then killed by its exact command line.  Its status and output
come back in the :class:`ToolRun` with hil's timeline (judged by the contract and,
through the test's capture, the wire judge) and ``facts``: what hil's side saw of the
tool's data (e.g. each SEND's length).

Peers are registered (:data:`TOOL_PEERS`); a lab adds one with
:func:`register_tool_peer`.  Which tools and roles are not covered, and why: docs/interop.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hil import tools
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.regressions.held import ids_in_state
from hil.cm.steps import REPLY_TYPES, StepFailed, expect
from hil.errors import CommandTimeout, HilError
from hil.judge.timeline import TOOL_PEER, Action, Timeline
from hil.registry import Registry

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.types import CommandResult
    from hil.cm.endpoint import Endpoint, Outcome
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

__all__ = [
    "TOOL_PEERS", "ToolArgs", "ToolContext", "ToolPeer", "ToolRun", "register_tool_peer",
    "run_tool_peer", "stop_command",
]  # fmt: skip

ToolRole = Literal["server", "client"]
TOOL_TIMEOUT_S = 90.0  # the tool's whole run; the agent kills it past this
EXIT_GRACE_S = 15.0  # a tool still running once hil's part ended: its exit, then a kill
START_S = 30.0  # a tool's listener up, or its first request at hil's listener (TCG guests)
LISTEN_POLL_S = 0.3
STATE_S = 15.0  # one read of a host's sockets or CM ids after a stalled exchange
# ucmatose's exchange (cmatose.c, rdma-core v44: -C message_count, -S message_size): 10
# messages, its default count, of 3000 bytes, more than one 1500-byte link MTU, so each
# SEND takes several DDP segments on the wire.
UCMATOSE_COUNT, UCMATOSE_SIZE = 10, 3000
UCMATOSE_DATA = ("-C", str(UCMATOSE_COUNT), "-S", str(UCMATOSE_SIZE))
CMTIME_CONNECTIONS = 4
# rping (rping.c, rdma-core v44: -C count, -S size): 3 pings of 3000 bytes, so each
# RDMA READ and WRITE takes several DDP segments; SERVED starts each ping its server
# prints (-v: "server ping data: %s").
RPING_COUNT, RPING_SIZE = 3, 3000
RPING_PINGS = ("-C", str(RPING_COUNT), "-S", str(RPING_SIZE))
SERVED = "server ping data: "  # cmtime -c: a few, each answered by hil's listener in its worker
# ib_send_bw -R (perftest 4.5, Debian 12; docs/notes/perftest-R-protocol.md): 5 SENDs, its
# fewest (-n "at least 5"), of 3000 bytes.  From 6 on its client waits for hil's credits;
# past 16 it could have more SENDs in flight than hil keeps receives posted (the agent's
# send_bw op refuses that).  -F: a report
# even when the CPU's clock cannot be read (else "Can't produce a report", exit 1,
# before the close; a guest's may not be).
SEND_BW_ITERS, SEND_BW_SIZE = 5, 3000
SEND_BW_VERSION = "6.06"  # what perftest 4.5's programs send (its configure.ac's VERSION)
# The control messages ib_send_bw's client sends, in order: setup's version, page size,
# cache line size, MTU and sync; run's sync, QP parameters, two syncs, the same again and
# the close (perftest_communication.c, send_bw.c main).
SEND_BW_CONTROL = [16, 4, 4, 2, 56], [56] * 6
# Its result line (perftest_parameters.h REPORT_FMT: " %-7lu    %-10lu ..."), printed
# once every SEND completed.
SEND_BW_DONE = f" {SEND_BW_SIZE:<7}    {SEND_BW_ITERS:<10}"


@dataclass(frozen=True)
class ToolArgs:
    """What a tool's argument list is made of: the server's data address, the CM port
    and the client's data address (its bind address)."""

    server: str
    port: int
    client: str


@dataclass(frozen=True)
class ToolPeer:
    """One tool in one role against hil: ``argv`` gives its arguments after the command,
    ``serve`` is hil's part (it calls ``ctx.start()`` when the tool is to start) and
    returns its facts, ``check`` what is wrong in them (the data checks), ``done`` a
    line the tool prints once it did its part, and ``source`` where its protocol was
    read."""

    name: str
    tool: str  # a command hil.tools lists
    role: ToolRole
    argv: Callable[[ToolArgs], list[str]]
    serve: Callable[[ToolContext], Mapping[str, Any]]
    check: Callable[[ToolRun], list[str]]
    done: str
    source: str


TOOL_PEERS = Registry[ToolPeer]("tool peer", name_of=lambda p: p.name)


def register_tool_peer(peer: ToolPeer) -> ToolPeer:
    """Register ``peer`` under its name (a lab's own tool, or a role not built in)."""
    return TOOL_PEERS.register(peer)


@dataclass(frozen=True)
class ToolRun:
    """One run of a tool peer: where the tool ran, its argument list, its exit status
    (None: it did not end and was killed), its output, hil's timeline and facts."""

    peer: ToolPeer
    host: str
    argv: tuple[str, ...]
    status: int | None
    stdout: str
    stderr: str
    timeline: Timeline
    facts: Mapping[str, Any] = field(default_factory=dict)

    def failures(self) -> list[str]:
        """What went wrong: the tool's status, its ``done`` line missing, and what hil's
        side saw of its data (the peer's ``check``)."""
        found = self.peer.check(self)
        if self.status != 0:
            ended = "was killed" if self.status is None else f"exited {self.status}"
            found.append(f"{self.peer.tool} on {self.host} {ended}")
        if self.peer.done not in self.stdout:
            found.append(f"{self.peer.tool} on {self.host} never printed {self.peer.done!r}")
        return found

    def output(self) -> str:
        """The tool's command line, status and output, for the report."""
        return (
            f"$ {' '.join(self.argv)}\n(on {self.host}; status {self.status})\n"
            f"--- stdout\n{self.stdout}--- stderr\n{self.stderr}"
        )


class ToolContext:
    """hil's side of a tool peer's run: its recording, side and endpoint's addresses, and
    the tool's start (:meth:`start`), in a thread, bounded, stopped by :meth:`finish`."""

    def __init__(self, rec: Recording, peer: ToolPeer, side: str, tool_side: str) -> None:
        s = rec.session
        self.rec, self.peer, self.side = rec, peer, side
        server, client = (tool_side, side) if peer.role == "server" else (side, tool_side)
        self.args = ToolArgs(s.address(server), s.port(), s.address(client))
        self.host, self.agent, self.tool_side = s.host(tool_side), s.agent(tool_side), tool_side
        self._agents = {s.host(side): s.agent(side) for side in (side, tool_side)}
        self.argv = tuple(tools.argv(peer.tool, *peer.argv(self.args)))
        self._result: CommandResult | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the tool, recorded as a ``tool_peer`` action on its side (its own calls
        are not on the timeline); a server tool's listener is waited for."""
        params = {"argv": " ".join(self.argv)}
        self.rec.add_action(Action(controller_us(), self.tool_side, TOOL_PEER, None, params))
        self._thread = threading.Thread(target=self._run, name=f"tool-{self.peer.name}")
        self._thread.start()
        if self.peer.role == "server":
            self._listening()

    def _run(self) -> None:
        try:
            # Line-buffered: a tool killed when hil's side gave up still shows how far it got
            # (rping -v prints each ping); stdbuf execs the tool, so stop_command finds argv.
            line = tools.argv("stdbuf", "-oL")
            self._result = self.agent.run([*line, *self.argv], timeout=TOOL_TIMEOUT_S)
        except CommandTimeout:
            self._result = None

    def _listening(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self._thread is not None and not self._thread.is_alive():
                raise StepFailed(self.host, f"{self.peer.tool} ended before it listened")
            if ids_in_state(self.agent.rdma_resource_rows("cm_id"), "LISTEN", self.args.port):
                return
            time.sleep(LISTEN_POLL_S)
        raise StepFailed(self.host, f"{self.peer.tool} did not listen within {START_S:g} s")

    def connection_state(self) -> str:
        """Both hosts' TCP sockets on the tool's port (siw's unread bytes show as Recv-Q)
        and their CM ids, read while the tool still runs: which end holds what when an
        exchange stalls (a lost wakeup leaves bytes queued:
        docs/findings/siw-rtr-lost-wakeup.md)."""
        port = str(self.args.port)
        probes = (
            tools.argv("ss", "-tnoei", "state", "all", f"( sport = :{port} or dport = :{port} )"),
            tools.argv("rdma", "resource", "show", "cm_id"),
        )
        lines = []
        for host, agent in self._agents.items():
            for argv in probes:
                try:
                    got = agent.run(argv, timeout=STATE_S)
                    text = (got.stdout + got.stderr).splitlines()
                except HilError as e:
                    text = [str(e)]
                lines += [f"--- {host}: {' '.join(argv)}", *text]
        return "\n".join(lines)

    @staticmethod
    def waiting_accepts(state: str, host: str) -> list[str]:
        """``host``'s CM ids in :meth:`connection_state`'s text that hold a QP and still
        wait for ESTABLISHED (state CONNECT): a connection its end accepted and never saw
        established, the mark of siw's lost RTR wakeup."""
        _, found, after = state.partition(f"--- {host}: rdma resource show cm_id")
        rows = after.split("\n---", 1)[0].splitlines() if found else []
        return [r.strip() for r in rows if " state CONNECT " in r and " lqpn " in r]

    def finish(self, grace: float) -> tuple[int | None, str, str]:
        """The tool's status and output: it is given ``grace`` to end, then killed."""
        if self._thread is None:
            return None, "", "(not started)"
        self._thread.join(grace)
        if self._thread.is_alive():
            stop_command(self.agent, self.argv)
            self._thread.join(TOOL_TIMEOUT_S)
        got = self._result
        return (None, "", "(killed)") if got is None else (got.status, got.stdout, got.stderr)


def stop_command(agent: Agent, argv: tuple[str, ...] | list[str]) -> None:
    """Kill every process on ``agent``'s host whose whole command line is ``argv`` (a
    tool's, which names a fresh port, so it matches no other run's)."""
    pids = agent.run(tools.argv("pgrep", "-f", "-x", " ".join(argv))).stdout.split()
    for pid in pids:
        agent.run(tools.argv("kill", pid))


def run_tool_peer(s: PairSides, name: str) -> ToolRun:
    """Run the registered tool peer ``name`` across the session's pair: a server tool on
    its passive side against hil's endpoint on the active side, a client tool the other
    way round.  hil's part raising stops the tool at once; the tool's output is added to
    the error's notes."""
    peer = TOOL_PEERS[name]
    tool_side = s.passive if peer.role == "server" else s.active
    with s.recording(f"tool-{peer.name}") as rec:
        ctx = ToolContext(rec, peer, s.other(tool_side), tool_side)
        try:
            facts = peer.serve(ctx)
        except BaseException as e:
            if isinstance(e, StepFailed):
                e.add_note(ctx.connection_state())
            status, out, err = ctx.finish(0.0)
            e.add_note(ToolRun(peer, ctx.host, ctx.argv, status, out, err, rec.timeline()).output())
            raise
        status, out, err = ctx.finish(EXIT_GRACE_S)
    return ToolRun(peer, ctx.host, ctx.argv, status, out, err, rec.timeline(), facts)


# -- hil's parts ------------------------------------------------------------------------


def _connected(ctx: ToolContext) -> tuple[Endpoint, str]:
    """Start the (server) tool and connect to it from hil's side: the endpoint and id,
    ESTABLISHED, labelled ``c1``."""
    ctx.start()
    ep, tool = ctx.rec.endpoint(ctx.side), ctx.peer.tool
    conn = ep.connect(ctx.args.server, ctx.args.port, src=ctx.args.client)
    if not conn.ok or conn.id is None:
        raise StepFailed(ep.host, f"connect to {tool} failed: {conn.action.result}")
    ctx.rec.label("c1", conn.id)
    est = expect(ep, REPLY_TYPES, conn.id, f"connect to {tool}")
    if est.type != "ESTABLISHED":
        raise StepFailed(ep.host, f"connect to {tool}: got {est.brief()}, not ESTABLISHED")
    return ep, conn.id


def _accepted(ctx: ToolContext) -> tuple[Endpoint, str, str]:
    """Listen on hil's side, start the (client) tool and accept its request: the
    endpoint, the connection's id (ESTABLISHED, labelled ``c1``) and the listener's."""
    listener = steps.listen(ctx.rec, ctx.side, address=ctx.args.server, port=ctx.args.port)
    ctx.start()
    ep, tool = listener.ep, ctx.peer.tool
    req = expect(ep, "CONNECT_REQUEST", None, f"{tool}'s connect", timeout=START_S)
    ctx.rec.label("c1", req.id)
    acc = ep.accept(req.id)
    if not acc.ok:
        raise StepFailed(ep.host, f"accept of {tool} failed: {acc.action.result}")
    expect(ep, "ESTABLISHED", req.id, f"accept of {tool}")
    return ep, req.id, listener.id


def _ucmatose_client(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as ucmatose's client (cmatose.c run_client): connect, take the server's
    SENDs, send as many back; its server then disconnects, and the client answers
    DISCONNECTED with rdma_disconnect (cma_handler)."""
    ep, cm_id = _connected(ctx)
    got = ep.messages(cm_id, UCMATOSE_COUNT, UCMATOSE_SIZE, send_first=False, wait=START_S)
    expect(ep, "DISCONNECTED", cm_id, "ucmatose's disconnect")
    ep.disconnect(cm_id)
    steps.destroy(ep, cm_id)
    return dict(got.value)


def _ucmatose_server(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as ucmatose's server (cmatose.c run_server): accept, SEND first, take the
    client's replies, disconnect; the client answers with its own rdma_disconnect."""
    ep, cm_id, listener = _accepted(ctx)
    got = ep.messages(cm_id, UCMATOSE_COUNT, UCMATOSE_SIZE, send_first=True, wait=START_S)
    ep.disconnect(cm_id)
    expect(ep, "DISCONNECTED", cm_id, "ucmatose's answer to the disconnect")
    steps.destroy(ep, cm_id, listener)
    return dict(got.value)


def _cmtime_server(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as cmtime's server (cmtime.c v44, docs/storm.md): each request accepted in
    hil's worker, then each DISCONNECTED the client's disconnect step brings, counted."""
    listener = steps.listen(
        ctx.rec, ctx.side, auto="accept", address=ctx.args.server, port=ctx.args.port
    )
    ctx.start()
    ep, counts = listener.ep, {}
    for kind in ("ESTABLISHED", "DISCONNECTED"):
        got = [ep.wait(kind, None, START_S) for _ in range(CMTIME_CONNECTIONS)]
        counts[kind.lower()] = sum(e is not None for e in got)
    requests = {e.id for e in ctx.rec.events() if e.type == "CONNECT_REQUEST" and e.id}
    steps.destroy(ep, *sorted(requests), listener.id)
    return counts


def _ucmatose_data(run: ToolRun) -> list[str]:
    """Each of ucmatose's SENDs arrived whole and hil's all completed: its ``-C`` SENDs
    of ``-S`` bytes each (cmatose.c post_sends: ``message_count`` SENDs of
    ``sge.length = message_size``)."""
    facts = run.facts
    found = [f"hil's exchange stopped: {facts['error']}"] if facts.get("error") else []
    want = [UCMATOSE_SIZE] * UCMATOSE_COUNT
    if facts.get("received") != want:
        found.append(f"hil received SENDs of {facts.get('received')} bytes, not {want}")
    if facts.get("sent") != UCMATOSE_COUNT:
        found.append(f"hil's {UCMATOSE_COUNT} SENDs completed: {facts.get('sent')}")
    return found


def _cmtime_connections(run: ToolRun) -> list[str]:
    """Each of cmtime's connections reached hil ESTABLISHED and was closed (cmtime.c
    v44: every connection is connected, then disconnected, docs/storm.md)."""
    return [
        f"hil's listener saw {run.facts.get(k)} of cmtime's {CMTIME_CONNECTIONS} connections {k}"
        for k in ("established", "disconnected")
        if run.facts.get(k) != CMTIME_CONNECTIONS
    ]


def _rping_pings(run: ToolRun) -> list[str]:
    """Every ping checked on hil's side (rping.py: a client's sink against its start, as
    rping -V; a server's read against rping's text for the ping), and, against rping's
    server, each ping's text as rping printed it (``-v``: "server ping data: %s", the
    buffer it RDMA READ from hil) hil's own."""
    facts = run.facts
    found = [f"hil's rping stopped: {facts['error']}"] if facts.get("error") else []
    checks = facts.get("checks", [])
    if len(checks) != RPING_COUNT:
        found.append(f"hil checked {len(checks)} of {RPING_COUNT} pings")
    found += [
        f"ping {c['ping']}: byte {c['offset']} of {c['size']} differs"
        for c in checks
        if not c["ok"]
    ]
    if run.peer.role == "server":
        printed = [ln.split(": ", 1)[1] for ln in run.stdout.splitlines() if ln.startswith(SERVED)]
        if printed != list(facts.get("text", [])):
            found.append(f"rping printed the pings {printed}, not hil's {facts.get('text')}")
    return found


def _rping_client(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as rping's client (rping.c rping_test_client): connect, ping, disconnect; its
    server ends when it sees the DISCONNECTED."""
    ep, cm_id = _connected(ctx)
    got = ep.rping(cm_id, "client", RPING_COUNT, RPING_SIZE, wait=START_S)
    ep.disconnect(cm_id)
    expect(ep, "DISCONNECTED", cm_id, "the close of the connection to rping")
    steps.destroy(ep, cm_id)
    return dict(got.value)


def _rping_server(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as rping's server (rping.c rping_test_server): accept, serve its pings until
    its client disconnects (after its ``-C`` pings)."""
    ep, cm_id, listener = _accepted(ctx)
    got = ep.rping(cm_id, "server", RPING_COUNT, wait=START_S)
    try:
        expect(ep, "DISCONNECTED", cm_id, "rping's disconnect after its pings")
    except StepFailed as e:
        # Which ping hil's side stopped at tells a stalled rping from one hil starved.
        e.add_note(f"hil's side of the pings: {got.action.result}, {dict(got.value)}")
        raise
    steps.destroy(ep, cm_id, listener)
    return dict(got.value)


def _send_bw_server(ctx: ToolContext) -> Mapping[str, Any]:
    """hil as ib_send_bw -R's server (docs/notes/perftest-R-protocol.md): accept its
    control connection and serve its setup exchanges, accept its data connection, serve
    the rest around its SENDs (credits written back), then answer the client's disconnect
    of the data connection; the control connection ends with the client's exit."""
    ep, control, listener = _accepted(ctx)
    setup = _send_bw_phase(ep, ep.send_bw(control, "setup", wait=START_S), "setup")
    req = expect(ep, "CONNECT_REQUEST", None, "ib_send_bw's data connection", timeout=START_S)
    ctx.rec.label("c2", req.id)
    acc = ep.accept(req.id)
    if not acc.ok:
        raise StepFailed(ep.host, f"accept of ib_send_bw's data connection: {acc.action.result}")
    expect(ep, "ESTABLISHED", req.id, "accept of ib_send_bw's data connection")
    out = ep.send_bw(control, "run", data_id=req.id, iters=SEND_BW_ITERS, wait=START_S)
    run = _send_bw_phase(ep, out, "run")
    expect(ep, "DISCONNECTED", req.id, "ib_send_bw's disconnect of its data connection")
    ep.disconnect(req.id)
    steps.destroy(ep, req.id)
    expect(ep, "DISCONNECTED", control, "the close of ib_send_bw's control connection")
    steps.destroy(ep, control, listener)
    return {
        **{k: setup.get(k) for k in ("version", "cycle_buffer", "cache_line", "mtu")},
        **{k: run.get(k) for k in ("dest", "received", "credits")},
        "control": [setup.get("control"), run.get("control")],
    }


def _send_bw_phase(ep: Endpoint, out: Outcome, phase: str) -> dict[str, Any]:
    """A send_bw phase's facts; StepFailed when it stopped: the tool then waits for what
    hil did not send (the run kills it)."""
    facts = dict(out.value)
    if not out.ok or facts.get("error"):
        why = facts.get("error") or out.action.result
        raise StepFailed(ep.host, f"ib_send_bw's {phase} exchange: {why} (so far: {facts})")
    return facts


def _send_bw_data(run: ToolRun) -> list[str]:
    """What ib_send_bw's client sent as perftest 4.5 sends it: each control message's
    length in order, its version, page and cache line sizes, an MTU digit, a PSN of 24
    bits and a credit slot; its ``-n`` SENDs of ``-s`` bytes, and the credits hil wrote
    back after the receives perftest's server writes them."""
    facts, found = run.facts, []
    if list(facts.get("control", [])) != [list(c) for c in SEND_BW_CONTROL]:
        found.append(
            f"ib_send_bw's control messages were {facts.get('control')} bytes, "
            f"not {[list(c) for c in SEND_BW_CONTROL]}"
        )
    if facts.get("version") != SEND_BW_VERSION:
        found.append(f"ib_send_bw sent version {facts.get('version')!r}, not {SEND_BW_VERSION!r}")
    for key, want in (("cycle_buffer", "a page size"), ("cache_line", "a cache line size")):
        value = facts.get(key, 0)
        if not (isinstance(value, int) and value > 0 and value & (value - 1) == 0):
            found.append(f"ib_send_bw's {key} {value!r} is not {want} (a power of 2)")
    if facts.get("mtu") not in ("1", "2", "3", "4", "5"):
        found.append(f"ib_send_bw's MTU {facts.get('mtu')!r} is no enum ibv_mtu (1..5)")
    dest = facts.get("dest") or {}
    if not (0 <= dest.get("psn", -1) <= 0xFFFFFF and dest.get("rkey") and dest.get("vaddr")):
        found.append(f"ib_send_bw's QP parameters {dest} lack a 24-bit PSN or a credit slot")
    sizes = [SEND_BW_SIZE] * SEND_BW_ITERS
    if facts.get("received") != sizes:
        found.append(f"hil received SENDs of {facts.get('received')} bytes, not {sizes}")
    credits = [n for n in range(1, SEND_BW_ITERS + 1) if send_bw_credit_after(n, SEND_BW_ITERS)]
    if facts.get("credits") != credits:
        found.append(f"hil wrote the credits {facts.get('credits')}, not {credits}")
    return found


def send_bw_credit_after(n: int, iters: int) -> bool:
    """Whether perftest's server writes a credit after its ``n``-th receive of ``iters``
    (run_iter_bw_server); the agent's ``credit_after`` (cm/perftest.py), which the
    controller may not import (tests/test_layers.py): the unit tests hold them equal."""
    depth = min(512, iters)
    depth += depth % 2
    return (n % depth) % max(1, depth // 3) == 0


def _send_bw_connect(a: ToolArgs) -> list[str]:
    return [
        "-R", "-F", "-p", str(a.port), "-n", str(SEND_BW_ITERS), "-s", str(SEND_BW_SIZE),
        "--source_ip", a.client, a.server,
    ]  # fmt: skip


def _rping_listen(a: ToolArgs) -> list[str]:
    # -S too: rping's server READs the advertised length into its own -S-byte buffer
    # (rping_test_server), so a smaller one fails the READ (IBV_WC_LOC_PROT_ERR, seen).
    return ["-s", "-a", a.server, "-p", str(a.port), "-S", str(RPING_SIZE), "-v"]


def _rping_connect(a: ToolArgs) -> list[str]:
    return ["-c", "-a", a.server, "-I", a.client, "-p", str(a.port), *RPING_PINGS, "-V", "-v"]


def _ucmatose_listen(a: ToolArgs) -> list[str]:
    return ["-b", a.server, "-p", str(a.port), *UCMATOSE_DATA]


def _ucmatose_connect(a: ToolArgs) -> list[str]:
    return ["-s", a.server, "-b", a.client, "-p", str(a.port), *UCMATOSE_DATA]


def _cmtime_connect(a: ToolArgs) -> list[str]:
    return ["-s", a.server, "-b", a.client, "-p", str(a.port), "-c", str(CMTIME_CONNECTIONS)]


RDMACM = "rdma-core v44 librdmacm/examples/"
for _peer in (
    ToolPeer(
        "ucmatose-server",
        "ucmatose",
        "server",
        _ucmatose_listen,
        _ucmatose_client,
        _ucmatose_data,
        "data transfers complete",
        RDMACM + "cmatose.c run_server",
    ),
    ToolPeer(
        "ucmatose-client",
        "ucmatose",
        "client",
        _ucmatose_connect,
        _ucmatose_server,
        _ucmatose_data,
        "data transfers complete",
        RDMACM + "cmatose.c run_client",
    ),
    ToolPeer(
        "cmtime-client",
        "cmtime",
        "client",
        _cmtime_connect,
        _cmtime_server,
        _cmtime_connections,
        "disconnect",
        RDMACM + "cmtime.c (v44.0: docs/storm.md)",
    ),
    ToolPeer(
        "rping-server",
        "rping",
        "server",
        _rping_listen,
        _rping_client,
        _rping_pings,
        f"{SERVED}rdma-ping-{RPING_COUNT - 1}: ",
        RDMACM + "rping.c rping_test_server",
    ),
    ToolPeer(
        "rping-client",
        "rping",
        "client",
        _rping_connect,
        _rping_server,
        _rping_pings,
        f"ping data: rdma-ping-{RPING_COUNT - 1}: ",
        RDMACM + "rping.c rping_test_client (-V: its memcmp of sink and start)",
    ),
    ToolPeer(
        "ib_send_bw-client",
        "ib_send_bw",
        "client",
        _send_bw_connect,
        _send_bw_server,
        _send_bw_data,
        SEND_BW_DONE,
        "perftest v4.5-0.17 src/send_bw.c main, perftest_communication.c "
        "(docs/notes/perftest-R-protocol.md)",
    ),
):
    register_tool_peer(_peer)
