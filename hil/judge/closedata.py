"""An orderly close delivers what was sent before it: the rule ``close-delivers``.

rdma_disconnect(3) moves the QP to ERR, "which will flush any posted work
requests", so only SENDs whose completion the closing end has are owed to
the peer; those are in TCP's stream before the close's FIN, and TCP hands
the data to the receiver before it reports the FIN (RFC 9293 section
3.10.7.4, "eighth, check the FIN bit": the FIN comes after the segment text
before it), and MPA keeps TCP's reliable, in-order delivery (RFC 5044,
abstract and section 1), so the peer places every SEND, in order (RFC 5040
section 5.5, ordering and completions), before its DISCONNECTED.  siw: the
data is read and its receives completed in the socket's data-ready upcall
(siw_qp.c ``siw_qp_llp_data_ready``, lines 93-115, linux 6.1.192), and the
FIN's TCP_CLOSE_WAIT queues the PEER_CLOSE work that ends in DISCONNECTED
(siw_cm.c ``siw_cm_llp_state_change``, lines 1318-1321).

The ``close`` sequence, before the closing end's ``rdma_disconnect``, has
it send 4 SENDs (1024, 768, 512, 256 bytes, SEND i the pattern of seed + i,
hil/agent/remote/cm/payload.py ``last_sends``) and wait for their
completions; the peer drains its CQ meanwhile (``last_receives``).  What
the receiving agent can observe, on one host clock (CLOCK_MONOTONIC, as
events' ``host_t_us``): ``poll_us``, when the ibv_poll_cq that returned a
completion began; ``event_us``, when the event thread's rdma_get_cm_event
returned the DISCONNECTED; ``seen_us``, when the first poll the drain began
after it saw that event began.  A completion is taken by its DISCONNECTED
when ``poll_us`` <= ``seen_us``: polled before the event was read, or in the
CQ by the first poll after (``seen_us`` - ``event_us`` is the observation's
slack: a completion that entered the CQ within it passes too).  The rule
fails on a SEND missing, completed in error, of the wrong length (a SEND
out of order or cut), with a bad byte where no later SEND overwrote it, or
polled past ``seen_us``; and on a closing end whose SENDs did not complete.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hil.judge.payload import action_where, bad_check
from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, rule
from hil.judge.timeline import Action, Timeline


@rule(
    "close-delivers",
    None,
    "Every SEND completed before an orderly close arrives at the peer whole, in order and "
    "successfully, each taken from its CQ by the time the peer reads its DISCONNECTED",
    "[src] rdma_disconnect(3) (posted work requests are flushed: only completed SENDs are "
    "owed); RFC 9293 section 3.10.7.4 (the FIN after the data before it); RFC 5044 abstract "
    "(MPA keeps TCP's in-order delivery); RFC 5040 section 5.5 (ordering); linux 6.1.192 "
    "siw_qp.c siw_qp_llp_data_ready (93-115), siw_cm.c siw_cm_llp_state_change (1318-1321)",
)
def close_delivers(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for a in tl.actions:
        if a.name == "last_sends" and (not a.ok or a.params.get("error")):
            why = a.params.get("error") or a.result
            yield Finding(
                f"{action_where(tl, a)}: the SENDs before the close failed: {why}", (), (a,)
            )
        elif a.name == "last_receives":
            yield from _findings(tl, a)


def _findings(tl: Timeline, a: Action) -> Iterator[Finding]:
    """What is wrong with the receiving end's ``last_receives`` action."""
    where = action_where(tl, a)
    if not a.ok:
        yield Finding(f"{where}: the receiving end could not drain: {a.result}", (), (a,))
        return
    lengths: list[int] = list(a.params.get("lengths") or [])
    done: list[dict[str, Any]] = list(a.params.get("completions") or [])
    seen = int(a.params.get("seen_us") or 0)
    for i, (n, c) in enumerate(zip(lengths, done, strict=False)):
        what = f"SEND {i + 1} of {len(lengths)} ({n} bytes)"
        if c.get("status"):
            yield Finding(f"{where}: {what} completed with status {c.get('status')}", (), (a,))
        elif c.get("byte_len") != n:
            got = c.get("byte_len")
            yield Finding(f"{where}: {what} arrived as {got} bytes (out of order or cut)", (), (a,))
        if seen and c.get("poll_us", 0) > seen:
            late = c.get("poll_us", 0) - seen
            yield Finding(
                f"{where}: {what} taken from the CQ {late} us after the first poll that "
                f"followed DISCONNECTED (read at host {a.params.get('event_us')} us)",
                (),
                (a,),
            )
    for c in (c for c in a.params.get("checks") or [] if not c.get("ok")):
        yield Finding(f"{where}: {bad_check(c, a.side)}", (), (a,))
    if len(done) < len(lengths) or not seen or not lengths:
        error = a.params.get("error") or "the drain ended"
        yield Finding(
            f"{where}: {len(done)} of {len(lengths)} SENDs before the close arrived, "
            f"DISCONNECTED {'seen' if seen else 'not seen'} ({error})",
            (),
            (a,),
        )


RULES = (close_delivers,)
