"""siw regressions: the MPA request's processing racing what the application does with it.

- ``regress_siw_reject_racing_mpareq`` guards ef91271c65c1 "RDMA/siw: Fix a
  condition race issue in MPA request processing" (2022, in 6.1 from its
  start): siw made the CONNECT_REQUEST upcall before detaching the new
  endpoint from its listener, so an rdma_reject coming at once could run on
  an endpoint still half attached.  The listener rejects in its worker as
  soon as each request is read, while further MPA requests keep arriving.
- ``regress_siw_mpareq_failure`` guards 53a3f7770497 "RDMA/siw: Fix
  connection failure handling" (CVE-2023-52513; Debian 6.1.64-1): when
  processing an MPA request failed, the endpoint already detached from its
  listener was dropped twice by the later TCP close.  A plain TCP client on
  the active host sends the listener malformed MPA requests, at once after
  the connect (siw finds the request queued when it accepts: the
  "immediate" path) and after a pause, then closes or resets.

The windows, read from the passive host's tracepoints (:mod:`.ktrace`; the debug
lab: elsewhere not observable, and the test skips):

- ef91271c65c1's: a request's reject (rdma_cm's ``cm_send_rej``) while the
  siw_cm_wq work whose upcall delivered that same request
  (``cm_event_handler`` CONNECT_REQUEST inside its run) still ran: the gap
  between siw_cm_upcall and the detach from the listener in
  siw_accept_newconn (siw_cm.c, Linux 6.1.192, lines 989-999).
- 53a3f7770497's: the immediate path taken by a request sent at once: only
  the listener's ACCEPT work ran for it (siw_accept_newconn found the request
  queued, ``sk_rmem_alloc``, and processed it there); the later path runs a
  second siw_cm_work_handler, the READ_MPAHDR work siw_cm_llp_data_ready
  queues (same file, lines 981-999 and 1252-1262).

On a widened kernel (bench/reverts/widen/, :mod:`.widen`: the revert score's
kernels) each window is held open by the kernel and read from its marker in
the kernel log instead: ef91271c65c1's, the gap after the upcall held
:data:`WIDEN_EF91271C65C1_MS`, hit when a reject began inside it;
53a3f7770497's, a failed immediate request's endpoint held on its socket past
the client's close, for the first (at-once) probe.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.agent import protocol as wire
from hil.agent.client import request
from hil.cm import steps
from hil.cm.races.conns import dial
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, window
from hil.cm.regressions.ktrace import SIW_WORK, Trace, rejects_inside_their_upcall, runs, seen
from hil.cm.regressions.widen import Widen
from hil.cm.scenario import Script, Step, run
from hil.errors import InputError
from hil.judge.timeline import RAW_TCP, Action, Event, Timeline

if TYPE_CHECKING:
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

REJECT_DATA = b"hil-reg-no"
MPA_REQ_KEY = b"MPA ID Req Frame"
MPA_REP_KEY = b"MPA ID Rep Frame"
MPA_MARKERS, MPA_REJECT = 0x8000, 0x2000  # MPA frame header bits (RFC 5044 7.1)
PROBE_WAIT_S = 3.0  # siw answers or drops a bad request in milliseconds
# ef91271c65c1's widened window (bench/reverts/widen/ef91271c65c1.patch): siw_accept_newconn
# holds an immediate request's endpoint attached to its listener this long after the
# CONNECT_REQUEST upcall; the listener's reject comes in milliseconds (fastest_reject_us).
WIDEN_EF91271C65C1_MS = 300
# 53a3f7770497's widened window (bench/reverts/widen/53a3f7770497.patch): siw_accept_newconn
# holds a failed immediate request's endpoint on its socket this long, past the client's
# close (it reads for PROBE_WAIT_S, then closes or resets), so the close's work finds it.
WIDEN_53A3F7770497_MS = int((PROBE_WAIT_S + 1.0) * 1000)


@dataclass(frozen=True)
class Probe:
    """One malformed MPA request: its bytes, how long after the connect it goes, the close."""

    name: str
    data: bytes
    delay_s: float
    reset: bool
    answered: bool  # siw must answer it with a rejecting MPA reply (else: drop it silently)


# Markers asked for: siw rejects with a reply.  A wrong key: siw drops the connection.
MARKERS = MPA_REQ_KEY + struct.pack(">HH", MPA_MARKERS | 1, 0)
BAD_KEY = b"MPA ID Bad Frame" + struct.pack(">HH", 1, 0)
PROBES = (
    Probe("markers-at-once", MARKERS, 0.0, False, True),
    Probe("markers-later", MARKERS, 0.1, True, True),
    Probe("bad-key-at-once", BAD_KEY, 0.0, True, False),
    Probe("bad-key-later", BAD_KEY, 0.1, False, False),
)


@sequence
def regress_siw_reject_racing_mpareq(s: PairSides, connects: int = 6) -> Timeline:
    """ef91271c65c1: rdma_reject at the CONNECT_REQUEST's heels while more MPA requests arrive."""
    if not 2 <= connects <= 32:
        raise InputError("connects 2..32, please")
    with s.recording("regress-siw-reject-racing-mpareq") as rec:
        listener = steps.listen(rec, s.passive, auto="reject", private_data=REJECT_DATA)
        active = rec.endpoint(s.active)
        tags = [f"hil-reg-{i}" for i in range(connects)]
        script = tuple(Step("connect", name=t, params=dial(rec, listener, t)) for t in tags)
        widen = Widen.on(s, s.passive, "siw", "ef91271c65c1", WIDEN_EF91271C65C1_MS)
        with widen, Trace(s.agent(s.passive)) as tr:
            got = run(active, Script(script, deadline_s=steps.waits(s).reply_s))
            ids = [st.id for st in got.steps if st.ok and st.id]
            deadline = time.monotonic() + steps.waits(s).reply_s
            while time.monotonic() < deadline and len(_answered(active.rec.events(), ids)) < len(
                ids
            ):
                active.collect(0.2, steps.REPLY_TYPES)
            listener.ep.collect(0.2)
        events = rec.events()
        requests = [e for e in events if e.type == "CONNECT_REQUEST" and e.side == s.passive]
        for st in got.steps:
            peer = next((e for e in requests if e.private_bytes == (st.name or "").encode()), None)
            rec.label(st.name or "", st.id, peer.id if peer else None)
        rejects = [a for a in rec.timeline().actions if a.name == "reject" and a.side == s.passive]
        answered = _answered(events, ids)
        rejected = [e for e in answered.values() if e.type == "REJECTED"]
        rec.metric("rejected", float(len(rejected)))
        gap = _fastest(requests, rejects)
        if gap is not None:
            rec.metric("fastest_reject_us", float(gap))
        note(rec, "every_request_rejected_at_once", len(rejects) == len(ids) == len(rejected))
        # A reject before a later request's delivery: how busy the listener was, no window.
        rec.metric("reject_while_requests_arrived", 1.0 if _overlap(requests, rejects) else 0.0)
        raced = rejects_inside_their_upcall(tr.events(), SIW_WORK)
        rec.metric("rejects_inside_their_upcall", float(len(raced)))
        rec.metric("widened_windows_opened", float(widen.opened))
        # Widened: the marker logged, and a reject begun while the window was held open.
        held = gap is not None and gap < WIDEN_EF91271C65C1_MS * 1000
        window(rec, "reject_while_its_own_upcalls_work_ran", widen.window(seen(tr, raced), held))
        steps.destroy(active, *ids)
        steps.destroy(listener.ep, *listener.ep.handles())
    return rec.timeline()


