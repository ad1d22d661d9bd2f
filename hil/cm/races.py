"""Race sweeps: two actions swept against each other, each round classified by what happened.

A race test names two actions and the event between them.  Here: the active
side's ``rdma_destroy_id`` against the CONNECT_REPLY of its connect (the
passive listener accepts in its worker).  The active side runs each round as
a host-side script (:mod:`hil.cm.scenario`): connect, then destroy a set
delay after ``rdma_connect`` returned, with no controller round trip between.
The delays sweep a window around the reply's measured latency in steps,
``rounds`` per step.

Each round is classified by the order that actually happened, read from the
stamps, never from the delay it asked for (:func:`classify`):

- ``reply_first``: the reply was delivered to the application before the
  destroy began (one host's clock: exact);
- ``in_flight``: the passive side had sent the reply (its rdma_accept had
  returned) before the destroy began, and it was not delivered before it:
  the destroy met the reply on its way or while it was being delivered;
- ``destroy_first``: the destroy began before the passive side began to
  send the reply (or it never sent one);
- ``unclear``: the two hosts' stamps are closer than the clocks' uncertainty.

The last three compare two hosts' clocks, so they are certain only beyond
the summed offset uncertainty.  A sweep that never reached an order it exists
for is a failure, "race window not reached" (:meth:`RaceSweep.not_reached`),
not a pass.  Every round is in one timeline the contract judges.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from hil.cm import steps
from hil.cm.registry import sequence
from hil.cm.scenario import ScenarioRun, Script, Step, StepRun, run
from hil.cm.steps import StepFailed
from hil.errors import InputError
from hil.judge.timeline import Action, Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

Order = Literal["destroy_first", "in_flight", "reply_first", "unclear"]
ORDERS: tuple[Order, ...] = ("destroy_first", "in_flight", "reply_first")
# The orders a sweep reaches on the TCG lab in every run.  in_flight is certain only
# when the reply's delivery lags its sending by more than the clocks' uncertainty
# (+/- 5-7 ms there): some runs, one direction, not all (docs/cm-engine.md).
CERTAIN_ORDERS: tuple[Order, ...] = ("destroy_first", "reply_first")
CALIBRATION_ROUNDS = 3
CLOCK_ROUNDS = 40  # round trips per host offset: the tightest bounds the cross-host orders
LINGER_S = 0.2  # after each script: a late event for a destroyed id would come by then
SETTLE_FETCHES = 10  # at most this many half-second fetches of the passive side's last events


@dataclass(frozen=True)
class Round:
    """One round: what it asked for, and the order that happened (``why``: the stamps)."""

    label: str
    offset_us: int  # from the reply's calibrated latency
    delay_us: int  # destroy this long after rdma_connect returned (asked)
    order: Order
    why: str
    active_id: str | None
    passive_id: str | None
    destroy_blocked_us: int | None


@dataclass(frozen=True)
class _Asked:
    """A round as it was asked for: its tag, its steps' place in the script that ran it."""

    tag: str
    index: int  # its connect is the script's step 2 * index, its destroy the next
    offset_us: int
    delay_us: int
    run: ScenarioRun


