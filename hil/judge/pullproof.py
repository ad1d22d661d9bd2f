"""The contract's rules that a link pull proves itself: the link really went down and came
back, and the pulled host's RDMA port showed it as its profile says.

The ``link_pull`` sequence (:mod:`hil.cm.sequences.linkpull`) records, per
pull, a ``link_state`` action while the link is pulled (``phase`` ``pulled``)
and one after the restore (``restored``), each with ``ends``: both ends of the
link as their hosts saw them (:class:`hil.host.linkctl.EndState`: netdev up,
carrier, operstate, hil's blackhole table, the RDMA port's state); and, where
the pulled host's profile says what its port shows in the pull's mode
(:meth:`~hil.judge.profile.Profile.port_promise`), an ``async_watch`` action
across the pull and the restore (:mod:`hil.cm.asyncwatch`).

- ``link-pull-effective``: some end shows the link down while it is pulled
  (netdev down, no carrier, or its frames dropped), and no end does after
  the restore; else "pull not effective" (or "restore not effective"),
  naming the mode, the hosts and what they showed;
- ``link-pull-port-state``: the pulled host's RDMA port is in the profile's
  state while pulled, ACTIVE after the restore;
- ``link-pull-port-events``: the watch saw exactly the profile's port events
  of the pull, then those of the restore (none where it promises none).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hil.judge.corestatus import PORT_ACTIVE, PORT_ERR
from hil.judge.profiles import PortPromise, Profiles
from hil.judge.rule import Finding, actor, host_of, rule
from hil.judge.timeline import Action, Timeline

PORT_EVENTS = (PORT_ERR, PORT_ACTIVE)


def _pulls(tl: Timeline) -> Iterator[tuple[Action, Action | None]]:
    """Each pull that succeeded, and the restore after it (None: none recorded)."""
    for pull in (a for a in tl.actions if a.name == "pull" and a.ok):
        restore = next((a for a in tl.actions if a.name == "restore" and a.t_us > pull.t_us), None)
        yield pull, restore


def _method(pull: Action) -> str:
    """The pull's mode as the inventory names it (``carrier``, ``blackhole``, ...)."""
    return str(pull.params.get("method", pull.params.get("mode")))


def _promised(
    tl: Timeline, profile: Profiles
) -> Iterator[tuple[Action, Action | None, str, PortPromise]]:
    """Each pull whose host's profile says what its port shows in the pull's mode: the
    pull, its restore, the mode and that promise."""
    for pull, restore in _pulls(tl):
        promise = actor(profile, tl, pull).port_promise(_method(pull))
        if promise is not None:
            yield pull, restore, _method(pull), promise


def _sample(tl: Timeline, pull: Action, phase: str) -> Action | None:
    """The pull's ``link_state`` action of ``phase`` (the last one after the pull)."""
    found = [
        a
        for a in tl.actions
        if a.name == "link_state" and a.params.get("phase") == phase and a.t_us >= pull.t_us
    ]
    return found[0] if found else None


def down(end: dict[str, Any]) -> str:
    """What shows an end of a link (a :class:`hil.host.linkctl.EndState`'s fields) down:
    netdev down, no carrier, frames dropped by hil's blackhole table; "" when nothing."""
    seen = [("netdev down", not end.get("up")), ("no carrier", not end.get("carrier"))]
    seen.append(("blackholed", bool(end.get("blackholed"))))
    return ", ".join(what for what, true in seen if true)


def _shown(ends: list[dict[str, Any]]) -> str:
    """``lab-a eth1: up, carrier, operstate UP, not blackholed; lab-b ...``."""
    return "; ".join(
        f"{e.get('host')} {e.get('netdev')}: {'up' if e.get('up') else 'down'}, "
        f"{'carrier' if e.get('carrier') else 'no carrier'}, operstate {e.get('operstate')}, "
        f"{'' if e.get('blackholed') else 'not '}blackholed"
        for e in ends
    )