def _answered(events: list[Event], ids: list[str]) -> dict[str, Event]:
    found: dict[str, Event] = {}
    for e in events:
        if e.id in ids and e.type in steps.REPLY_TYPES:
            found.setdefault(e.id, e)
    return found


def _fastest(requests: list[Event], rejects: list[Action]) -> int | None:
    """The shortest time from a request's delivery to its reject's start (µs, one host)."""
    at = {e.id: e.t_us for e in requests}
    gaps = [a.t_us - at[a.id] for a in rejects if a.id in at]
    return min(gaps) if gaps else None


def _overlap(requests: list[Event], rejects: list[Action]) -> bool:
    """True when a reject began before another request's MPA request was delivered: the
    reject ran while the listener was still processing requests (one host's clock)."""
    return any(a.t_us < q.t_us for a in rejects for q in requests if q.id != a.id)


@sequence
def regress_siw_mpareq_failure(s: PairSides) -> Timeline:
    """53a3f7770497: failed MPA requests (at once and later), then the TCP close or reset."""
    with s.recording("regress-siw-mpareq-failure") as rec:
        listener = steps.listen(rec, s.passive)
        widen = Widen.on(s, s.passive, "siw", "53a3f7770497", WIDEN_53A3F7770497_MS)
        # Widened for the first probe only (at once, rejected with a reply): the window
        # holds siw's single CM work queue past that probe's close, and a dropped probe
        # taken in it would find its connection still open when its wait ends.
        with widen:
            answers = [_probe(s, rec, listener.port, PROBES[0])]
        answers += [_probe(s, rec, listener.port, p) for p in PROBES[1:]]
        # The listener still works, and saw none of the malformed requests.
        conn = steps.establish(rec, rec.endpoint(s.active), listener, "after")
        steps.payload(conn)
        steps.close(conn)
        steps.teardown(conn)
        steps.destroy(listener.ep, listener.id)
        requests = [e for e in rec.events() if e.type == "CONNECT_REQUEST"]
        rejected = [a.probe.name for a in answers if a.probe.answered and _rejecting(a.reply)]
        dropped = [a.probe.name for a in answers if not a.probe.answered and a.ended != "open"]
        rec.metric("probes_rejected", float(len(rejected)))
        rec.metric("probes_dropped", float(len(dropped)))
        note(rec, "mpa_requests_failed_with_a_reject", len(rejected) == 2)
        note(rec, "mpa_requests_failed_and_dropped", len(dropped) == 2)
        note(rec, "no_upcall_for_a_failed_request", len(requests) == 1)
        traced = [a.immediate for a in answers if a.probe.delay_s == 0.0]
        immediate = None if None in traced else sum(map(bool, traced))
        if immediate is not None:
            rec.metric("immediate_path_probes", float(immediate))
        rec.metric("widened_windows_opened", float(widen.opened))
        window(
            rec,
            "immediate_mpa_request_path_taken",
            widen.window(None if immediate is None else immediate > 0),
        )
    return rec.timeline()