@dataclass(frozen=True)
class RaceSweep:
    """A sweep's rounds, the orders it exists for, and the judged timeline of them all."""

    race: str
    rounds: tuple[Round, ...]
    wanted: tuple[Order, ...]
    reply_latency_us: int
    uncertainty_us: int
    timeline: Timeline

    def counts(self) -> dict[Order, int]:
        """How many rounds hit each order (every order, 0 included)."""
        seen = Counter(r.order for r in self.rounds)
        return {o: seen.get(o, 0) for o in (*ORDERS, "unclear")}

    def summary(self) -> str:
        """One line: the race, the rounds, the window and the count of each order."""
        offsets = [r.offset_us for r in self.rounds]
        window = f"{min(offsets) / 1e3:+.1f}..{max(offsets) / 1e3:+.1f} ms" if offsets else "-"
        counts = ", ".join(f"{o} {n}" for o, n in self.counts().items())
        return (
            f"{self.race}: {len(self.rounds)} rounds, offsets {window} around the reply's "
            f"{self.reply_latency_us / 1e3:.1f} ms, clocks +/- {self.uncertainty_us / 1e3:.1f} ms"
            f": {counts}"
        )

    def not_reached(self) -> str | None:
        """ "race window not reached: ..." when an order it exists for was never hit."""
        missing = [o for o in self.wanted if not self.counts()[o]]
        if not missing:
            return None
        return f"race window not reached: no round {' or '.join(missing)} ({self.summary()})"

    def table(self) -> str:
        """Every round, one a line: label, offset, delay, order and why."""
        return "\n".join(
            f"{r.label} offset {r.offset_us:+d} µs delay {r.delay_us} µs: {r.order} ({r.why})"
            for r in self.rounds
        )


def classify(
    destroy: StepRun, reply: Event | None, accept: Action | None, uncertainty_us: int
) -> tuple[Order, str]:
    """The order of a destroy and its connect's reply, from the stamps (see the module)."""
    if destroy.t_us is None or destroy.host_t_us is None:
        raise InputError(f"round's destroy never ran ({destroy.result})")
    if reply is not None and reply.host_t_us <= destroy.host_t_us:
        ahead = destroy.host_t_us - reply.host_t_us
        return "reply_first", f"{reply.type} delivered {ahead} µs before the destroy"
    if accept is None:
        return "destroy_first", "the passive side never sent a reply"
    before = accept.t_us - destroy.t_us  # > 0: the destroy began before the accept did
    after = destroy.t_us - accept.end_us  # > 0: the accept had returned when it began
    clocks = f"clocks +/- {uncertainty_us} µs"
    if before > uncertainty_us:
        return "destroy_first", f"destroy {before} µs before the peer's accept began ({clocks})"
    if after > uncertainty_us:
        return "in_flight", f"destroy {after} µs after the peer's accept returned ({clocks})"
    return "unclear", f"destroy {-before} µs after the accept began, {clocks}"


def sweep_destroy_vs_reply(
    s: PairSides,
    window_us: int = 40_000,
    step_us: int = 10_000,
    rounds: int = 2,
    wanted: tuple[Order, ...] = ORDERS,
) -> RaceSweep:
    """Sweep the destroy over ``[-window_us, +window_us]`` around the reply's latency
    (delays below 0 run at 0: right after rdma_connect), ``rounds`` per step."""
    if window_us < 0 or step_us <= 0 or not 1 <= rounds <= 100:
        raise InputError("window_us >= 0, step_us > 0 and rounds 1..100, please")
    with s.recording("race-destroy-vs-reply") as rec:
        # Before any endpoint takes its host's offset: the orders across hosts are
        # certain only beyond the offsets' uncertainty, so measure them tightly.
        s.refresh_offsets(CLOCK_ROUNDS)
        listener = steps.listen(rec, s.passive, auto="accept", backlog=16)
        active = rec.endpoint(s.active)
        latency = _calibrate(rec, active, listener)
        asked: list[_Asked] = []
        for offset in range(-window_us, window_us + 1, step_us):
            delay = max(0, latency + offset)
            tags = [f"hil-race-{len(asked) + i:04d}" for i in range(rounds)]
            got = _rounds(rec, active, listener, tags, delay)
            asked += [_Asked(tag, i, offset, delay, got) for i, tag in enumerate(tags)]
        # The passive side's requests, accepts and closes of the last rounds.
        for _ in range(SETTLE_FETCHES):
            if not listener.ep.collect(0.5):
                break
        _label(rec, asked)
        steps.destroy(listener.ep, *listener.ep.handles())
    tl = rec.timeline()
    clocks = tl.uncertainty_us(*tl.pair)
    done = tuple(_round(tl, a, clocks) for a in asked)
    return RaceSweep("destroy vs CONNECT_REPLY", done, wanted, latency, clocks, tl)