@rule(
    "link-pull-effective",
    None,
    "A link pull really takes the link down: while it is pulled, some end's netdev is "
    "down, has no carrier, or has its frames dropped; after the restore no end is",
    "[doc] rtnetlink IFF_UP / IFLA_CARRIER / IFLA_OPERSTATE (Documentation/networking/"
    "operstates.rst); nft(8) netdev ingress/egress hooks",
)
def link_pull_effective(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for pull, restore in _pulls(tl):
        how = f"{_method(pull)} pull on side {pull.side}"
        pulled = _sample(tl, pull, "pulled")
        if pulled is None:
            yield Finding(f"pull not effective: the {how} was not checked", (), (pull,))
            continue
        ends = pulled.params.get("ends", [])
        if not any(down(e) for e in ends):
            yield Finding(
                f"pull not effective: {how}, and both ends still up: {_shown(ends)}",
                (),
                (pull, pulled),
            )
        back = _sample(tl, restore, "restored") if restore is not None else None
        if restore is None or back is None:
            continue
        still = [f"{e.get('host')} {e.get('netdev')}: {down(e)}" for e in ends_of(back) if down(e)]
        if still:
            yield Finding(
                f"restore not effective: after the {how} was restored, {'; '.join(still)}",
                (),
                (pull, restore, back),
            )


def ends_of(sample: Action) -> list[dict[str, Any]]:
    """The ends a ``link_state`` action recorded."""
    return list(sample.params.get("ends", []))


def _pulled_end(tl: Timeline, pull: Action, sample: Action) -> dict[str, Any] | None:
    host = host_of(tl, pull.side)
    return next((e for e in ends_of(sample) if e.get("host") == host), None)


@rule(
    "link-pull-port-state",
    None,
    "While the link is pulled, the pulled host's RDMA port (rdma link, ibv_devinfo: "
    "ib_query_port) is in the state its profile gives for the pull's mode; after the "
    "restore it is ACTIVE again",
    "[src] siw: siw_main.c siw_netdev_event, siw_verbs.c siw_query_port (6.1); "
    "cxgb4: not known, not judged",
)
def link_pull_port_state(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for pull, restore, method, promise in _promised(tl, profile):
        checks = [("pulled", pull, promise.state, "while pulled")]
        if restore is not None:
            checks.append(("restored", restore, "ACTIVE", "after the restore"))
        for phase, after, want, when in checks:
            sample = _sample(tl, after, phase)
            end = _pulled_end(tl, pull, sample) if sample is not None else None
            got = end.get("port_state") if end is not None else None
            if got != want:
                yield Finding(
                    f"{method} pull: the RDMA port of {host_of(tl, pull.side)} was "
                    f"{got or 'not read'} {when}, expected {want} ({promise.source})",
                    (),
                    tuple(a for a in (pull, sample) if a is not None),
                )


@rule(
    "link-pull-port-events",
    None,
    "The pulled host's verbs users get the port events its profile gives for the pull's "
    "mode, the pull's then the restore's (siw admin: IBV_EVENT_PORT_ERR, then "
    "IBV_EVENT_PORT_ACTIVE; siw carrier or blackhole: none)",
    "[src] siw_main.c siw_netdev_event (6.1, NETDEV_DOWN / NETDEV_UP); [lab] siw: "
    "seen by ibv_asyncwatch",
)
def link_pull_port_events(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for pull, restore, method, promise in _promised(tl, profile):
        watch = _watch(tl, pull)
        if watch is None:
            yield Finding(
                f"the {method} pull on side {pull.side} was not watched for async events",
                (),
                (pull,),
            )
            continue
        if not watch.ok:
            yield Finding(
                f"the async event watch on side {pull.side} failed: {watch.result}",
                (),
                (pull, watch),
            )
            continue
        spans_restore = restore is not None and restore.t_us <= watch.end_us
        want = promise.down + (promise.up if spans_restore else ())
        seen = [e for e in watch.params.get("events", []) if e in PORT_EVENTS]
        if tuple(seen) != want:
            yield Finding(
                f"{method} pull on side {pull.side}: port events {', '.join(seen) or 'none'}, "
                f"expected {', '.join(want) or 'none'} ({promise.source})",
                (),
                (pull, watch),
            )


def _watch(tl: Timeline, pull: Action) -> Action | None:
    """The ``async_watch`` on the pulled side that began before the pull and outlasted it."""
    return next(
        (
            a
            for a in tl.actions
            if a.name == "async_watch" and a.side == pull.side and a.t_us <= pull.t_us <= a.end_us
        ),
        None,
    )


RULES = (link_pull_effective, link_pull_port_state, link_pull_port_events)
