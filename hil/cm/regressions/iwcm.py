"""iw_cm regressions: cm_ids destroyed while the CM still has work queued for them.

- ``regress_iwcm_refused_child`` guards aee2424246f9 "RDMA/iwcm: Fix a
  use-after-free related to destroying CM IDs" (CVE-2024-42285; Debian
  6.1.106-1): iw_cm destroys the child cm_id of an incoming connect itself
  when the listener's handler refuses the request, and an application
  destroys a listener with a request still unretrieved (rdma_ucm destroys
  its child, which iw_cm then rejects).
- ``regress_iwcm_peer_vanishes`` guards "RDMA/iwcm: Fix use-after-free of
  work objects after cm_id destruction" (2025, found by blktests nvme/061
  on siw; Debian 6.1.147-1): the last reference of a cm_id dropped by an
  event's work, because the application destroyed the id while the peer's
  abort of every connection at once was still being handled.
- ``regress_iwcm_connect_disconnect_storm`` guards 7874eeacfa42 "RDMA/iwcm:
  Fix workqueue list corruption by removing work_list" (Jacob Moroni, 2026,
  CVE-2026-45898; found by a ucmatose connect/disconnect storm on an Intel
  E830): since e1168f0 "RDMA/iwcm: Simplify cm_event_handler()" (6.11)
  every event queued its own work while the handler still walked the
  cm_id's work_list, so a second event queued for an id whose first was
  still queued could be freed and reused while the workqueue held it.  The
  window is two iw_cm events queued for one cm_id at once: siw raises
  DISCONNECT and CLOSE back to back for every connection whose peer closes
  it (siw_cm.c 1100-1101, 6.1.192), which user space sees as that
  connection's DISCONNECTED on each side.  Debian 6.1.192 predates
  e1168f0 (iwcm.c 1101-1105 queues the work only when the list was empty):
  it has neither the bug nor the fix; 6.12.117 has both (the fix since
  6.12.75).  A kernel with the bug shows "list_del corruption" (the debug
  lab's CONFIG_DEBUG_LIST) or crashes in the workqueue.

The window of the first two, as their fixes describe it, is work still queued on iw_cm_wq
when an id is destroyed: the passive host's tracepoints show it
(:mod:`.ktrace`: a ``cm_id_destroy`` of a connection id while a
``cm_work_handler`` work was queued and not yet started).  Only a kernel with
event tracing shows it (the debug lab); elsewhere the window is not observable
and the test skips.

On a widened kernel (bench/reverts/widen/aee2424246f9.patch, :mod:`.widen`)
aee2424246f9's case adds the window its fix's message names, held open: a
connection the active side closes, whose passive id is destroyed while iw_cm
holds that id's CLOSE upcall (:data:`WIDEN_AEE2424246F9_MS`); hit when the
kernel logged the marker and the destroy began inside the held window.
6883b680e703's (bench/reverts/widen/6883b680e703.patch) holds each event's work
of an id in cm_work_handler, the id's reference held (:data:`WIDEN_6883B680E703_MS`):
the peer-vanishes case's window is then the marker and, in the trace, an id destroyed
while a cm_work_handler work was queued (its event's work held, or queued behind a held
one).

6883b680e703's bug breaks no memory on 6.1.192: its workqueue does not touch a work
after the work's function returned (kernel/workqueue.c:2292-2335), so the id freed
inside cm_work_handler leaves no KASAN report.  What the fix rules out is visible in
the trace all the same: with it, iw_destroy_cm_id keeps the id's initial reference
until iw_cm_wq is flushed and drops the last one itself (iwcm.c:448-457), so an id
the application destroyed is never freed inside its event's work.  The case traces
the id's kfree (in ``iwcm_deref_id``, :data:`.ktrace.ID_FREER`) and counts the
cm_work_handler runs that made one (``traced_ids_freed_inside_their_event_work``,
:func:`.evidence.traced`): the handler frees an id itself only when its consumer's
upcall failed (process_event returning nonzero, iwcm.c:1038-1042), which rdma_ucm's
handler does not do for the close events of this case.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hil.cm import steps
from hil.cm.races.conns import dial
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, noted, traced, window
from hil.cm.regressions.held import look, wait_child
from hil.cm.regressions.ktrace import (
    ID_FREER,
    IWCM_WORK,
    Trace,
    destroys_with_pending,
    frees_inside,
    seen,
)
from hil.cm.regressions.widen import Widen
from hil.cm.scenario import ScenarioRun, Script, Step, run
from hil.cm.storm import run_storm
from hil.errors import InputError
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

# aee2424246f9's widened window (bench/reverts/widen/aee2424246f9.patch): iw_cm holds a
# CLOSE upcall this long; the passive id is destroyed a quarter of it after the disconnect.
WIDEN_AEE2424246F9_MS = 1000
# 6883b680e703's (bench/reverts/widen/6883b680e703.patch): iw_cm holds each event's work
# this long; a round's 3 connections raise about 2 events each on the passive host, and
# its script's first destroy waits for a DISCONNECTED (close_s).
WIDEN_6883B680E703_MS = 300
QUEUE_S = 0.2  # after the listener's destroy: what the resumed worker still reads
KILL_AFTER_S = 0.3  # the passive script is waiting for DISCONNECTED before the peer is killed


@sequence
def regress_iwcm_refused_child(s: PairSides, connects: int = 4) -> Timeline:
    """aee2424246f9: children the CM destroys (backlog full), one with its listener."""
    if not 2 <= connects <= 16:
        raise InputError("connects 2..16, please: one is held, the others are refused")
    with s.recording("regress-iwcm-refused-child") as rec:
        with Trace(s.agent(s.passive)) as tr:
            _refused_child(rec, s, connects)
        found = destroys_with_pending(tr.events(), IWCM_WORK)
        rec.metric("destroys_with_iwcm_work_pending", float(len(found)))
        widen = Widen.on(s, s.passive, "iw_cm", "aee2424246f9", WIDEN_AEE2424246F9_MS)
        with widen:
            # Only a widened kernel holds the window open long enough to destroy in it.
            raced = widen.available and _destroyed_in_its_close_upcall(rec, s)
        rec.metric("widened_windows_opened", float(widen.opened))
        window(rec, "iwcm_work_queued_at_an_id_destroy", widen.window(seen(tr, found), raced))
    return rec.timeline()


def _destroyed_in_its_close_upcall(rec: Recording, s: PairSides) -> bool:
    """The widened window's scenario: a connection the active side closes, its passive id
    destroyed while iw_cm holds that id's CLOSE upcall (bench/reverts/widen/aee2424246f9.patch);
    True when the destroy began inside the held window (one controller timeline)."""
    listener = steps.listen(rec, s.passive)
    conn = steps.establish(rec, rec.endpoint(s.active), listener, "widened")
    out = conn.active.disconnect(conn.active_id)
    if not out.ok:
        raise steps.StepFailed(conn.active.host, f"disconnect widened: {out.action.result}")
    time.sleep(WIDEN_AEE2424246F9_MS / 4000)  # the CLOSE has reached iw_cm's work by then
    gone = steps.destroy(listener.ep, conn.passive_id)
    steps.wait_disconnected(conn, steps.waits(s).close_s, sides=("active",))
    steps.destroy(conn.active, conn.active_id)
    steps.destroy(listener.ep, listener.id)
    began = gone[0].action.t_us - out.action.t_us if gone else None
    return began is not None and 0 <= began < WIDEN_AEE2424246F9_MS * 1000


def _refused_child(rec: Recording, s: PairSides, connects: int) -> None:
    """The refused-child scenario (its conditions noted; the window read by the caller)."""
    # rdma_ucm takes one unretrieved request (backlog 1); the worker reads none while
    # paused, so every later request makes its handler fail and iw_cm destroy the child.
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The active worker starts meanwhile: a start takes seconds on a loaded guest.
        opening = pool.submit(rec.endpoint, s.active)
        listener = steps.listen(rec, s.passive, backlog=1)
        listener.ep.pause(True)
        active = opening.result()
    reply_s = steps.waits(s).reply_s
    passive = s.agent(s.passive)
    # One connect at a time, each after the last was taken: siw's listener has one
    # ACCEPT work element (backlog 1), and a handshake done before the previous
    # ACCEPT ran stays in the TCP accept queue, never a request (held.py).  The
    # first is held once rdma_cm has its child (the passive host says so).
    first = _connect(rec, active, (Step("connect", **_dial(rec, listener, 0)),))
    kids = wait_child(passive, listener.port, reply_s) if first else 0
    rec.metric("first_held", float(kids))
    ids = first + _connect(rec, active, _in_turn(rec, listener, connects))
    want = len(ids) - len(first)  # a reply from every connect but the held one
    replies = _replies(active, ids, want, reply_s if want else 0.0)
    refused = [e for e in replies.values() if e.type != "ESTABLISHED"]
    rec.metric("refused", float(len(refused)))
    note(rec, "requests_refused_by_the_cm", len(refused) == connects - 1)
    unanswered = [i for i in ids if i not in replies]
    note(rec, "one_request_held_unretrieved", unanswered == first and kids == 1)
    if unanswered != first:  # why: a connection siw never accepted shows here
        left = look(passive, listener.port)
        rec.metric("unaccepted", float(-1 if left.unaccepted is None else left.unaccepted))
        rec.metric("children_in_connect", float(left.children))
    # The held child goes with its listener, its request never retrieved: rdma_ucm
    # destroys it and iw_cm rejects it (destroying the active id instead would block
    # until siw's MPA timeout: it is in CONN_SENT).
    gone = steps.destroy(listener.ep, listener.id)
    listener.ep.pause(False)
    listener.ep.collect(QUEUE_S)
    late = _replies(active, unanswered, len(unanswered), reply_s)
    after = bool(gone) and all(e.t_us >= gone[0].action.t_us for e in late.values())
    note(rec, "held_request_answered_by_the_listener_destroy", bool(late) and after)
    steps.destroy(active, *ids)


# The passive ids are destroyed before their QPs, as the fix's reporter's consumer does
# (nvme-rdma: nvme_rdma_free_queue calls rdma_destroy_id, then destroys the queue's QP,
# drivers/nvme/host/rdma.c:655-663, 6.1.192).  QP first, the QP's destroy blocked until
# iw_cm_wq had run every queued work (debug lab, 2026-12-06: each id's cm_id_destroy came
# after the last cm_work_handler run ended), so no destroy met its id's work.
ID_FIRST = {"order": "id_first"}


@sequence
def regress_iwcm_peer_vanishes(s: PairSides, connections: int = 3, rounds: int = 3) -> Timeline:
    """iwcm work objects after destroy: ids destroyed while their peer's mass abort is handled."""
    if not 1 <= connections <= 8 or not 1 <= rounds <= 20:
        raise InputError("connections 1..8 and rounds 1..20, please")
    with s.recording("regress-iwcm-peer-vanishes") as rec:
        early = found = freed = 0
        frees_traced = True
        widen = Widen.on(s, s.passive, "iw_cm", "6883b680e703", WIDEN_6883B680E703_MS)
        with widen:
            for r in range(rounds):
                with Trace(s.agent(s.passive), frees_by=(ID_FREER,)) as tr:
                    early += _vanish_round(rec, s, r, connections)
                frees_traced = frees_traced and tr.frees_traced
                if tr.available:
                    events = tr.events()
                    found += len(destroys_with_pending(events, IWCM_WORK))
                    freed += len(frees_inside(events, IWCM_WORK, ID_FREER))
                if early and (found or not tr.available):
                    break  # the scenario and its window happened: enough for a regression run
        traced(rec, "ids_freed_inside_their_event_work", freed if frees_traced else None)
        rec.metric("destroyed_before_their_disconnect", float(early))
        rec.metric("destroys_with_iwcm_work_pending", float(found))
        rec.metric("widened_windows_opened", float(widen.opened))
        note(rec, "id_destroyed_before_its_disconnected", early > 0)
        # Widened, the trace still decides whether a destroy met queued work: one that
        # user space saw come before its id's DISCONNECTED began, in the kernel, after the
        # work had run (QP first, above).  Without a trace, user space's view is all.
        raced = found > 0 if tr.available else early > 0
        window(rec, "iwcm_work_queued_at_an_id_destroy", widen.window(seen(tr, found), raced))
    return rec.timeline()


