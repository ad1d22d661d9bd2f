"""A connection stays up until something ends it: the rule ``connection-stays-up``.

rdma_cm promises DISCONNECTED as the answer to a close: "After successfully
disconnecting, an RDMA_CM_EVENT_DISCONNECTED event will be generated on both
sides of the connection" (rdma_disconnect(3)); rdma_get_cm_event(3) says only
"The connection has been disconnected".  In the kernel the event has one
source: iw_cm's ``cm_close_handler`` on the provider's CLOSE (iwcm.c, 6.1),
which siw upcalls from its CLOSE_LLP work (``siw_qp_cm_drop``: the QP moved
to ERR, an rdma_disconnect, a TERMINATE or a bad frame received) and its
PEER_CLOSE work (the socket saw the peer's FIN or RST, or TCP gave up: a link
down; ``siw_cm_llp_state_change``, siw_cm.c 6.1).  So a DISCONNECTED that no
action of the test explains is a connection the stack dropped by itself.

The causes a timeline records, from the sequences and races of
:mod:`hil.cm`:

- on one of the connection's ids, either side: ``disconnect``, ``qp_err``,
  ``destroy``, ``kill`` (:data:`~hil.judge.rule.CLOSE_ACTIONS`: the orderly
  and abortive closes, a race's crossed closes, a storm's disconnects), and a
  ``write`` the peer may refuse (:mod:`hil.judge.access`: one with ``how``,
  or one whose completion was not awaited, as the destroy-vs-TERMINATE race
  posts it); a WRITE that completed without ``how`` is traffic, no cause;
- on a whole host, any connection: ``pull`` or ``flap`` (the link; either end),
  ``delete_netdev`` (the device under the ids), a ``kill`` of a process with
  no id named, ``close_channel`` (an event channel closed with its ids);
- ``tool_peer``: a tool (rping, ucmatose, cmtime, ib_send_bw) started on the other end,
  whose own closes the timeline does not hold: any connection after its start
  (hil.cm.toolpeers; each tool's close is in its source, docs/interop.md); a kernel
  consumer told to connect is one too (hil.cm.regressions.siwtx).

A connect that failed after its peer accepted is one too: the active side's REJECTED,
UNREACHABLE or CONNECT_ERROR on the connection, as when its MPA timer ran out before
the reply came (a path delayed past it, docs/impairment.md): the provider then
releases the connect's socket (siw_cm.c:1125-1138 and its release_cep, Linux 6.1.192),
which the accepting side sees as the peer's close.

A reject is none: it answers a request that never got ESTABLISHED, which
``disconnect-once-after-established`` already judges.  A connection is its
``conn`` label's ids, else the peer id whose 4-tuple mirrors this one's;
with neither, any close on the other side counts (the timeline cannot tell
whose it was).  A cause may be up to the clocks' uncertainty after the event
when it was on the other host.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.access import ACCESS_ERRORS
from hil.judge.profiles import Profiles
from hil.judge.rule import CLOSE_ACTIONS, Finding, host_of, ms, rule
from hil.judge.timeline import CONNECT_REPLIES, LINK_DOWNS, TOOL_PEER, Action, Event, Timeline

# Actions that end every connection of the host they ran on (their id, if any, aside).
# A connect's failure events (CONNECT_REPLIES less ESTABLISHED).
FAILED_REPLIES = CONNECT_REPLIES - {"ESTABLISHED"}
HOST_ENDERS = frozenset({*LINK_DOWNS, "delete_netdev", "close_channel"})


@rule(
    "connection-stays-up",
    None,
    "An established connection stays up until the test ends it: each DISCONNECTED "
    "follows a close, abort, kill or refused WRITE on one of the connection's ids "
    "(either side), a link pull, the loss of a host's device or channel, or a tool "
    "peer's start (its own closes unrecorded)",
    "[src] rdma_disconnect(3): DISCONNECTED on both sides after rdma_disconnect; iwcm.c "
    "cm_close_handler, siw_cm.c siw_qp_cm_drop and siw_cm_llp_state_change (6.1)",
)
def connection_stays_up(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for e in (e for e in tl.events if e.type == "DISCONNECTED"):
        if explained(tl, e):
            continue
        ids = _ids_of(tl, e)
        last = _last_actions(tl, e, ids)
        yield Finding(
            f"{_name(tl, e)} got DISCONNECTED({e.status}){_up_for(tl, e)} with no close, "
            f"abort, pull or peer action before it; {_said(last)}",
            (e,),
            last,
        )


def explained(tl: Timeline, e: Event) -> bool:
    """Whether an action of ``tl`` (a close, an abort, a pull, ...) may have ended the
    connection of DISCONNECTED ``e`` before ``e`` was delivered."""
    ids = _ids_of(tl, e)
    return any(_causes(tl, a, e, ids) for a in tl.actions) or _connect_failed(tl, e, ids)


def _connect_failed(tl: Timeline, e: Event, ids: frozenset[str] | None) -> bool:
    """Whether the other side's connect on ``e``'s connection failed before ``e``."""
    slack = tl.uncertainty_us(*tl.pair)
    return ids is not None and any(
        x.type in FAILED_REPLIES and x.side != e.side and x.id in ids and x.t_us <= e.t_us + slack
        for x in tl.events
    )


def _ids_of(tl: Timeline, e: Event) -> frozenset[str] | None:
    """The ids of ``e``'s connection on both sides: its ``conn`` label's, else its own and
    the other side's whose 4-tuple mirrors its own; None when neither names a peer."""
    if e.conn:
        return frozenset(x.id for x in tl.events_of_conn(e.conn))
    peers = {
        x.id
        for x in tl.events
        if e.local and x.side != e.side and (x.local, x.remote) == (e.remote, e.local)
    }
    return frozenset({e.id, *peers}) if peers else None


