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

Each listener has its own port (the passive host's script listens, then
rejects each request the moment it is delivered, one after the other, then
destroys the children and the listener).  ``REQUESTS`` active endpoints
connect to it, each ``gap`` after the one before (``gap = window + offset``,
so the offsets sweep gaps of 0 .. 2 * window); all scripts start together.
The connects' own durations spread the requests' arrivals over tens of ms on
the TCG lab whatever the gap, so more requests per listener give more
chances for one to arrive within the ~1 ms between a delivery and its reject.

A round is one reject and the next request delivered on that listener (a
listener of N requests gives N - 1 rounds), classified on the passive host's
clock (exact, :func:`classify`) by where that next request's delivery fell
against the reject:

- ``upcall_first``: delivered before the reject began;
- ``during_reject``: delivered while rdma_reject ran;
- ``reject_first``: delivered after rdma_reject returned;
- ``unclear``: a request or the reject did not happen.

The contract judges every connect: each active side gets REJECTED with the
profile's status, no event after a destroy, nothing leaked.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import hil.cm.races.core as core
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.races.conns import dial_port, request_of
from hil.cm.scenario import LEAD_S, Script, Step, StepRun, together
from hil.judge.timeline import Event

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

ORDERS = ("during_reject", "reject_first", "upcall_first")
# during_reject needs the next delivery inside one rdma_reject call (0.2-0.8 ms, up to 15 ms
# on a loaded guest) while the requests' arrivals spread over 1-200 ms whatever the gap: it
# cannot be aimed from user space here (docs/races.md): it comes in 4-13 % of the rounds,
# so only sweeps of many rounds ask for it (suites/test_races.py's: up to 60, or full).
CERTAIN = ("reject_first", "upcall_first")
LISTEN_AHEAD_US = 50_000  # a listener is up this long before its connects
ROUND_US = 400_000  # one listener's connects (4 processes: 1-120 ms apart), rejects, destroys
START_MARGIN_US = 100_000  # past together()'s common start
WAIT_S = 5.0  # a reject step's wait for its request
REQUESTS = 4  # requests per listener: REQUESTS - 1 rounds
FULL = core.Budget(5_000, 250, rounds=1)


@dataclass(frozen=True)
class _Asked:
    """One listener's requests as asked: their tags and connects, and its rejects in the
    order the requests were delivered."""

    tags: tuple[str, ...]
    offset_us: int
    gap_us: int
    connects: tuple[StepRun, ...]
    rejects: tuple[StepRun, ...]


def classify(reject: StepRun, second: Event | None) -> tuple[str, str]:
    """Where the next request's delivery (``second``) fell against a request's reject."""
    if reject.host_t_us is None or not reject.ok:
        return core.UNCLEAR, f"the first request's reject: {reject.result}"
    if second is None:
        return core.UNCLEAR, "the second request was never delivered"
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
    s: PairSides, budget: core.Budget = FULL, wanted: tuple[str, ...] = ORDERS
) -> core.RaceSweep:
    """Sweep the gap between requests to one listener that rejects each at once."""
    with s.recording("race-reject-vs-request") as rec:
        passive = rec.endpoint(s.passive)
        actives = tuple(rec.endpoint(s.active) for _ in range(REQUESTS))
        asked: list[_Asked] = []

        def batch(offset: int, n: int) -> None:
            got = _rounds(rec, actives, passive, len(asked), offset, budget.window_us + offset, n)
            asked.extend(got)
            _settle(rec, actives, passive, got)

        early = core.drive(budget, wanted, batch, lambda: _classified(asked))
        steps.destroy(passive, *passive.handles())
    tl = rec.timeline()
    return core.RaceSweep(
        RACE, _classified(asked), wanted, core.cross_host_uncertainty(tl), tl,
        f"a {budget.window_us / 1e3:.1f} ms gap between {REQUESTS} requests", early,
    )  # fmt: skip


def _rounds(
    rec: Recording,
    actives: tuple[Endpoint, ...],
    passive: Endpoint,
    first_tag: int,
    offset: int,
    gap: int,
    n: int,
) -> list[_Asked]:
    s = rec.session
    start = controller_us() + int(LEAD_S * 1e6) + START_MARGIN_US + LISTEN_AHEAD_US
    connects: list[list[Step]] = [[] for _ in actives]
    b: list[Step] = []
    tags = []
    first_reject = []  # each listener's first reject step's index in b
    for i in range(n):
        t, port = start + i * ROUND_US, s.port()
        mine = tuple(f"hil-race-{first_tag + i:04d}{chr(ord('a') + j)}" for j in range(REQUESTS))
        tags.append(mine)
        listen = {"address": s.address(s.passive), "port": port, "backlog": 2 * REQUESTS}
        b.append(Step("listen", name=f"l{i}", params=listen, at_us=t - LISTEN_AHEAD_US))
        first_reject.append(len(b))
        b += [
            Step("reject", name=f"r{i}.{j}", id_of="event", on="CONNECT_REQUEST", wait_s=WAIT_S)
            for j in range(REQUESTS)
        ]
        b += [Step("destroy", id_of=f"r{i}.{j}") for j in range(REQUESTS)]
        b.append(Step("destroy", id_of=f"l{i}"))
        for j, tag in enumerate(mine):
            dial = dial_port(rec, s.passive, port, tag)
            connects[j].append(Step("connect", name=f"c{i}", params=dial, at_us=t + j * gap))
    deadline = (n * ROUND_US + 2 * START_MARGIN_US) / 1e6 + 2 * WAIT_S
    runs = together(
        [
            (ep, Script(tuple(c), deadline_s=deadline), 0)
            for ep, c in zip(actives, connects, strict=True)
        ]
        + [(passive, Script(tuple(b), deadline_s=deadline), 0)]
    )
    rp = runs[-1]
    return [
        _Asked(
            tags[i],
            offset,
            gap,
            tuple(r.steps[i] for r in runs[:-1]),
            rp.steps[first_reject[i] : first_reject[i] + REQUESTS],
        )  # fmt: skip
        for i in range(n)
    ]


def _settle(
    rec: Recording, actives: tuple[Endpoint, ...], passive: Endpoint, asked: list[_Asked]
) -> None:
    """Each active id's reply awaited, then the id destroyed; every request labelled."""
    passive.collect(0.2)
    w = steps.waits(rec.session)
    for a in asked:
        for ep, connect, tag in zip(actives, a.connects, a.tags, strict=True):
            rec.label(tag, connect.id, request_of(rec, tag))
            if connect.id is None:
                continue
            if connect.ok:  # a failed rdma_connect gets no event
                ep.wait(steps.REPLY_TYPES, connect.id, w.reply_s)
            steps.destroy(ep, connect.id)


def _classified(asked: list[_Asked]) -> tuple[core.Round, ...]:
    """Each reject against the next request delivered on its listener (the event that
    triggered the next reject step)."""
    done = []
    for a in asked:
        label = a.tags[0][:-1]
        for j, (reject, after) in enumerate(pairwise(a.rejects)):
            order, why = classify(reject, after.event)
            ids = (reject.id, after.event.id if after.event else None)
            done.append(
                core.Round(f"{label}/{j + 1}", a.offset_us, a.gap_us, order, why, ids, reject.us)
            )
    return tuple(done)


RACE = core.register(
    core.Race(
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