@sequence
def regress_iwcm_connect_disconnect_storm(s: PairSides, count: int = 256) -> Timeline:
    """7874eeacfa42: ``count`` connections from 8 processes to 8 listeners (one connect
    in flight a process), each closed by its active side: every close queues two iw_cm
    events for one id on its passive side.  8 a side: on the lab a process got QPs for
    about 71 connections at most (2 processes: 142 of 256 reached rdma_connect; 8
    processes to 2 listeners: the listeners' accepts failed EIO past that; 2026-12-05),
    each process's pinned memory being bounded.  One connect in flight a process: with
    four, the 6.12 debug guest's connects took 8 s (median) and 79 of 256 ran out siw's
    10 s MPA timer (UNREACHABLE -110; 2026-12-07), on the fixed kernel; the window is
    each connection's close, however many connect at once."""
    tl, result = run_storm(s, count=count, processes=8, listeners=8, parallel=1)
    counts = {
        "established": result.established,
        "closed_active": result.closed_active,
        "closed_passive": result.closed_passive,
        "failed": len(result.failed),
    }
    tl = replace(tl, metrics={**tl.metrics, **{k: float(v) for k, v in counts.items()}})
    closed = result.closed_active == result.closed_passive == count
    # The fix's window: two iw_cm events (siw's DISCONNECT and CLOSE) queued for one id at
    # once, which every connection closed by its peer raises.
    return noted(
        tl,
        {"every_connection_closed_on_both_sides": closed},
        {"two_events_queued_for_one_id": closed},
    )