def _causes(tl: Timeline, a: Action, e: Event, ids: frozenset[str] | None) -> bool:
    """Whether ``a`` may have ended ``e``'s connection before ``e`` was delivered."""
    other_host = host_of(tl, a.side) != e.host
    if a.t_us > e.t_us + (tl.uncertainty_us(*tl.pair) if other_host else 0):
        return False
    if a.name == TOOL_PEER:
        return True  # the tool's close, which its own process made, unrecorded
    if a.name in HOST_ENDERS or (a.name == "kill" and a.id is None):
        return a.name in LINK_DOWNS or ids is None or _side_in(a.side, ids)
    if not _ends_conn(a):
        return False
    if ids is None:  # the peer's id is unknown: any close on either side may be it
        return a.id == e.id or a.side != e.side
    return a.id in ids


def _ends_conn(a: Action) -> bool:
    """Whether ``a``, on a connection's id, may end that connection."""
    if a.name == "write":
        return a.params.get("how") in ACCESS_ERRORS or not a.ok
    return a.name in CLOSE_ACTIONS


def _side_in(side: str, ids: frozenset[str]) -> bool:
    """Whether the connection of ``ids`` has an end on ``side`` (ids are ``side:handle``)."""
    return any(i.startswith(f"{side}:") for i in ids)


def _last_actions(tl: Timeline, e: Event, ids: frozenset[str] | None) -> tuple[Action, ...]:
    """The last action before ``e`` on its connection, then the timeline's last before it
    when that is another (none when nothing came before ``e``)."""
    before = [a for a in tl.actions if a.t_us <= e.t_us]
    if not before:
        return ()
    latest = max(before, key=lambda a: a.t_us)
    own = [a for a in before if ids is not None and a.id in ids]
    mine = max(own, key=lambda a: a.t_us, default=latest)
    return (latest,) if mine is latest else (mine, latest)


def _said(last: tuple[Action, ...]) -> str:
    """``last action on it: ...; last action before it: ...`` (one when they agree)."""
    if not last:
        return "no action before it"
    if len(last) == 1:
        return f"last action before it: {last[0].brief()}"
    return f"last action on it: {last[0].brief()}; last action before it: {last[1].brief()}"


def _name(tl: Timeline, e: Event) -> str:
    """``connection c1, side b (lab-b) b:2 10.0.0.2:4791 <-> 10.0.0.1:40000``."""
    conn = f"connection {e.conn}" if e.conn else "an unlabelled connection"
    where = f" {e.local} <-> {e.remote}" if e.local or e.remote else ""
    return f"{conn}, side {e.side} ({host_of(tl, e.side)}) {e.id}{where},"


def _up_for(tl: Timeline, e: Event) -> str:
    """`` up 200.0 ms after its ESTABLISHED`` when that is known."""
    est = next((x for x in tl.events_for(e.id) if x.type == "ESTABLISHED"), None)
    return f" {ms(e.t_us - est.t_us)} after its ESTABLISHED" if est else ""


RULES = (connection_stays_up,)
