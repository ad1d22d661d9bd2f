"""Measure a pair's profile bounds: each bounded sequence N times, the proposal beside the
profile's value, and the statuses each event type really carried.

    .venv/bin/python bench/profile_measure.py [--inventory INV] [--pair NAME] \\
        [--runs 20] [--only listener_destroy] [--margin 2.5] [--floor-ms 100]

Without ``--inventory`` (and no ``$HIL_INVENTORY``) it uses the running virtual lab
(``$HIL_LAB_DIR`` or hil lab's default directory) and never boots one; on the virtual
lab run it under ``flock /tmp/hil-lab.lock``.  The pair is leased once; each run is one
test of a :class:`hil.run.PairRun` without wire capture or evidence (with both under
``--as-suites``, as the suites run); the contract is always judged: a verdict that
fails is printed beside the run, its number still counts.
Per bound it prints runs, min/median/p99/max and the proposed bound
(:func:`hil.judge.provenance.propose_s`) next to the current profile's; per event type the
statuses seen and any the profile's set lacks.  How and what it costs:
docs/profile-measure.md.  Exit 0, 1 on bad input, 3 when a sequence failed every run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchmain  # bench/, beside this script

from hil.errors import EXIT_INFRA, EXIT_OK, HilError, InputError
from hil.judge.profile import Profile
from hil.judge.provenance import FLOOR_S, MARGIN, propose_s
from hil.judge.timeline import Action, Timeline

Metric = Callable[[Timeline], float | None]


def _first(actions: Iterable[Action], name: str) -> Action | None:
    return next((a for a in actions if a.name == name and a.ok), None)


def _close_s(tl: Timeline, act: Action) -> float | None:
    """From ``act`` (an rdma_disconnect) to its id's first DISCONNECTED."""
    discs = [e.t_us for e in tl.events_for(act.id) if e.type == "DISCONNECTED"]
    return (min(discs) - act.t_us) / 1e6 if discs else None


def local_close_s(tl: Timeline) -> float | None:
    """The initiator's DISCONNECTED after its rdma_disconnect (rule disconnect-completes-within)."""
    act = _first(tl.actions, "disconnect")
    if act is None or act.id is None:
        return None
    return _close_s(tl, act)


def slowest_local_close_s(tl: Timeline) -> float | None:
    """The slowest initiator DISCONNECTED after its first rdma_disconnect, over every id of
    the run (a storm's: rule disconnect-completes-within judges each of them)."""
    firsts = [
        a
        for a in tl.actions
        if a.name == "disconnect" and a.ok and a.id and tl.actions_for(a.id, "disconnect")[0] is a
    ]
    return max((t for a in firsts if (t := _close_s(tl, a)) is not None), default=None)


def destroy_blocked_s(tl: Timeline) -> float | None:
    """How long the sequence's measured destroy blocked (metric ``destroy_blocked_us``)."""
    us = tl.metrics.get("destroy_blocked_us")
    return us / 1e6 if us is not None else None


def conn_sent_waited_s(tl: Timeline) -> float | None:
    """From rdma_connect to the return of the destroy in CONN_SENT
    (rule destroy-in-conn-sent-bounded's lower bound)."""
    connect = _first(tl.actions, "connect")
    destroy = next(
        (a for a in tl.actions if a.name == "destroy" and connect and a.id == connect.id), None
    )
    if connect is None or destroy is None or destroy.duration_us is None:
        return None
    return (destroy.end_us - connect.t_us) / 1e6


def detection_s(tl: Timeline) -> float | None:
    """The first DISCONNECTED after a link pull (metric ``detection_us``)."""
    us = tl.metrics.get("detection_us")
    return us / 1e6 if us is not None else None


def unreachable_s(tl: Timeline) -> float | None:
    """How long a connect during a pull took to end: its own failure (siw) or its reply."""
    pull = _first(tl.actions, "pull")
    if pull is None:
        return None
    act = next((a for a in tl.actions if a.name == "connect" and a.t_us > pull.t_us), None)
    if act is None:
        return None
    if not act.ok:
        return (act.duration_us or 0) / 1e6
    replies = [e.t_us for e in tl.events_for(act.id) if e.t_us > act.t_us]
    return (min(replies) - act.t_us) / 1e6 if replies else None


