"""Storms at the stack's speed: N connections connected and closed by the hosts' workers.

A storm paced by controller round trips (one SSH, agent and worker pipe
trip per connect and per disconnect) measures the harness; here each worker
runs its whole part itself (``cm_call`` op ``storm``, ``hil/agent/remote/cm/storm.py``) and
answers once with every step's host stamps:

- ``listeners`` endpoints on the passive host, each with a listener on its
  own port, serve (accept each request, destroy each id on its DISCONNECTED);
- ``processes`` endpoints on the active host each run ``count / processes``
  connections, step by step for all as rdma-core's cmtime does (one thread
  makes every call and reads every event), started at one controller time
  (turned into the host's clock by its offset);
- every call comes back as an action and every event as an event, on one
  timeline the contract judges; each connection is labelled by the private
  data its connect carried (``hil-storm-pK-NNNN``), so both sides' ids are
  one connection.

``hold_s`` > 0 leaves the listeners' channels unread for that long, so
requests queue in the kernel: past the listener's backlog (the asked one,
capped by the passive host's ``net.rdma_ucm.max_backlog``) ucma refuses them
and the active side gets REJECTED.  :class:`~hil.cm.stormstats.StormResult`
then says how many rejects that backlog predicts.

```python
tl, result = run_storm(session, count=64, processes=4)
print(result.table())            # per step p50/p99/max, rates
```
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from hil.agent import protocol as wire
from hil.agent.client import cm_request
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.steps import Listener, waits
from hil.cm.stormstats import ACTIVE_STEPS, PASSIVE_STEPS, StormResult, rate, stats
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

MAX_COUNT = 1024
LEAD_S = 1.0  # the active start lies this far ahead: serves started, a held channel paused
REPLY_SLACK_S = 30.0  # past a worker's deadline: its last destroys, the reply's way back
MAX_BACKLOG_SYSCTL = "net.rdma_ucm.max_backlog"
HELD_IDLE_S = 1.0  # a held listener's serving ends this long after its last event


def _check(count: int, processes: int, listeners: int, parallel: int, traffic: int) -> None:
    if not 1 <= count <= MAX_COUNT:
        raise InputError(f"storm count must be 1..{MAX_COUNT}, not {count}")
    if not 1 <= processes <= min(16, count):
        raise InputError(f"processes must be 1..{min(16, count)} (and <= count), not {processes}")
    if not 1 <= listeners <= 16:
        raise InputError(f"listeners must be 1..16, not {listeners}")
    if not 1 <= parallel <= 64:
        raise InputError(f"parallel must be 1..64, not {parallel}")
    if not 0 <= traffic <= 16:
        raise InputError(f"traffic must be 0..16 SENDs per connection, not {traffic}")


def run_storm(
    s: PairSides,
    count: int = 16,
    processes: int = 1,
    listeners: int = 1,
    parallel: int = 1,
    traffic: int = 0,
    backlog: int = 0,
    hold_s: float = 0.0,
) -> tuple[Timeline, StormResult]:
    """A storm of ``count`` connections (see the module doc); its timeline and numbers.

    ``parallel``: threads per active process issuing rdma_connect (1, cmtime's shape:
    the worker's one thread issues every call and reads every event); ``traffic``:
    SENDs per connection once all are established; ``backlog``: each listener's
    (0: its share of ``count``, so none is refused); ``hold_s``: how long the
    listeners leave their requests unread.
    """
    _check(count, processes, listeners, parallel, traffic)
    with s.recording(f"host-storm-{count}") as rec:
        with ThreadPoolExecutor(max_workers=processes + listeners) as pool:
            passive = list(pool.map(lambda _: rec.endpoint(s.passive), range(listeners)))
            active = list(pool.map(lambda _: rec.endpoint(s.active), range(processes)))
        shares = [count // processes + (k < count % processes) for k in range(processes)]
        asked = backlog or max(shares)
        lst = [steps.listen(rec, s.passive, backlog=asked, ep=ep) for ep in passive]
        max_backlog = int(s.agent(s.passive).sysctl(MAX_BACKLOG_SYSCTL))
        effective = asked if 0 < asked <= max_backlog else max_backlog
        w = waits(s)
        wait_s = max(w.reply_s, w.close_s) + hold_s
        deadline_s = 4 * wait_s + count * 0.05
        start = controller_us() + int(LEAD_S * 1e6)

        def serve(k: int) -> wire.StormReply:
            lis = lst[k]
            params = wire.StormParams(
                role="serve",
                count=sum(shares[k::listeners]),
                listen_id=lis.ep.handle(lis.id),
                traffic=traffic,
                hold_s=hold_s,
                start_us=start - lis.ep.offset.offset_us,
                wait_s=wait_s,
                deadline_s=deadline_s,
                after=lis.ep.cursor,
            )
            if hold_s > 0:  # every request came during the hold (or was refused): none later
                params["idle_s"] = HELD_IDLE_S
            return _call(lis.ep, params, deadline_s + hold_s)

        def connect(k: int) -> wire.StormReply:
            ep, lis = active[k], lst[k % listeners]
            params = wire.StormParams(
                role="connect",
                count=shares[k],
                dst=s.address(s.passive),
                port=lis.port,
                src=s.address(s.active),
                parallel=parallel,
                traffic=traffic,
                tag=f"hil-storm-p{k}-",
                start_us=start - ep.offset.offset_us,
                wait_s=wait_s,
                deadline_s=deadline_s,
                after=ep.cursor,
            )
            return _call(ep, params, deadline_s)

        with ThreadPoolExecutor(max_workers=processes + listeners) as pool:
            served = [pool.submit(serve, k) for k in range(listeners)]
            made = [pool.submit(connect, k) for k in range(processes)]
            a_replies = [(active[k], f.result()) for k, f in enumerate(made)]
            p_replies = [(lst[k].ep, f.result()) for k, f in enumerate(served)]
        for ep, reply in a_replies + p_replies:
            _record(ep, reply)
        _label(rec, a_replies, p_replies)
        per_listener = [sum(shares[k::listeners]) for k in range(listeners)]
        expected = sum(max(0, n - effective) for n in per_listener) if hold_s > 0 else 0
        result = _result(a_replies, p_replies, processes, lst, effective, max_backlog, expected)
        for name, value in result.metrics().items():
            rec.metric(name, value)
    return rec.timeline(), result


def _call(ep: Endpoint, params: wire.StormParams, deadline_s: float) -> wire.StormReply:
    return cm_request(ep.agent, ep.number, wire.OP_STORM, params, deadline_s + REPLY_SLACK_S)


def _record(ep: Endpoint, reply: wire.StormReply) -> None:
    """The worker's events, then its calls as actions (host times moved onto ours)."""
    ep.ingest(reply["log"])
    for a in reply["actions"]:
        ep.add_host_action(a)


def _label(
    rec: Recording,
    a_replies: list[tuple[Endpoint, wire.StormReply]],
    p_replies: list[tuple[Endpoint, wire.StormReply]],
) -> None:
    """Tie each connection's two ids together by the private data its connect carried."""
    ids: dict[str, list[str | None]] = {}
    for ep, reply in a_replies + p_replies:
        for c in reply["conns"]:
            ids.setdefault(c["tag"], []).append(ep.name(c.get("id")))
    for tag, both in ids.items():
        rec.label(tag, *both)


def _result(
    a_replies: list[tuple[Endpoint, wire.StormReply]],
    p_replies: list[tuple[Endpoint, wire.StormReply]],
    processes: int,
    lst: list[Listener],
    backlog: int,
    max_backlog: int,
    expected_rejects: int,
) -> StormResult:
    """The numbers: every process of one side is on one host, one clock."""
    a_conns = [c for _, r in a_replies for c in r["conns"]]
    p_conns = [c for _, r in p_replies for c in r["conns"]]
    by_step: dict[str, list[list[int]]] = {}
    for c in a_conns:
        for name, stamp in c.get("steps", {}).items():
            by_step.setdefault(name, []).append(stamp)
    p_by_step: dict[str, list[list[int]]] = {}
    for c in p_conns:
        for name, stamp in c.get("steps", {}).items():
            p_by_step.setdefault(name, []).append(stamp)
    active_stats = stats(by_step, ACTIVE_STEPS)
    closed = len(by_step.get("disconnect", []))
    connect = next((x for x in active_stats if x.step == "connect"), None)
    disconnect = next((x for x in active_stats if x.step == "disconnect"), None)
    first = min((st[0] for st in by_step.get("create_id", [])), default=0)
    last = max((st[0] + st[1] for st in by_step.get("destroy", [])), default=0)
    return StormResult(
        count=len(a_conns),
        processes=processes,
        listeners=len(lst),
        backlog=backlog,
        max_backlog=max_backlog,
        expected_rejects=expected_rejects,
        established=len(by_step.get("connect", [])),
        rejected=sum(c["result"] == "REJECTED" for c in a_conns),
        failed=tuple(
            f"{c['tag']}: {c['result']}" for c in a_conns if c["result"] not in ("ok", "REJECTED")
        ),
        closed_active=closed,
        closed_passive=len(p_by_step.get("disconnected", [])),
        steps=active_stats,
        passive_steps=stats(p_by_step, PASSIVE_STEPS),
        rate_per_s=rate(closed, connect, disconnect),
        cycle_rate_per_s=closed / max(1e-6, (last - first) / 1e6) if closed and last else 0.0,
    )


@sequence
def storm(
    s: PairSides,
    count: int = 16,
    processes: int = 1,
    listeners: int = 1,
    parallel: int = 1,
    traffic: int = 0,
    backlog: int = 0,
    hold_s: float = 0.0,
) -> Timeline:
    """``count`` connections connected and closed by the hosts' workers (per-step latencies)."""
    tl, _ = run_storm(s, count, processes, listeners, parallel, traffic, backlog, hold_s)
    return tl
