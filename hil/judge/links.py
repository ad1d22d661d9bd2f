"""The contract's link rules: a pulled link detected within the profile's bound, and a
connect made while the link is pulled (what a pull must show of itself is
:mod:`hil.judge.pullproof`).

``link-pull-detected-within`` reads the pair's bound for the pull's kind
(:meth:`~hil.judge.profiles.Profile.link_pull_bound_s`; a pair of two
profiles: the later of their bounds) and finds nothing where the profile
promises nothing (siw idle: no keepalive).  ``unreachable-connect-ends`` judges a connect
made while a carrier-kind pull is in effect (the ``unreachable`` sequence).
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.profiles import Profile, Profiles
from hil.judge.rule import Finding, actor, errno_name, ms, replies, rule
from hil.judge.timeline import Action, Event, Timeline


@rule(
    "link-pull-detected-within",
    None,
    "With the link down at least as long as the profile's bound, every connection "
    "established before the pull sees a DISCONNECTED on some side within the bound "
    "(a mixed pair: the larger of the two hosts' bounds)",
    "[lab] siw tcp_retries2=5: ~12 s under traffic; idle never [inferred]; cxgb4 [inferred]",
)
def _link_pull(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for pull in (a for a in tl.actions if a.name == "pull" and a.ok):
        bound_s = profile.link_pull_bound_s(
            str(pull.params.get("mode", "carrier")), bool(pull.params.get("traffic", False))
        )
        if bound_s is None:
            continue
        bound_us = bound_s * 1e6 + tl.uncertainty_us(*tl.pair)
        restores = [a.t_us for a in tl.actions if a.name == "restore" and a.t_us > pull.t_us]
        if restores and min(restores) - pull.t_us < bound_us:
            continue  # restored before the provider had to notice
        for conn in _conns_up_at(tl, pull.t_us):
            discs = [e for e in tl.events_of_conn(conn) if e.type == "DISCONNECTED"]
            if not discs or discs[0].t_us - pull.t_us > bound_us:
                took = f"after {ms(discs[0].t_us - pull.t_us)}" if discs else "never"
                yield Finding(
                    f"connection {conn}: DISCONNECTED came {took} after the link "
                    f"pull, bound {bound_s:.1f} s",
                    tuple(discs[:1]),
                    (pull,),
                )


def _conns_up_at(tl: Timeline, t_us: int) -> list[str]:
    """Connections with an ESTABLISHED and no DISCONNECTED before ``t_us``."""
    up = {e.conn for e in tl.events if e.conn and e.type == "ESTABLISHED" and e.t_us < t_us}
    down = {e.conn for e in tl.events if e.conn and e.type == "DISCONNECTED" and e.t_us < t_us}
    return sorted(c for c in up - down if c is not None)


@rule(
    "unreachable-connect-ends",
    None,
    "A connect made while the link is pulled (frames lost, no answer at all) ends as the "
    "connecting host's profile says for an unreachable peer, within its bound (siw: "
    "rdma_connect fails ETIMEDOUT once TCP gives up its SYNs; cxgb4: UNREACHABLE)",
    "[src] siw_cm.c siw_connect (a blocking kernel connect), tcp_model_timeout from "
    "TCP_TIMEOUT_INIT; cxgb4 cm.c act_open_rpl -ETIMEDOUT; [lab] siw",
)
def _unreachable(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "connect"):
        pull = _pulled_at(tl, act.t_us)
        if pull is None:
            continue
        connector = actor(profile, tl, act)
        bound_us = connector.unreachable_bound_s * 1e6 + tl.uncertainty_us(*tl.pair)
        got = replies(tl, act.id) if act.ok and act.id else []
        ended = (
            act.end_us
            if connector.unreachable_connect_error
            else (got[0].t_us if got else act.t_us + bound_us)
        )
        if any(a.name == "restore" and pull.t_us < a.t_us < ended for a in tl.actions):
            continue  # the link came back first: the connect may have got through
        yield from _unreachable_end(connector, act, got, bound_us)


def _unreachable_end(
    connector: Profile, act: Action, got: list[Event], bound_us: float
) -> Iterator[Finding]:
    want = connector.unreachable_connect_error
    if want is not None:
        if errno_name(act.result) != want:
            yield Finding(
                f"rdma_connect to a black-holed peer returned {act.result}, expected {want} "
                f"(profile {connector.name})",
                tuple(got),
                (act,),
            )
        elif (act.duration_us or 0) > bound_us:
            yield Finding(
                f"rdma_connect to a black-holed peer failed after {ms(act.duration_us or 0)}, "
                f"bound {ms(bound_us)}",
                (),
                (act,),
            )
        return
    if not act.ok:
        yield Finding(
            f"rdma_connect to a black-holed peer failed ({act.result}); profile "
            f"{connector.name} reports it as an event",
            (),
            (act,),
        )
    elif not got or got[0].t_us - act.t_us > bound_us:
        took = f"{got[0].type} after {ms(got[0].t_us - act.t_us)}" if got else "no reply"
        yield Finding(
            f"connect to a black-holed peer: {took}, bound {ms(bound_us)}", tuple(got[:1]), (act,)
        )
    elif got[0].type not in connector.unreachable_events:
        yield Finding(
            f"connect to a black-holed peer got {got[0].type}, expected one of "
            f"{', '.join(sorted(connector.unreachable_events))}",
            (got[0],),
            (act,),
        )


def _pulled_at(tl: Timeline, t_us: int) -> Action | None:
    """The carrier-kind pull in effect at ``t_us`` (the link drops frames, the hosts'
    netdevs stay up), if any."""
    for pull in (a for a in tl.actions if a.name == "pull" and a.ok and a.t_us < t_us):
        if pull.params.get("mode", "carrier") != "carrier":
            continue
        if not any(a.name == "restore" and pull.t_us < a.t_us <= t_us for a in tl.actions):
            return pull
    return None


RULES = (_link_pull, _unreachable)