def _vanish_round(rec: Recording, s: PairSides, r: int, connections: int) -> int:
    """One round: connections under RDMA WRITE load, the active worker killed, the passive
    side destroying every id at the first DISCONNECTED; how many ids it destroyed before
    their own DISCONNECTED was delivered (one host's clock: exact)."""
    listener = steps.listen(rec, s.passive)
    active = rec.endpoint(s.active)
    conns = [steps.establish(rec, active, listener, f"r{r}c{i}") for i in range(connections)]
    for c in conns:
        steps.payload(c)  # before the load, which overwrites the buffers
        remote = {k: c.passive_qp[k] for k in ("addr", "rkey")}
        out = c.active.stream_start(c.active_id, "write", remote=remote)
        if not out.ok:
            raise steps.StepFailed(c.active.host, f"traffic on {c.label}: {out.action.result}")
    close_s = steps.waits(s).close_s
    first = Step(
        "destroy", cm_id=conns[0].passive_id, on="DISCONNECTED", wait_s=close_s, params=ID_FIRST
    )
    rest = tuple(Step("destroy", cm_id=c.passive_id, params=ID_FIRST) for c in conns[1:])
    script = Script((first, *rest), linger_s=0.2, deadline_s=close_s + 5)
    with ThreadPoolExecutor(max_workers=1) as pool:
        done = pool.submit(run, listener.ep, script)
        time.sleep(KILL_AFTER_S)
        active.kill(tuple(c.active_id for c in conns))
        got = done.result()
    steps.destroy(listener.ep, listener.id)
    listener.ep.close()
    return _early(got, rec.events())


