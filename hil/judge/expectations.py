"""Scenario expectations and after-test evidence (invariant 11) as contract rules.

These judge what a scenario's actions should lead to (a reject, a connect
with no listener, a close, a link pull) with the statuses and bounds of the
provider profiles (an event's status by the profile of the host that
reported it, a bound on an action by the profile of the host that acted),
and the resource counts and kernel log a run collected.  A rule whose
trigger is absent from the timeline finds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from hil.judge import links
from hil.judge.answers import no_longer_pending
from hil.judge.irdord import asks_past_limit
from hil.judge.profiles import Profiles
from hil.judge.rule import (
    CLOSE_ACTIONS,
    Finding,
    Rule,
    actor,
    errno_name,
    ms,
    replies,
    reporter,
    rule,
)
from hil.judge.timeline import LINK_DOWNS, Action, Event, Timeline

# Kernel log lines that fail a run (invariant 11): the first line of a kernel report,
# each pattern with the printk that logs it (6.1 and 6.12 alike unless said).  A
# debug kernel's checkers (hil/lab/debug.config) report through WARNING/BUG lines
# too, but kmemleak's scan line, refcount_t's and debug objects' first lines name
# the checker.  The patterns are case-sensitive: "warning" in an info line is none.
KERNEL_REPORTS: tuple[tuple[str, str], ...] = (
    ("WARNING", "kernel/panic.c __warn 'WARNING: CPU: %d PID: %d at %s:%d %pS'; lockdep"),
    ("BUG", "'BUG: ...' (KASAN, 'BUG: workqueue lockup' kernel/workqueue.c); 'kernel BUG at'"),
    ("Oops", "arch/x86/kernel/dumpstack.c __die_header (6.12: 'Oops: %s: %04lx [#%d]...')"),
    (
        "general protection fault",
        "6.1 arch/x86/kernel/traps.c exc_general_protection: __die_header without 'Oops: '",
    ),
    ("KASAN|lockdep", "mm/kasan/report.c, kernel/locking/lockdep.c"),
    ("UBSAN: ", "lib/ubsan.c ubsan_prologue 'UBSAN: %s in %s:%d:%d'"),
    (
        "rcu: INFO: ",
        "kernel/rcu/tree_stall.h print_cpu_stall, print_other_cpu_stall; tree_exp.h "
        "(stall reports; pr_fmt 'rcu: ' of kernel/rcu/tree.c)",
    ),
    (
        "workqueue: .* hogged CPU for ",
        "6.12 kernel/workqueue.c wq_cpu_intensive_report (CONFIG_WQ_CPU_INTENSIVE_REPORT)",
    ),
    (
        "^INFO: ",
        "kernel/hung_task.c check_hung_task 'INFO: task %s:%d blocked for more than "
        "%ld seconds.'; lockdep 'INFO: trying to register non-static key.'",
    ),
    ("unreferenced object|suspected memory leak", "mm/kmemleak.c"),
    ("refcount_t: ", "lib/refcount.c"),
    ("ODEBUG: ", "lib/debugobjects.c"),
)
BAD_KERNEL_LINE = re.compile("|".join(f"(?:{p})" for p, _ in KERNEL_REPORTS))
# Known harmless lines, as regular expressions searched in a line the rule
# would fail; none by default.  iwpm_register_pid's "Unable to send a nlmsg"
# (iwpmd not running; drivers/infiniband/core/iwpm_msg.c) is logged with
# pr_info and never matches BAD_KERNEL_LINE, so allowing it hid nothing:
# whether iwpmd runs where the provider needs it (iw_cxgb4; siw sets
# IW_F_NO_PORT_MAP) is a readiness check that refuses the pair at setup
# (hil/host/portchecks.py, hil host doctor).
DEFAULT_KERNEL_ALLOW: tuple[str, ...] = ()


def _peer_events(tl: Timeline, cm_id: str | None, side: str, types: Sequence[str]) -> list[Event]:
    """The other side's events of the connection ``cm_id`` belongs to."""
    conn = tl.conn_of(cm_id)
    if conn is None:
        return []
    return [e for e in tl.events_of_conn(conn) if e.side != side and e.type in types]


