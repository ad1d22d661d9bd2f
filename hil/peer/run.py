"""Run a peer scenario against a DUT on a set-up pair, and judge it (issue 26 items 2-3).

    outcome = run_scenario(cm, dut="a", scenario=SCENARIOS.get("send-bad-crc"))
    outcome.verdict.ok, outcome.verdict.to_text()

``cm`` is the pair's :class:`hil.cm.sides.PairSides` (a CMSession: its hosts' agents,
data addresses, clocks and recordings); the DUT is the host on side ``dut``, the peer
runs on the host the link's ``peer:`` names for it, with that entry's source address
(:func:`hil.inventory.peers.peer_host_for`), by default on the other host of the pair
from its port's address (guest A DUT / guest B peer on the lab, then the other way
round).  A ``peer:`` host outside the pair is refused for now (:func:`peer_of`).

- The peer (:func:`hil.agent.peerrun.run_peer`) runs the scenario's own steps on its
  host's agent: active, it connects from its address to the DUT's data address of the
  session's family and a fresh port; passive, it listens on its address and that port.
- Each ``dut`` step runs here on the DUT's normal CM endpoint (:mod:`hil.cm.endpoint`,
  through its agent), in a :class:`~hil.cm.recording.Recording`, so its actions and
  CM events land on the test's timeline; the action is looked up in :data:`ACTIONS`
  (a :class:`hil.registry.Registry`: a lab adds its own there).  A DUT action that
  fails is noted and the later ones are skipped (the peer runs on, its record kept).
- Then the DUT's CM events are collected and the run judged by :mod:`hil.peer.judge`
  against :mod:`hil.judge.peerproviders` for the DUT's provider.

Names this module adds to the shared vocabulary: DUT action args ``length``
(post_recv), ``private_data`` (reject, hex), ``ird``/``ord`` (accept, connect),
``payload`` (recv, hex: the bytes the receive must hold).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hil.agent.peerrun import PeerResult, run_peer
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.endpoint import Endpoint
from hil.cm.recording import Recording
from hil.cm.sides import PairSides
from hil.errors import InputError
from hil.inventory.peers import peer_host_for
from hil.judge.peerproviders import expect
from hil.judge.timeline import RAW_TCP, Action, Timeline
from hil.peer.judge import Observed, PeerVerdict, judge
from hil.peer.scenario import Expect, Scenario, Sleep, to_agent
from hil.registry import Registry

# Lab policy: what the DUT does at once (a CONNECT_REQUEST after the peer's MPA request,
# a receive's completion, the cm events after the peer's last frame) within 5 s on any
# lab host, as hil/peer/builtin.py's PROMPT_S.
PROMPT_S = 5.0
# After the peer's steps: how long it keeps recording what the DUT sends (a close
# where none is expected shows in that time).
DRAIN_S = 1.0
# A peer segment's time past the scenario's own waits (the agent's start of the peer,
# the connect; TCG guests).
SEGMENT_SLACK_S = 30.0


class DutFailed(Exception):
    """A DUT action did not get what it needed (no CONNECT_REQUEST, a failed accept)."""


@dataclass
class DutState:
    """The DUT's side of one scenario run: its endpoint, listener, connection, and the
    peer's address and port (where a passive peer listens)."""

    rec: Recording
    ep: Endpoint
    side: str
    port: int
    peer_address: str
    listener: steps.Listener | None = None
    conn_id: str | None = None
    qp: Mapping[str, int] = field(default_factory=dict)
    troubles: list[str] = field(default_factory=list)

    def conn(self, action: str) -> str:
        """The DUT's connection's id, or DutFailed when there is none yet."""
        if self.conn_id is None:
            raise DutFailed(f"{action}: the DUT has no connection (no accept or connect before)")
        return self.conn_id


DutAction = Callable[[DutState, Mapping[str, Any]], None]


@dataclass(frozen=True)
class NamedAction:
    """A DUT action under its scenario name."""

    name: str
    run: DutAction


ACTIONS = Registry[NamedAction]("DUT action", name_of=lambda a: a.name)


