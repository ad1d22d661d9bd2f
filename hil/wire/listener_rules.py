"""The wire rule that a listener's destroy leaves its accepted connections up.

rdma_cm destroys a listener's own cm_id only: the ids it handed out are the
application's (invariant 6, docs/contract.md; cma.c ``cma_cancel_listens``
and iwcm.c ``iw_destroy_cm_id`` on the listening id, siw_cm.c
``siw_destroy_listen`` releasing the listening socket alone, 6.1).  So
between an accepted connection's listener destroy and the first action that
may end the connection (a close on one of its ids, a pull, a kill, the loss
of a device or channel) no FIN, RST or TERMINATE of that connection may be
on the wire.  The contract's ``listener-destroy-rejects-pending`` judges the
events; this judges the packets, which also show a close whose events came
late or never.
"""

from __future__ import annotations

from hil.judge.timeline import LINK_DOWNS, SIDES, Action
from hil.wire.close_rules import CLOSE_ACTIONS
from hil.wire.link import Link
from hil.wire.model import Packet
from hil.wire.rule import Outcome, WireCase, WireFinding, evidence, judged

# Actions that may end every connection of a host, whatever id they name.
HOST_ENDERS = frozenset({*LINK_DOWNS, "restore", "delete_netdev", "close_channel", "kill"})
# Actions on one of the connection's ids that may end it (a WRITE the peer may refuse).
ENDERS_ON_IDS = frozenset({*CLOSE_ACTIONS, "write"})


def _listener_destroy(lk: Link) -> Action | None:
    """The destroy of the listener that took ``lk``'s request, once both ends were
    ESTABLISHED (None when the listener outlived the test, or it was not accepted)."""
    passive = [e for e in lk.events() if e.side != lk.active_side]
    listener = next((e.listen_id for e in passive if e.type == "CONNECT_REQUEST"), None)
    if listener is None or not any(a.ok for a in lk.actions("accept")):
        return None
    destroy = next(
        (a for a in lk.timeline.actions if a.name == "destroy" and a.id == listener and a.ok),
        None,
    )
    if destroy is None:
        return None
    up = {e.side for e in lk.events() if e.type == "ESTABLISHED" and e.t_us <= destroy.t_us}
    return destroy if len(up) == 2 else None


def _ender(lk: Link, after: Action) -> Action | None:
    """The first action after ``after`` that may end the connection: a close or a WRITE
    on its ids, or one that ends every connection of a host."""
    on_link = {id(a) for a in lk.actions()}
    for a in sorted(lk.timeline.actions, key=lambda a: a.t_us):
        if a.t_us < after.t_us or a is after:
            continue
        if a.name in HOST_ENDERS or (id(a) in on_link and a.name in ENDERS_ON_IDS):
            return a
    return None


def _teardown(p: Packet) -> bool:
    return bool(p.flags & {"FIN", "RST"}) or p.terminate is not None


def listener_destroy_keeps_accepted(case: WireCase) -> Outcome:
    findings, count = [], 0
    for lk in case.links:
        destroy = _listener_destroy(lk)
        if destroy is None or lk.wire is None:
            continue
        accept = next(a for a in lk.actions("accept") if a.ok)
        ender = _ender(lk, accept)
        if ender is not None and ender.t_us <= destroy.t_us:
            continue  # already being closed when the listener went
        count += 1
        host = lk.timeline.pair[SIDES.index(destroy.side)]
        early = [
            p
            for p in lk.wire.seen_by()
            if _teardown(p)
            and p.t_us is not None
            and p.t_us + case.slack_us(p, host) >= destroy.t_us
            and (ender is None or p.t_us + case.slack_us(p, host) < ender.t_us)
        ]
        if early:
            until = f"before {ender.brief()}" if ender else "with nothing closing it"
            findings.append(
                WireFinding(
                    f"{destroy.brief()} (the listener) was followed by "
                    f"{'/'.join(_kinds(early))} on its accepted connection {until}",
                    lk.wire.name,
                    evidence(*early[:3]),
                )
            )
    return judged(findings, count, "no listener destroyed under an accepted connection")


def _kinds(packets: list[Packet]) -> list[str]:
    found: set[str] = {f for p in packets for f in ("FIN", "RST") if f in p.flags}
    if any(p.terminate is not None for p in packets):
        found.add("TERMINATE")
    return sorted(found)