@rule(
    "reject-status",
    None,
    "After rdma_reject (or destroy of an unanswered request) the active side gets "
    "REJECTED with the profile's status and the reject's private data",
    "[lab] siw -104 with private data; [src] cxgb4 cm.c -ECONNREFUSED",
)
def _reject_status(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.ok and a.id and a.name in ("reject", "destroy")):
        events = tl.events_for(act.id)
        unanswered = any(e.type == "CONNECT_REQUEST" for e in events) and not tl.actions_for(
            act.id, "accept"
        )
        if act.name == "destroy" and not unanswered:
            continue
        answers = _peer_events(
            tl, act.id, act.side, ("ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR")
        )
        if not answers:
            continue  # unlabelled connection, or no reply: invariant 1 judges that
        got = answers[0]
        pdata = str(act.params.get("private_data", ""))
        want = reporter(profile, got).reject_status  # the active host maps the reject
        if got.type != "REJECTED" or got.status != want:
            yield Finding(
                f"{act.name} of {act.id} gave the peer {got.type}({got.status}), "
                f"expected REJECTED({want})",
                (got,),
                (act,),
            )
        elif act.name == "reject" and (wrong := pdata_mismatch(pdata, got.private_data)):
            yield Finding(f"REJECTED on {got.id} {wrong} the reject gave", (got,), (act,))


def pdata_mismatch(sent: str, got: str) -> str | None:
    """How delivered private data ``got`` differs from ``sent`` (both hex), said to end
    in "... the call gave"; None when they are the same bytes."""
    sent, got = sent.lower(), got.lower()
    if got == sent:
        return None
    n_sent, n_got = len(sent) // 2, len(got) // 2
    at = next(
        (i for i in range(min(n_sent, n_got)) if sent[2 * i : 2 * i + 2] != got[2 * i : 2 * i + 2]),
        None,
    )
    where = f", first differing at byte {at}" if at is not None else ""
    return (
        f"carries {n_got} bytes of private data {_brief(got)}{where}, not the "
        f"{n_sent} bytes {_brief(sent)}"
    )


def _brief(hexdata: str) -> str:
    """Hex private data as a message shows it: up to 16 bytes, then its length left."""
    if len(hexdata) <= 32:
        return repr(hexdata)
    return f"'{hexdata[:32]}...' (+{len(hexdata) // 2 - 16})"


def _pdata_delivered(tl: Timeline, action: str, event: str, reason: str) -> Iterator[Finding]:
    """Each ``action``: the peer's ``event`` of its connection carries exactly its private
    data, no byte more or less (none when it gave none).

    iWARP delivers the MPA frame's private data as it is (RFC 5044 7.1: its
    length is in the frame), so a provider has nothing to pad; an action on an
    unlabelled connection, or whose peer never got ``event``, finds nothing here
    (invariant 1 judges a connect without a reply).
    """
    for act in (a for a in tl.actions if a.name == action and a.ok and a.id):
        pdata = str(act.params.get("private_data", ""))
        for got in _peer_events(tl, act.id, act.side, (event,)):
            if wrong := pdata_mismatch(pdata, got.private_data):
                yield Finding(f"{event} on {got.id} {wrong} the {reason} gave", (got,), (act,))


