"""The regression corpus: one test per known Linux iWARP CM bug, named after the fix it guards.

Each test reproduces the conditions its fix describes with host-side
scenarios (:mod:`hil.cm.regressions`), and fails "scenario not reached"
when they did not happen (a run that never came near the bug is no pass).
A kernel without the fix shows as what the bug did: a KASAN, WARNING or
refcount report in the kernel log, a leaked cm_id or QP (the after-test
checks), an event after destroy (the contract), a hung destroy (the step
bounds) or a crash (the liveness watch).  A debug lab (KASAN, kmemleak,
lockdep) sees the use-after-frees a production kernel may survive.

The lab's 6.1 kernel (Debian 6.1.192) carries every fix named here except
where a test says otherwise; its changelog
(/usr/share/doc/linux-source-6.1/changelog.Debian.gz) names the version
that brought each.  One direction each: the bugs are one host's.
"""

from __future__ import annotations

import pytest

from hil.cm.regressions import cxgb4, device, iwcm, siw, ucma
from hil.cm.regressions.evidence import missing
from hil.cm.session import CMSession
from hil.judge.profiles import Profiles
from hil.judge.timeline import Timeline
from hil.plugin.api import Contract, explain

pytestmark = pytest.mark.parametrize("direction", ["a-b"])


def _reached(tl: Timeline) -> None:
    """Fail "scenario not reached: ..." unless every condition the case names was seen;
    print what it measured (``-s``)."""
    print(f"{tl.scenario}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(tl.metrics.items())))
    gap = missing(tl)
    if gap is not None:
        pytest.fail(explain(tl, gap), pytrace=False)


def test_iwcm_aee2424246f9_child_cm_ids_destroyed_by_the_cm(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/iwcm: Fix a use-after-free related to destroying CM IDs (aee2424246f9,
    CVE-2024-42285; Debian 6.1.106-1).

    iw_cm destroyed the child cm_id of an incoming connect while work for it
    could still be queued.  Here: a listener with backlog 1 that reads
    nothing, so rdma_ucm refuses every request but the first and iw_cm
    rejects and destroys those children itself (the active side's REJECTED
    shows it); then the listener is destroyed with the held request still
    unretrieved, so rdma_ucm destroys that child and iw_cm rejects it (its
    REJECTED comes only after the listener's destroy).  The connects go one
    at a time, each once the last was taken: siw's listener has one ACCEPT
    work per backlog slot, and a connection whose handshake beats the last
    ACCEPT stays in the TCP accept queue, never a request; the passive host's
    ``ss`` and ``rdma resource show cm_id`` show the hold.
    """
    tl = cm.run(iwcm.regress_iwcm_refused_child, connects=4)
    contract(tl)
    _reached(tl)


def test_iwcm_work_objects_after_cm_id_destruction(cm: CMSession, contract: Contract) -> None:
    """RDMA/iwcm: Fix use-after-free of work objects after cm_id destruction (2025,
    found by blktests nvme/061 on siw; Debian 6.1.147-1).

    The last reference of a cm_id dropped inside an event's work freed the
    work objects that work was running from.  Here: three connections under
    RDMA WRITE load, the active worker SIGKILLed (every connection aborted at
    once), and the passive side destroying all its ids at the first
    DISCONNECTED: at least one id is destroyed before its own DISCONNECTED
    was delivered, while the CM was handling its close.
    """
    tl = cm.run(iwcm.regress_iwcm_peer_vanishes, connections=3, rounds=3)
    contract(tl)
    _reached(tl)


def test_siw_ef91271c65c1_reject_racing_mpa_request(
    cm: CMSession, contract: Contract, profile: Profiles
) -> None:
    """RDMA/siw: Fix a condition race issue in MPA request processing (ef91271c65c1,
    2022; in 6.1 since its release).

    siw made the CONNECT_REQUEST upcall before detaching the new endpoint from
    its listener, so an rdma_reject right after the upcall met a half
    attached endpoint.  Here: six connects at once to a listener that
    rejects each request in its worker as soon as it is read; every connect
    gets REJECTED with the provider's status, and a reject ran while later
    MPA requests were still arriving.
    """
    tl = cm.run(siw.regress_siw_reject_racing_mpareq, connects=6)
    contract(tl)
    _reached(tl)
    want = profile.of(cm.host(cm.active)).reject_status
    bad = [e for e in tl.events if e.type == "REJECTED" and e.status != want]
    assert not bad, explain(tl, f"REJECTED with status {bad[0].status}, profile says {want}")


def test_siw_53a3f7770497_mpa_request_failure_then_close(cm: CMSession, contract: Contract) -> None:
    """RDMA/siw: Fix connection failure handling (53a3f7770497, CVE-2023-52513;
    Debian 6.1.64-1).

    When processing an incoming MPA request failed, the new endpoint had
    already left its listener, and the later TCP close freed it again.  Here:
    a plain TCP client on the active host sends the listener two malformed
    MPA requests siw must reject with an MPA reply (markers asked for) and two
    it must drop (a wrong key), each at once after the connect (siw finds it
    queued when it accepts: the "immediate" path the fix names) and after a
    pause, then closes or resets.  No CONNECT_REQUEST may come of them, and
    the listener still connects afterwards.
    """
    tl = cm.run(siw.regress_siw_mpareq_failure)
    contract(tl)
    _reached(tl)


@pytest.mark.hil_requires("driver=iw_cxgb4")
def test_cxgb4_3e1e783998f6_endpoint_timeout_under_a_flood(
    cm: CMSession, contract: Contract
) -> None:
    """iw_cxgb4: endpoint timeout fixes (3e1e783998f6, 2014).

    With CPL messages flowing in all the time, iw_cxgb4 never processed its
    timed-out endpoints, and an endpoint already on the timeout list still
    handled MPA starts and replies.  Here: RDMA WRITE streams flow into the
    active host while one of its connects waits for an MPA reply that never
    comes (the listener reads nothing); the connect must end within the
    profile's bound (ep_timeout_secs), judged by the contract, and the streams
    must have kept flowing meanwhile.  iw_cxgb4 pairs only: siw has no CPL
    path (the sequence runs there too, by hand: ``hil cm run
    regress_cxgb4_ep_timeout_under_flood``).
    """
    tl = cm.run(cxgb4.regress_cxgb4_ep_timeout_under_flood, streams=2)
    contract(tl)
    _reached(tl)


def test_siw_netdev_removed_under_port_queries_and_a_bound_id(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/siw: Remove direct link to net_device (December 2024; syzbot
    4b87489410b4efd181bf, KASAN slab-use-after-free in siw_query_port).

    siw kept its own pointer to the net_device, stale once the netdev was
    unregistered while the RDMA device still answered port queries.  Here, on
    the active host: a veth with a siw device on it, a cm_id listening on its
    address, `rdma link show` port queries running, and a connection on the
    pair's own device; the veth is deleted, only once a query listed the
    device, the id is bound (a listen refused ENODEV is tried again) and a
    query that began after the bind ended.  The removal waits for the
    device's user (the bound id and the verbs context librdmacm opened: siw
    cannot disassociate one) until its process exits after 1 s, the device
    goes, a query ran across the removal, and the pair's connection closes
    orderly afterwards.  Debian 6.1.192 does NOT carry this fix (siw.h still
    has ``sdev->netdev``): on the 6.1 lab only a debug (KASAN) kernel can
    show the bug; the 6.12 kernel has the fix.
    """
    tl = cm.run(device.regress_siw_netdev_removed)
    contract(tl)
    _reached(tl)


def test_ucma_event_channel_closed_while_resolve_route_runs(
    cm: CMSession, contract: Contract
) -> None:
    """syzbot a2e2735f09ebb9d95bd1: KASAN slab-use-after-free Read in rdma_resolve_route
    (February 2024): ucma_close freed an id rdma_resolve_route still used.

    That report's path is RoCE's netevent tree; on iWARP the same window is
    ucma_close destroying an id whose route work was just queued.  Here: 24
    rounds on the active host, each a fresh event channel whose fd is closed
    0 µs to 5 ms after rdma_resolve_route returned with its route event
    unread, at least one within 100 µs.  On the lab's one-vCPU guests the
    route work has always run by then (counted, not asked for:
    ``closed_with_route_pending``).  The
    after-test checks see that the closes left no cm_id behind and the
    kernel log clean.
    """
    tl = cm.run(ucma.regress_ucma_close_during_resolve_route, sweeps=2)
    contract(tl)
    _reached(tl)
