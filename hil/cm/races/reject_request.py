"""Race: the passive side's ``rdma_reject`` of one request against another's upcall.

A listener's requests meet in the kernel: on siw each request's MPA request
is processed by ``siw_cm_work_handler``, which marks the listening endpoint
in use, runs ``siw_proc_mpareq`` (whose ``siw_cm_upcall`` is the
CONNECT_REQUEST upcall into iwcm and cma) and then drops the request's
reference on the listener (6.1: drivers/infiniband/sw/siw/siw_cm.c); cma
holds the listener's handler mutex over the upcall, while ``rdma_reject``
of an earlier request runs under that request's own.  This race puts a
reject on the passive host against the next request's upcall on the same
listener.  (A reject against its own request's upcall cannot be placed from
user space: the request is known only once the upcall has queued it, and
siw_reject waits for the request's endpoint to be released by the work
handler; the reject's duration, ``us``, is recorded.)

Each round has its own listener (the passive host's script listens, then
rejects the first request the moment it is delivered, then the second, then
destroys both children and the listener).  Two active endpoints connect to
it, the second ``gap`` after the first (``gap = window + offset``, so the
offsets sweep gaps of 0 .. 2 * window); all scripts start together.

A round is classified on the passive host's clock (exact, :func:`classify`)
by where the second request's delivery fell against the first one's reject:

- ``upcall_first``: delivered before the reject began;
- ``during_reject``: delivered while rdma_reject ran;
- ``reject_first``: delivered after rdma_reject returned;
- ``unclear``: a request or the reject did not happen.

The contract judges every round: both active sides get REJECTED with the
profile's status, no event after a destroy, nothing leaked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.races.conns import dial_port, request_of
from hil.cm.races.core import (
    UNCLEAR,
    Budget,
    Race,
    RaceSweep,
    Round,
    cross_host_uncertainty,
    drive,
    register,
)
from hil.cm.scenario import LEAD_S, ScenarioRun, Script, Step, StepRun, together
from hil.judge.timeline import Event

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

ORDERS = ("during_reject", "reject_first", "upcall_first")
# during_reject needs the second delivery inside one rdma_reject call (tens to hundreds
# of µs on the TCG lab): counted, asked for by the full sweep only.
CERTAIN = ("reject_first", "upcall_first")
LISTEN_AHEAD_US = 50_000  # a round's listener is up this long before its connects
ROUND_US = 200_000  # one round's connects (up to 40 ms each), rejects and destroys, then the next
START_MARGIN_US = 100_000  # past together()'s common start
WAIT_S = 5.0  # a reject step's wait for its request
FULL = Budget(5_000, 250, rounds=2)
STEPS_PER_ROUND = 6  # listen, reject, reject, destroy, destroy, destroy


@dataclass(frozen=True)
class _Asked:
    tags: tuple[str, str]
    offset_us: int
    gap_us: int
    first: StepRun  # the connect of tags[0]
    second: StepRun  # the connect of tags[1]
    reject: StepRun  # the reject of the request delivered first


def classify(reject: StepRun, second: Event | None) -> tuple[str, str]:
    """Where the second request's delivery fell against the first one's reject."""
    if reject.host_t_us is None or not reject.ok:
        return UNCLEAR, f"the first request's reject: {reject.result}"
    if second is None:
        return UNCLEAR, "the second request was never delivered"
    begin, end = reject.host_t_us, reject.host_t_us + (reject.us or 0)
    if second.host_t_us < begin:
        return "upcall_first", f"second request delivered {begin - second.host_t_us} µs before"
    if second.host_t_us <= end:
        into = second.host_t_us - begin
        return (
            "during_reject",
            f"second request delivered {into} µs into the {end - begin} µs reject",
        )
    return "reject_first", f"second request delivered {second.host_t_us - end} µs after"


def sweep_reject_vs_request(
    s: PairSides, budget: Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> RaceSweep:
    """Sweep the gap between two requests to one listener whose first is rejected at once."""
    with s.recording("race-reject-vs-request") as rec:
        passive = rec.endpoint(s.passive)
        actives = (rec.endpoint(s.active), rec.endpoint(s.active))
        asked: list[_Asked] = []

        def batch(offset: int, n: int) -> None:
            got = _rounds(rec, actives, passive, len(asked), offset, budget.window_us + offset, n)
            asked.extend(got)
            _settle(rec, actives, passive, got)

        early = drive(budget, wanted, batch, lambda: _classified(rec, asked))
        steps.destroy(passive, *passive.handles())
    tl = rec.timeline()
    return RaceSweep(
        RACE, _classified(rec, asked), wanted, cross_host_uncertainty(tl), tl,
        f"a {budget.window_us / 1e3:.1f} ms gap between the requests", early,
    )  # fmt: skip


def _rounds(
    rec: Recording,
    actives: tuple[Endpoint, Endpoint],
    passive: Endpoint,
    first_tag: int,
    offset: int,
    gap: int,
    n: int,
) -> list[_Asked]:
    s = rec.session
    start = controller_us() + int(LEAD_S * 1e6) + START_MARGIN_US + LISTEN_AHEAD_US
    one: list[Step] = []
    two: list[Step] = []
    b: list[Step] = []
    tags = []
    for i in range(n):
        t, port = start + i * ROUND_US, s.port()
        pair = (f"hil-race-{first_tag + i:04d}a", f"hil-race-{first_tag + i:04d}b")
        tags.append(pair)
        listen = {"address": s.address(s.passive), "port": port, "backlog": 4}
        b += [
            Step("listen", name=f"l{i}", params=listen, at_us=t - LISTEN_AHEAD_US),
            Step("reject", name=f"r{i}", id_of="event", on="CONNECT_REQUEST", wait_s=WAIT_S),
            Step("reject", name=f"q{i}", id_of="event", on="CONNECT_REQUEST", wait_s=WAIT_S),
            Step("destroy", id_of=f"r{i}"),
            Step("destroy", id_of=f"q{i}"),
            Step("destroy", id_of=f"l{i}"),
        ]
        for steps_of, tag, at in ((one, pair[0], t), (two, pair[1], t + gap)):
            dial = dial_port(rec, s.passive, port, tag)
            steps_of.append(Step("connect", name=f"c{i}", params=dial, at_us=at))
    deadline = (n * ROUND_US + 2 * START_MARGIN_US) / 1e6 + 2 * WAIT_S
    ra, rb, rp = together(
        [
            (actives[0], Script(tuple(one), deadline_s=deadline), 0),
            (actives[1], Script(tuple(two), deadline_s=deadline), 0),
            (passive, Script(tuple(b), deadline_s=deadline), 0),
        ]
    )
    return [
        _Asked(tags[i], offset, gap, ra.steps[i], rb.steps[i], _reject(rp, i)) for i in range(n)
    ]


def _reject(run: ScenarioRun, i: int) -> StepRun:
    return run.steps[STEPS_PER_ROUND * i + 1]


def _settle(
    rec: Recording, actives: tuple[Endpoint, Endpoint], passive: Endpoint, asked: list[_Asked]
) -> None:
    """Each active id's reply awaited, then the id destroyed; both requests labelled."""
    passive.collect(0.2)
    w = steps.waits(rec.session)
    for a in asked:
        for ep, connect, tag in zip(actives, (a.first, a.second), a.tags, strict=True):
            rec.label(tag, connect.id, request_of(rec, tag))
            if connect.id is None:
                continue
            if connect.ok:  # a failed rdma_connect gets no event
                ep.wait(steps.REPLY_TYPES, connect.id, w.reply_s)
            steps.destroy(ep, connect.id)


def _classified(rec: Recording, asked: list[_Asked]) -> tuple[Round, ...]:
    requests = {e.id: e for e in rec.events() if e.type == "CONNECT_REQUEST"}
    done = []
    for a in asked:
        ids = [request_of(rec, t) for t in a.tags]
        # The second request: the one the first reject did not act on.
        other = next((i for i in ids if i and i != a.reject.id), None)
        order, why = classify(a.reject, requests.get(other) if other else None)
        label = a.tags[0][:-1]
        done.append(
            Round(label, a.offset_us, a.gap_us, order, why, (a.first.id, *ids), a.reject.us)
        )
    return tuple(done)


RACE = register(
    Race(
        "reject_request",
        "reject vs the CONNECT_REQUEST upcall",
        ("rdma_reject of a request (passive)", "the next request's upcall (passive)"),
        "CONNECT_REQUEST",
        ORDERS,
        CERTAIN,
        sweep_reject_vs_request,
        FULL,
    )
)