def dut_action(name: str) -> Callable[[DutAction], DutAction]:
    """Register a DUT action under ``name`` (a decorator)."""

    def register(fn: DutAction) -> DutAction:
        ACTIONS.register(NamedAction(name, fn))
        return fn

    return register


@dut_action("listen")
def _listen(d: DutState, args: Mapping[str, Any]) -> None:
    d.listener = steps.listen(d.rec, d.side, ep=d.ep, port=d.port)


@dut_action("post_recv")
def _post_recv(d: DutState, args: Mapping[str, Any]) -> None:
    """Nothing to do: the CM endpoint posts its receives (each of its whole 64 KiB
    buffer, hil/agent/remote/cm/worker.py QP_DEPTH) with the QP it makes at accept
    or connect, before the connection can carry a SEND."""


def _request(d: DutState, action: str) -> str:
    got = d.ep.wait("CONNECT_REQUEST", None, PROMPT_S)
    if got is None:
        raise DutFailed(f"{action}: no CONNECT_REQUEST on the DUT within {PROMPT_S:g} s")
    return got.id


@dut_action("accept")
def _accept(d: DutState, args: Mapping[str, Any]) -> None:
    cm_id = _request(d, "accept")
    out = d.ep.accept(cm_id, b"", int(args.get("ird", 1)), int(args.get("ord", 1)))
    if not out.ok:
        raise DutFailed(f"accept: {out.action.result}")
    d.conn_id, d.qp = cm_id, out.value.get("qp", {})


@dut_action("reject")
def _reject(d: DutState, args: Mapping[str, Any]) -> None:
    cm_id = _request(d, "reject")
    out = d.ep.reject(cm_id, bytes.fromhex(str(args.get("private_data", ""))))
    if not out.ok:
        raise DutFailed(f"reject: {out.action.result}")


@dut_action("connect")
def _connect(d: DutState, args: Mapping[str, Any]) -> None:
    s = d.rec.session
    out = d.ep.connect(
        d.peer_address,
        d.port,
        src=s.address(d.side),
        ird=int(args.get("ird", 1)),
        ord=int(args.get("ord", 1)),
    )
    if not out.ok or out.id is None:
        raise DutFailed(f"connect: {out.action.result}")
    d.conn_id, d.qp = out.id, out.value.get("qp", {})


@dut_action("reg_mr")
def _reg_mr(d: DutState, args: Mapping[str, Any]) -> None:
    """The connection's buffer is registered with every access right at accept or
    connect; its STag (rkey) is recorded on the timeline as this action's param."""
    stag = d.qp.get("rkey")
    if stag is None:
        raise DutFailed("reg_mr: the DUT has no QP yet (no accept or connect before)")
    d.rec.controller_action(d.side, "reg_mr", controller_us(), stag=stag)


@dut_action("recv")
def _recv(d: DutState, args: Mapping[str, Any]) -> None:
    out = d.ep.received(d.conn("recv"), wait=PROMPT_S)
    got = out.value
    if not out.ok or got.get("status") != 0:
        raise DutFailed(f"recv: no receive completed ({got.get('error') or out.action.result})")
    want = str(args.get("payload", "")).lower()
    if want and got.get("data") != want:
        raise DutFailed(f"recv: the DUT received {got.get('data')!r}, not {want!r}")


@dut_action("close")
def _close(d: DutState, args: Mapping[str, Any]) -> None:
    out = d.ep.disconnect(d.conn("close"))
    if not out.ok:
        raise DutFailed(f"close: {out.action.result}")


@dataclass(frozen=True)
class PeerRun:
    """One scenario's run: the hosts, the peer's result, the DUT's timeline, the verdict."""

    scenario: Scenario
    dut: str
    peer: str
    result: PeerResult
    timeline: Timeline
    verdict: PeerVerdict