@dataclass(frozen=True)
class Bound:
    """One profile field and the metric of a run that measures it (``lower``: the field
    is the least the metric may be, as ``conn_sent_destroy_min_s``)."""

    field: str
    metric: Metric
    what: str
    lower: bool = False


@dataclass(frozen=True)
class Plan:
    """One bounded sequence (``--only NAME``) and the bounds its runs measure
    (``direction``: which host connects, when the plan fixes it; ``named_only``: it
    runs only when ``--only`` names it)."""

    name: str
    sequence: str
    params: dict[str, Any]
    bounds: tuple[Bound, ...]
    direction: str | None = None
    named_only: bool = False


PLANS = (
    Plan(
        "local_close",
        "close",
        {"by": "active"},
        (Bound("local_close_bound_s", local_close_s, "initiator DISCONNECTED - rdma_disconnect"),),
    ),
    # A KASAN kernel's close bound (siwprofile.SIW_LOCAL_CLOSE_KASAN), on the debug lab:
    # the slowest close of 7874eeacfa42's storm, 256 connections closing at once.
    Plan(
        "storm_close",
        "regress_iwcm_connect_disconnect_storm",
        {"count": 256},
        (Bound("local_close_bound_s", slowest_local_close_s, "slowest of 256 closes"),),
        named_only=True,
    ),
    Plan(
        "listener_destroy",
        "listener_destroy",
        {},
        (Bound("listener_destroy_bound_s", destroy_blocked_s, "the listener's destroy: us"),),
    ),
    Plan(
        "conn_sent_destroy",
        "destroy_conn_sent",
        {},
        (
            Bound("conn_sent_destroy_bound_s", destroy_blocked_s, "the destroy's us"),
            Bound("conn_sent_destroy_min_s", conn_sent_waited_s, "connect to destroy's end", True),
        ),
    ),
    # [lab] the link's blackhole end is host A: connecting from A its own egress hook
    # drops the SYNs (a local send failure, retried every 500 ms); from B they are lost
    # at the peer and TCP's SYN timer runs (docs/contract.md "seen on the lab").
    Plan(
        "unreachable",
        "unreachable",
        {"mode": "blackhole"},
        (Bound("unreachable_bound_s", unreachable_s, "connect to its end, own end dropped"),),
        "a-b",
    ),
    Plan(
        "unreachable_peer",
        "unreachable",
        {"mode": "blackhole"},
        (Bound("unreachable_bound_s", unreachable_s, "connect to its end, peer end dropped"),),
        "b-a",
    ),
    Plan(
        "admin_down",
        "link_pull",
        {"mode": "admin"},
        (Bound("admin_down_bound_s", detection_s, "detection_us, admin pull, idle"),),
    ),
    # [lab] one bound for both: under traffic the DISCONNECTED comes later (218 ms once
    # against an idle p99 of 80 ms), so both are measured.
    Plan(
        "admin_down_traffic",
        "link_pull",
        {"mode": "admin", "traffic": True},
        (Bound("admin_down_bound_s", detection_s, "detection_us, admin pull, traffic"),),
    ),
    Plan(
        "pull_traffic",
        "link_pull",
        {"mode": "carrier", "traffic": True},
        (Bound("pull_traffic_bound_s", detection_s, "detection_us, carrier pull, traffic"),),
    ),
)


def plan_named(name: str) -> Plan:
    """The plan ``--only NAME`` names; InputError naming the known ones."""
    for plan in PLANS:
        if plan.name == name:
            return plan
    raise InputError(f"no bounded sequence {name!r} (known: {', '.join(p.name for p in PLANS)})")


