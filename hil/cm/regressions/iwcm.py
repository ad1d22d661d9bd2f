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
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from hil.cm import steps
from hil.cm.races.conns import dial
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note
from hil.cm.regressions.held import look, wait_child
from hil.cm.scenario import ScenarioRun, Script, Step, run
from hil.errors import InputError
from hil.judge.timeline import Event, Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides
    from hil.cm.steps import Listener

QUEUE_S = 0.2  # after the listener's destroy: what the resumed worker still reads
KILL_AFTER_S = 0.3  # the passive script is waiting for DISCONNECTED before the peer is killed


@sequence
def regress_iwcm_refused_child(s: PairSides, connects: int = 4) -> Timeline:
    """aee2424246f9: children the CM destroys (backlog full), one with its listener."""
    if not 2 <= connects <= 16:
        raise InputError("connects 2..16, please: one is held, the others are refused")
    with s.recording("regress-iwcm-refused-child") as rec:
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
    return rec.timeline()


@sequence
def regress_iwcm_peer_vanishes(s: PairSides, connections: int = 3, rounds: int = 3) -> Timeline:
    """iwcm work objects after destroy: ids destroyed while their peer's mass abort is handled."""
    if not 1 <= connections <= 8 or not 1 <= rounds <= 20:
        raise InputError("connections 1..8 and rounds 1..20, please")
    with s.recording("regress-iwcm-peer-vanishes") as rec:
        early = 0
        for r in range(rounds):
            early += _vanish_round(rec, s, r, connections)
            if early:
                break  # the scenario happened: enough for a regression run
        rec.metric("destroyed_before_their_disconnect", float(early))
        note(rec, "id_destroyed_while_its_close_was_handled", early > 0)
    return rec.timeline()


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
    first = Step("destroy", cm_id=conns[0].passive_id, on="DISCONNECTED", wait_s=close_s)
    rest = tuple(Step("destroy", cm_id=c.passive_id) for c in conns[1:])
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