@sequence
def race_destroy_reply(
    s: PairSides, window_us: int = 40_000, step_us: int = 10_000, rounds: int = 2
) -> Timeline:
    """Sweep rdma_destroy_id against its connect's reply; rounds counted per order."""
    sweep = sweep_destroy_vs_reply(s, window_us, step_us, rounds)
    metrics = {f"rounds_{o}": float(n) for o, n in sweep.counts().items()}
    metrics["reply_latency_us"] = float(sweep.reply_latency_us)
    metrics["clock_uncertainty_us"] = float(sweep.uncertainty_us)
    return replace(sweep.timeline, metrics={**sweep.timeline.metrics, **metrics})


def _dial(rec: Recording, listener: Listener, tag: str) -> dict[str, object]:
    s = rec.session
    return {
        "dst": s.address(listener.ep.side),
        "port": listener.port,
        "src": s.address(s.active),
        "private_data": tag.encode().hex(),
    }


def _calibrate(rec: Recording, active: Endpoint, listener: Listener) -> int:
    """The median time from rdma_connect's return to the reply's delivery (µs)."""
    took = []
    for i in range(CALIBRATION_ROUNDS):
        tag = f"hil-race-cal{i}"
        got = run(
            active,
            Script(
                (
                    Step("connect", name="c", params=_dial(rec, listener, tag)),
                    Step("destroy", id_of="c", on="ESTABLISHED", on_id_of="c", wait_s=10.0),
                ),
            ),
        )
        connect, destroy = got.steps
        if not destroy.ran or destroy.event is None or connect.host_t_us is None:
            raise StepFailed(
                active.host,
                f"race calibration: no ESTABLISHED for {tag} (connect {connect.result}, "
                f"destroy {destroy.result})",
            )
        rec.label(tag, connect.id)
        took.append(destroy.event.host_t_us - connect.host_t_us - (connect.us or 0))
    return int(statistics.median(took))


def _rounds(
    rec: Recording, active: Endpoint, listener: Listener, tags: list[str], delay_us: int
) -> ScenarioRun:
    script: list[Step] = []
    for i, tag in enumerate(tags):
        script.append(Step("connect", name=f"c{i}", params=_dial(rec, listener, tag)))
        script.append(Step("destroy", id_of=f"c{i}", after_us=delay_us))
    bound = steps.waits(rec.session).destroy_s * len(tags)
    return run(active, Script(tuple(script), linger_s=LINGER_S, deadline_s=bound))


def _label(rec: Recording, asked: list[_Asked]) -> None:
    """Tie each round's two ids together under its tag (the passive one by private data)."""
    requests = [e for e in rec.events() if e.type == "CONNECT_REQUEST"]
    for a in asked:
        connect = a.run.steps[2 * a.index]
        request = next((e for e in requests if e.private_bytes.startswith(a.tag.encode())), None)
        rec.label(a.tag, connect.id, request.id if request else None)


def _round(tl: Timeline, a: _Asked, clocks: int) -> Round:
    connect, destroy = a.run.steps[2 * a.index], a.run.steps[2 * a.index + 1]
    mine = tl.events_of_conn(a.tag)
    reply = next((e for e in mine if e.id == connect.id and e.type in steps.REPLY_TYPES), None)
    request = next((e for e in mine if e.type == "CONNECT_REQUEST"), None)
    accept = next(
        (x for x in tl.actions if request and x.id == request.id and x.name == "accept"), None
    )
    if not destroy.ran:
        order: Order = "unclear"
        why = f"connect {connect.result}, destroy {destroy.result}: the round did not race"
    else:
        order, why = classify(destroy, reply, accept, clocks)
    return Round(
        a.tag,
        a.offset_us,
        a.delay_us,
        order,
        why,
        connect.id,
        request.id if request else None,
        destroy.us,
    )