@dataclass(frozen=True)
class Answer:
    """What a probe got: the reply's bytes, how its connection ended, and whether siw took
    it on the immediate path (the passive host's trace; None where not observable)."""

    probe: Probe
    reply: bytes
    ended: str
    immediate: bool | None


def _probe(s: PairSides, rec: Recording, port: int, p: Probe) -> Answer:
    """Send probe ``p`` from a plain TCP client on the active host; record it as a raw action."""
    params = wire.TcpExchangeParams(
        address=s.address(s.passive),
        port=port,
        data=p.data.hex(),
        src=s.address(s.active),
        delay_s=p.delay_s,
        wait_s=PROBE_WAIT_S,
        reset=p.reset,
    )
    with Trace(s.agent(s.passive)) as tr:
        got = request(s.agent(s.active), wire.TCP_EXCHANGE, params, PROBE_WAIT_S + p.delay_s + 5)
    # Only the listener's ACCEPT work ran: siw found the request queued (the immediate path).
    immediate = runs(tr.events(), SIW_WORK) == 1 if tr.available else None
    rec.add_action(
        Action(
            s.offset(s.active).offset_us + got["t_us"],
            s.active,
            RAW_TCP,
            None,
            {
                "local": got["local"],
                "remote": f"{params['address']}:{port}",
                "probe": p.name,
                "sent": p.data.hex(),
                "reply": got["reply"],
            },
            got["ended"],
            got["ended_us"] - got["t_us"],
        )
    )
    return Answer(p, bytes.fromhex(got["reply"]), got["ended"], immediate)


def _rejecting(reply: bytes) -> bool:
    """True for an MPA reply frame with the Reject bit (what siw sends a bad request)."""
    if len(reply) < 20 or reply[:16] != MPA_REP_KEY:
        return False
    (bits,) = struct.unpack(">H", reply[16:18])
    return bool(bits & MPA_REJECT)