def peer_of(cm: PairSides, dut: str) -> tuple[str, str]:
    """The side whose host runs the peer against side ``dut``, and the address the peer
    connects and listens from: the link's ``peer:`` entry for the DUT's host and its
    source of the session's family, else that host's port address (the lab default: the
    other host, from its port's address).  InputError for a ``peer:`` host outside the
    pair: it would need an agent of its own, which a pair run does not open yet."""
    host, source = peer_host_for(cm.pair, cm.host(dut), cm.family)
    if host.name not in (cm.host("a"), cm.host("b")):
        other = cm.host(cm.other(dut))
        raise InputError(
            f"link {cm.pair.name}'s peer: names host {host.name} to run the reference peer "
            f"against {cm.host(dut)}: a peer host outside the pair is not supported yet (a "
            f"pair run opens agents on its own two hosts only); name the pair's other host "
            f"instead ({{host: {other}, source: ADDRESS}}), or drop that peer: entry"
        )
    side = cm.side_of(host.name)
    return side, str(source) if source is not None else cm.address(side)


def run_scenario(cm: PairSides, dut: str, scenario: Scenario) -> PeerRun:
    """Run ``scenario`` with the DUT on side ``dut`` and the peer where :func:`peer_of`
    says; judged against the DUT host's provider (see the module doc)."""
    peer, address = peer_of(cm, dut)
    port = cm.port()
    provider = cm.profile.of(cm.host(dut)).name
    with cm.recording(f"peer-{scenario.name}") as rec:
        state = DutState(rec, rec.endpoint(dut), dut, port, address)
        steps_data = to_agent(scenario)
        target = cm.address(dut) if scenario.role == "active" else address
        result = run_peer(
            cm.agent(peer),
            scenario.role,
            target,
            port,
            steps_data,
            _segment_s(scenario),
            on_dut=lambda i, step: _on_dut(state, step),
            drain_s=DRAIN_S,
            src=address if scenario.role == "active" else None,
        )
        seen = _observed(state, result, provider, scenario)
        _not_for_the_wire_judge(rec, peer, scenario, result)
    verdict = judge(scenario.name, scenario.expectation, provider, seen)
    return PeerRun(scenario, cm.host(dut), cm.host(peer), result, rec.timeline(), verdict)


def _on_dut(state: DutState, step: Mapping[str, Any]) -> None:
    """Run one DUT step; a failure is noted (the later DUT steps skipped) so that the
    peer runs on and its record is kept."""
    if state.troubles:
        return
    try:
        ACTIONS[str(step["action"])].run(state, step.get("args", {}))
    except (DutFailed, steps.StepFailed) as e:
        state.troubles.append(f"DUT action {step['action']}: {e}")


def _observed(state: DutState, result: PeerResult, provider: str, scenario: Scenario) -> Observed:
    """The DUT's cm events (once the ones its provider expects had time to come) and
    the run's troubles, beside the peer's record."""
    wanted = expect(provider, scenario.expectation).cm_events
    if wanted:
        state.ep.wait(wanted[-1].upper(), None, PROMPT_S)
    state.ep.collect()
    events = tuple(e.type.lower() for e in state.rec.events() if e.side == state.side)
    troubles = list(state.troubles)
    if result.unmet is not None:
        troubles.append(f"step {result.unmet['step'] + 1}: {result.unmet['why']}")
    if result.error:
        troubles.append(f"peer: {result.error}")
    return Observed(tuple(result.record), events, tuple(troubles))


def _not_for_the_wire_judge(
    rec: Recording, peer: str, scenario: Scenario, result: PeerResult
) -> None:
    """The peer's connection as a ``RAW_TCP`` action (the wire judge leaves it out: its
    frames are the scenario's on purpose, hil/wire/judge.py), from its first frame on;
    ``local``/``remote`` name the connection's active and passive ends."""
    if not result.remote:
        return  # never connected: nothing on the wire to leave out
    ends = (result.local, result.remote)
    local, remote = ends if scenario.role == "active" else ends[::-1]
    first_ns = min((e["t_ns"] for e in result.record), default=0)
    t_us = rec.session.offset(peer).offset_us + first_ns // 1000
    params = {"local": local, "remote": remote, "probe": f"peer scenario {scenario.name}"}
    rec.add_action(Action(t_us, peer, RAW_TCP, None, params))


def _segment_s(scenario: Scenario) -> float:
    """A peer segment's timeout: every wait of the scenario, plus the slack."""
    waits = [s.within for s in scenario.steps if isinstance(s, Expect)]
    waits += [s.seconds for s in scenario.steps if isinstance(s, Sleep)]
    return sum(waits) + DRAIN_S + SEGMENT_SLACK_S