@rule(
    "connect-pdata-delivered",
    None,
    "The private data given to rdma_connect arrives in the peer's CONNECT_REQUEST, "
    "exactly: its length and bytes",
    "[src] RFC 5044 7.1 (PD_Length, Private Data); cma.c iw_conn_req_handler passes the "
    "MPA request's; [lab] siw delivers it exactly, 0 to its limit",
)
def _connect_pdata(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    yield from _pdata_delivered(tl, "connect", "CONNECT_REQUEST", "connect")


@rule(
    "accept-pdata-delivered",
    None,
    "The private data given to rdma_accept arrives in the active side's ESTABLISHED, "
    "exactly: its length and bytes",
    "[src] RFC 5044 7.1; cma.c cma_iw_handler passes the MPA reply's with CONNECT_REPLY; "
    "[lab] siw delivers it exactly, 0 to its limit",
)
def _accept_pdata(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    yield from _pdata_delivered(tl, "accept", "ESTABLISHED", "accept")


PDATA_CALLS = ("connect", "accept", "reject")


@rule(
    "pdata-over-limit-refused",
    None,
    "rdma_connect, rdma_accept and rdma_reject take private data up to the acting host's "
    "limit for the call and refuse a longer one with the profile's errno",
    "[src] rdma_cma.h private_data_len is a uint8_t; siw_cm.c siw_connect, siw_accept, "
    "siw_send_mpareqrep (6.1.192); RFC 5044 7.1, RFC 6581 5; [lab] siw (docs/contract.md)",
)
def _pdata_limit(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name in PDATA_CALLS and "private_data" in a.params):
        length = len(str(act.params["private_data"])) // 2
        limits = actor(profile, tl, act).private_data
        limit, result = limits.of(act.name), errno_name(act.result)
        if length > limit and result != limits.refusal:
            known = f" ({limits.broken})" if length <= limits.taken_by(act.name) else ""
            yield Finding(
                f"{act.name} with {length} bytes of private data (limit {limit}) returned "
                f"{act.result}, expected {limits.refusal}{known}",
                (),
                (act,),
            )
        elif (
            length <= limit
            and result == limits.refusal
            and not _refused_for_state(tl, act)
            and not asks_past_limit(act, profile, tl)
        ):
            yield Finding(
                f"{act.name} with {length} bytes of private data, within the limit {limit}, "
                f"was refused {result}",
                (),
                (act,),
            )


def _refused_for_state(tl: Timeline, act: Action) -> bool:
    """An answer on an id that is no longer a pending request is refused EINVAL for
    that (``answer-on-closed-id-fails`` judges it), whatever its private data."""
    return act.name in ("accept", "reject") and act.id is not None and no_longer_pending(tl, act)


@rule(
    "no-listener-connect-refused",
    None,
    "Connecting to a port with no listener fails: as rdma_connect() ECONNREFUSED with no "
    "event (siw), or as a REJECTED/UNREACHABLE/CONNECT_ERROR event (cxgb4)",
    "[src, lab] siw_cm.c siw_connect kernel_connect; [src] cxgb4 cm.c act_open_rpl",
)
def _no_listener(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (
        a for a in tl.actions if a.name == "connect" and a.id and a.params.get("listener") is False
    ):
        got = replies(tl, act.id)
        connector = actor(profile, tl, act)  # its connect and its events: one host
        if connector.no_listener_connect_error:
            if errno_name(act.result) != "ECONNREFUSED":
                yield Finding(
                    f"rdma_connect with no listener returned {act.result}, expected ECONNREFUSED",
                    tuple(got),
                    (act,),
                )
        elif not act.ok:
            yield Finding(
                f"rdma_connect with no listener failed ({act.result}); this "
                "profile reports it as an event",
                (),
                (act,),
            )
        elif got and got[0].type not in connector.no_listener_events:
            yield Finding(
                f"connect with no listener got {got[0].type}, expected one of "
                f"{', '.join(sorted(connector.no_listener_events))}",
                (got[0],),
                (act,),
            )


def _first_close(tl: Timeline, conn: str) -> Action | None:
    """The action that closed a connection: the first close or pull before its DISCONNECTED."""
    events = tl.events_of_conn(conn)
    ids = {e.id for e in events}
    first_disc = min(e.t_us for e in events if e.type == "DISCONNECTED")
    closes = [
        a
        for a in tl.actions
        if a.id in ids
        and a.ok
        and a.name in CLOSE_ACTIONS
        and a.t_us <= first_disc + tl.uncertainty_us(*tl.pair)
    ]
    closes += [a for a in tl.actions if a.name in LINK_DOWNS and a.t_us <= first_disc]
    return min(closes, key=lambda a: a.t_us, default=None)


@rule(
    "close-status",
    None,
    "DISCONNECTED carries the profile's status for the kind of close: orderly "
    "(rdma_disconnect) or abortive (QP to ERR locally; destroy, kill or QP to ERR for the peer)",
    "[lab] siw 0; [src] cxgb4 cm.c close/abort statuses; siw peer of abort [inferred]",
)
def _close_status(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for conn in sorted({e.conn for e in tl.events if e.conn and e.type == "DISCONNECTED"}):
        act = _first_close(tl, conn)
        if act is None or act.name in LINK_DOWNS:
            continue  # nothing to compare with, or a link pull or flap (their own rule, test)
        closer = actor(profile, tl, act)
        kind = "orderly" if act.name == "disconnect" else "abortive"
        for e in tl.events_of_conn(conn):
            if e.type != "DISCONNECTED":
                continue
            own = reporter(profile, e)
            if kind == "orderly":
                allowed = own.orderly_close_statuses
            elif e.side == act.side:
                allowed = own.abort_statuses
            else:  # what the peer sees depends on what the closer put on the wire
                allowed = own.peer_abort_statuses(closer)
            if e.status not in allowed:
                who = "initiator" if e.side == act.side else "peer"
                yield Finding(
                    f"{kind} close by {act.name}: {who} got DISCONNECTED({e.status}), "
                    f"expected one of {sorted(allowed)}",
                    (e,),
                    (act,),
                )


@rule(
    "disconnect-completes-within",
    None,
    "The initiator's DISCONNECTED follows rdma_disconnect within the profile's close bound "
    "(siw at once, cxgb4 after TCP teardown or ep_timeout_secs)",
    "[lab] siw ~2 ms; [src] cxgb4 cm.c ep_timeout",
)
def _disconnect_within(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "disconnect" and a.ok and a.id):
        bound_us = actor(profile, tl, act).local_close_bound_s * 1e6
        events = tl.events_for(act.id)
        if not any(e.type == "ESTABLISHED" and e.t_us < act.t_us for e in events):
            continue
        if tl.actions_for(act.id, "disconnect")[0] is not act:
            continue  # a repeat: disconnect-idempotent judges it
        discs = [e for e in events if e.type == "DISCONNECTED"]
        if discs and discs[0].t_us < act.t_us:
            continue  # the peer closed first
        destroyed = [a for a in tl.actions_for(act.id, "destroy") if a.t_us > act.t_us]
        if not discs and destroyed and destroyed[0].t_us - act.t_us < bound_us:
            continue  # destroyed before the bound ran out: its events are dropped
        if not discs or discs[0].t_us - act.t_us > bound_us:
            took = f"after {ms(discs[0].t_us - act.t_us)}" if discs else "never"
            yield Finding(
                f"DISCONNECTED on {act.id} came {took}, bound {ms(bound_us)}",
                tuple(discs[:1]),
                (act,),
            )


@rule(
    "resources-back-to-baseline",
    11,
    "After the test each host holds no more of each RDMA resource type than before it: "
    "cm_id, QP, CQ, MR, PD, ucontext (ctx), SRQ, the types its `rdma resource show` "
    "summary lists",
    "[src] nldev.c fill_res_info, iproute2 rdma/res.c res_print_summary; issues 5, 25",
)
def _resources(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for r in tl.resources:
        if r.after > r.before:
            yield Finding(
                f"{r.host} holds {r.after} {r.kind} after the test, "
                f"{r.before} before: {r.after - r.before} leaked"
            )


def kernel_log_clean(allow: Sequence[str] = DEFAULT_KERNEL_ALLOW) -> Rule:
    """The kernel-log rule, ignoring lines that match any ``allow`` regex."""
    allowed = [re.compile(p) for p in allow]

    @rule(
        "kernel-log-clean",
        11,
        "The kernel log since the test began has no kernel report line: WARNING, BUG, "
        "Oops, general protection fault, KASAN, lockdep, UBSAN, RCU stall, workqueue "
        "hog, hung task, kmemleak, refcount_t or ODEBUG (known harmless lines allowed)",
        "[src] issue 5; the printks of KERNEL_REPORTS (6.1, 6.12)",
    )
    def _kernel_log(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
        for k in tl.kernel_log:
            if BAD_KERNEL_LINE.search(k.line) and not any(p.search(k.line) for p in allowed):
                yield Finding(f"{k.host} kernel log: {k.line.strip()}")

    return _kernel_log


RULES = (
    _reject_status,
    _connect_pdata,
    _accept_pdata,
    _pdata_limit,
    _no_listener,
    _close_status,
    _disconnect_within,
    *links.RULES,
    _resources,
    kernel_log_clean(),
)