def _dial(rec: Recording, listener: Listener, i: int) -> dict[str, Any]:
    tag = f"hil-reg-{i}"
    return {"name": tag, "params": dial(rec, listener, tag)}


def _in_turn(rec: Recording, listener: Listener, connects: int) -> tuple[Step, ...]:
    """Connects 1.. to ``listener``, each once the one before was REJECTED (its id's
    request was taken and refused), all in one script on the active host."""
    return tuple(
        Step("connect", **_dial(rec, listener, i), on="REJECTED", on_id_of=f"hil-reg-{i - 1}")
        if i > 1
        else Step("connect", **_dial(rec, listener, i))
        for i in range(1, connects)
    )


def _connect(rec: Recording, active: Endpoint, script: tuple[Step, ...]) -> list[str]:
    """Run the connects of ``script`` on ``active``, each labelled with its step's name;
    the ids of those rdma_connect took (a missing one: the case misses its conditions)."""
    reply_s = steps.waits(rec.session).reply_s
    got = run(active, Script(script, deadline_s=reply_s * max(1, len(script))))
    for st in got.steps:
        rec.label(st.name or "", st.id)
    return [st.id for st in got.steps if st.ok and st.id]


def _early(got: ScenarioRun, events: list[Event]) -> int:
    """How many of the script's destroys began before their id's DISCONNECTED came."""
    count = 0
    for st in got.steps:
        if not st.ran or st.id is None or st.host_t_us is None:
            continue
        closes = [e for e in events if e.id == st.id and e.type == "DISCONNECTED"]
        if not any(e.host_t_us <= st.host_t_us for e in closes):
            count += 1
    return count


def _replies(active: Endpoint, ids: list[str], want: int, wait_s: float) -> dict[str, Event]:
    """The first reply of each of ``ids``, waiting until ``want`` came or ``wait_s``."""
    deadline = time.monotonic() + wait_s
    found: dict[str, Event] = {}
    while True:
        active.collect(max(0.0, min(0.2, deadline - time.monotonic())), steps.REPLY_TYPES)
        for e in active.rec.events():
            if e.id in ids and e.type in steps.REPLY_TYPES:
                found.setdefault(e.id, e)
        if len(found) >= want or time.monotonic() >= deadline:
            return found