@dataclass
class Samples:
    """What the runs of one plan gave: values per bound, statuses per event type, failures."""

    values: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, set[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, plan: Plan, tl: Timeline) -> list[str]:
        """Take one run's timeline; returns what it measured, in words."""
        said = []
        for e in tl.events:
            self.statuses.setdefault(e.type, set()).add(e.status)
        for b in plan.bounds:
            value = b.metric(tl)
            if value is None:
                said.append(f"{b.field}: not measured")
                continue
            self.values.setdefault(b.field, []).append(value)
            said.append(f"{b.field} {value * 1e3:.1f} ms")
        return said


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (with 20 runs, p99 is the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def bound_row(
    b: Bound, values: list[float], current: float | None, margin: float, floor_s: float
) -> str:
    """One bound's line: runs, min/median/p99/max (ms), the proposal and the profile's value."""
    if not values:
        return f"{b.field:<28} no run measured it ({b.what})"
    p99 = percentile(values, 99)
    proposed = max(0.0, min(values) - floor_s) if b.lower else propose_s(p99, margin, floor_s)
    cur = "none" if current is None else f"{current:g} s"
    return (
        f"{b.field:<28} runs {len(values):>3}  min {min(values) * 1e3:9.1f}  "
        f"median {statistics.median(values) * 1e3:9.1f}  p99 {p99 * 1e3:9.1f}  "
        f"max {max(values) * 1e3:9.1f} ms  proposed {proposed:.3f} s  profile {cur}"
    )


def status_rows(statuses: dict[str, set[int]], profile: Profile) -> list[str]:
    """Per event type: the statuses seen, and those the profile's set lacks."""
    rows = []
    for kind, seen in sorted(statuses.items()):
        allowed = profile.statuses_of(kind)
        lacks = sorted(seen - allowed) if allowed is not None else sorted(seen)
        note = f"  NOT IN PROFILE: {lacks}" if lacks else ""
        rows.append(f"{kind:<20} seen {sorted(seen)}  profile {sorted(allowed or ())}{note}")
    return rows


def _default_inventory() -> str:
    """$HIL_INVENTORY, else the running virtual lab's (never boots one)."""
    if os.environ.get("HIL_INVENTORY"):
        return os.environ["HIL_INVENTORY"]
    from hil.lab.control import inventory_path
    from hil.lab.state import default_dir

    return str(inventory_path(Path(os.environ.get("HIL_LAB_DIR") or default_dir())))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measure(run: Any, plan: Plan, args: argparse.Namespace) -> Samples:
    """``args.runs`` runs of ``plan`` on the leased pair, each reported as it ends; stops
    after ``args.max_failures`` failed runs or past ``args.budget`` seconds."""
    from hil.run.testparts import TestOptions

    # --as-suites: the link captured and the evidence read, as around a suite test; the
    # capture's tcpdump shares the guest's one vCPU with the stack being timed.
    options = TestOptions(wire=args.as_suites, evidence=args.as_suites, attempts=False)
    got = Samples()
    stop_at = time.monotonic() + args.budget
    for i in range(1, args.runs + 1):
        if time.monotonic() > stop_at:
            got.failures.append(f"budget of {args.budget:g} s spent after {i - 1} runs")
            break
        start = time.monotonic()
        try:
            with run.test(f"profile_measure {plan.name} {i}", options) as t:
                tl = run.session(plan.direction or args.direction).run(plan.sequence, **plan.params)
        except HilError as e:
            got.failures.append(f"run {i}: {type(e).__name__}: {e}")
            _say(f"{plan.name} {i}/{args.runs}: FAILED {type(e).__name__}: {e}")
            if len(got.failures) >= args.max_failures:
                break
            continue
        said = got.add(plan, tl)
        took = time.monotonic() - start
        failed = t.result.failures if t.result else ()
        note = f"  (verdicts failed: {'; '.join(failed)[:300]})" if failed else ""
        _say(f"{plan.name} {i}/{args.runs}: {', '.join(said)} [{took:.1f} s]{note}")
    return got


def report(plan: Plan, got: Samples, profile: Profile, args: argparse.Namespace) -> None:
    """The plan's bounds and statuses, on stdout."""
    print(f"== {plan.name}: {plan.sequence} {plan.params or ''}, profile {profile.name}")
    for b in plan.bounds:
        current = getattr(profile, b.field)
        print(bound_row(b, got.values.get(b.field, []), current, args.margin, args.floor_ms / 1e3))
    for row in status_rows(got.statuses, profile):
        print(f"  {row}")
    for failure in got.failures:
        print(f"  FAILED {failure}")
    sys.stdout.flush()


def report_together(
    together: dict[str, tuple[Bound, list[float]]],
    plans: list[Plan],
    profile: Profile,
    args: argparse.Namespace,
) -> None:
    """A bound measured by more than one of the plans run: all their runs in one row."""
    for name, (b, values) in together.items():
        if sum(any(x.field == name for x in p.bounds) for p in plans) > 1:
            print(f"== {name}, all plans' runs together")
            row = bound_row(b, values, getattr(profile, name), args.margin, args.floor_ms / 1e3)
            print(row)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, lease the pair once, measure each plan, print its report."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--inventory", help="the inventory (default $HIL_INVENTORY, else the virtual lab's)"
    )
    p.add_argument("--pair", help="this pair (a link name); default: the first free one")
    p.add_argument("--store", help="the reservation store (default: hil's SQLite file)")
    p.add_argument("--runs", type=int, default=20, help="runs per sequence (default 20)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        help="this sequence only (repeatable): " + ", ".join(pl.name for pl in PLANS),
    )
    p.add_argument("--direction", choices=("a-b", "b-a"), default="a-b")
    p.add_argument("--margin", type=float, default=MARGIN, help=f"p99 x this (default {MARGIN:g})")
    p.add_argument("--floor-ms", type=float, default=FLOOR_S * 1e3, help="at least p99 + this")
    p.add_argument("--budget", type=float, default=900.0, help="seconds per sequence (default 900)")
    p.add_argument(
        "--max-failures", type=int, default=3, help="failed runs before a sequence stops"
    )
    p.add_argument("--wait", type=float, default=60.0, help="seconds to queue for a busy pair")
    p.add_argument("--timeout-agent", type=float, default=30.0, help="bound of one agent call")
    p.add_argument(
        "--timeout-step-slack", type=float, default=10.0, help="a step's wait past its bound"
    )
    p.add_argument(
        "--as-suites",
        action="store_true",
        help="capture the link and read the evidence in each run, as around a suite test",
    )
    args = p.parse_args(argv)
    # SIGTERM too unwinds the PairRun, so a stopped run restores and frees its pair.
    return benchmain.run("profile_measure", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    from hil.inventory import loader
    from hil.reservation import open_store
    from hil.run import PairRequest, PairRun
    from hil.timeouts import configured

    if args.runs < 1:
        raise InputError(f"--runs must be at least 1, not {args.runs}")
    plans = (
        [plan_named(n) for n in args.only] if args.only else [p for p in PLANS if not p.named_only]
    )
    inv = loader.load(args.inventory or _default_inventory())
    request = PairRequest(pair=args.pair, holder="bench/profile_measure.py", wait=args.wait)
    bounds = configured(agent_call_s=args.timeout_agent, step_slack_s=args.timeout_step_slack)
    failed = 0
    together: dict[str, tuple[Bound, list[float]]] = {}  # a bound two plans measure
    with (
        bounds,
        open_store(args.store) as store,
        PairRun(inv, store, request, progress=_say) as run,
    ):
        run.set_up()
        for plan in plans:
            direction = plan.direction or args.direction
            active = run.pair.hosts[0 if direction == "a-b" else 1].name
            profile = run.profile.of(active)  # the acting host's, as the rules judge it
            got = measure(run, plan, args)
            report(plan, got, profile, args)
            for b in plan.bounds:
                together.setdefault(b.field, (b, []))[1].extend(got.values.get(b.field, []))
            failed += not got.values
        report_together(together, plans, profile, args)
    return EXIT_INFRA if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
