"""The regression corpus: one test per known Linux iWARP CM bug, named after the fix it guards.

Each test reproduces the conditions its fix describes with host-side
scenarios (:mod:`hil.cm.regressions`) or the reference peer playing the other
end (:mod:`hil.peer.regressions`), fails "scenario not reached" when
they did not happen, and "window not reached" when the bug's own window (as
the fix describes it) was not hit: a run that never came near the bug is no
pass.  A window only the kernel's tracepoints show (the debug lab's event
tracing, :mod:`hil.cm.regressions.ktrace`) is not observable on the
production lab kernel: there the test skips, saying so.  Each fix's revert
kernel (bench/reverts/, docs/regressions.md) shows whether its test fails
without the fix.
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

from collections.abc import Callable

import pytest

from hil.cm import sequences
from hil.cm.regressions import cxgb4, goingdown, iwcm, portquery, siw, siwqp, siwtx, ucma
from hil.cm.regressions.evidence import missing, trace_findings, unobservable
from hil.cm.session import CMSession
from hil.inventory.hostmodel import Family
from hil.judge.profiles import Profiles
from hil.judge.timeline import Timeline
from hil.peer import regressions as peer_regressions
from hil.peer.builtin import SCENARIOS
from hil.peer.judge import record_text
from hil.peer.run import PeerRun, run_scenario
from hil.plugin.api import Contract, explain
from hil.report.attach import attach_peer_run
from hil.run import PairRun
from hil.run.testrun import TestRun

pytestmark = pytest.mark.parametrize("direction", ["a-b"])
# The cases added with issue 28 items 4 and 5 run on IPv4 only (ci/suites' budget: a new
# case runs one family unless the family matters): none of their bugs is the family's.
IPV4_ONLY = pytest.mark.parametrize("family", ["ipv4"])


def _reached(tl: Timeline) -> None:
    """Fail "kernel trace: ..." when the kernel's trace showed what the bug's fix rules
    out; else fail "scenario not reached: ..." or "window not reached: ..." unless every
    condition and window the case names was seen; skip when a window is not observable
    on this kernel; print what it measured (``-s``)."""
    print(f"{tl.scenario}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(tl.metrics.items())))
    shown = trace_findings(tl)
    if shown is not None:
        pytest.fail(explain(tl, shown), pytrace=False)
    gap = missing(tl)
    if gap is not None:
        pytest.fail(explain(tl, gap), pytrace=False)
    blind = unobservable(tl)
    if blind is not None:
        pytest.skip(blind)


def _peer_judged(run: PeerRun, hil_test: TestRun | None) -> None:
    """Attach a peer scenario's run to the report; its DUT timeline faced the peer, not
    a CM endpoint, so the peer verdict judges it (as in test_wire_conformance.py)."""
    attach_peer_run(run)
    if hil_test is not None:
        hil_test.contract(run.timeline)


def _peer_text(run: PeerRun) -> str:
    return f"{run.verdict.to_text()}\npeer record:\n{record_text(run.result.record)}"


PeerRuns = Callable[..., None]


@pytest.fixture
def peer_runs(
    cm: CMSession,
    contract: Contract,
    hil_run: PairRun,
    family: Family,
    hil_test: TestRun | None,
) -> PeerRuns:
    """``peer_runs((name, times), ...)``: run each built-in peer scenario ``name``
    ``times`` times against side A (the peer on B), each judged by its provider's
    expectation (hil/peer/judge.py, a known finding holding too: the wire-conformance
    suite's check, here for the bug's condition); then A must still accept a normal
    connection from B, judged by the contract."""

    def run(*runs: tuple[str, int]) -> None:
        for name, times in runs:
            for _ in range(times):
                _peer_run(cm, hil_test, name)
        _accepts_after(hil_run, family, contract)

    return run


def _accepts_after(hil_run: PairRun, family: Family, contract: Contract) -> None:
    """Side A, the DUT, accepts a normal connection from B, judged by the contract."""
    after = hil_run.session("b-a", evidence=False, family=family)
    contract(after.run(sequences.connect, private_data=b"hil-after-peer"))


def _peer_run(cm: CMSession, hil_test: TestRun | None, name: str) -> None:
    run = run_scenario(cm, cm.active, SCENARIOS[name])
    _peer_judged(run, hil_test)
    sent = [e for e in run.result.record if e.get("dir") == "tx"]
    peer = _peer_text(run)
    assert sent, explain(run.timeline, f"scenario not reached: the peer sent nothing\n{peer}")
    assert run.verdict.ok, explain(run.timeline, peer)
    print(f"{name}: {run.verdict.to_text().splitlines()[0]}")


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
    REJECTED comes only after the listener's destroy).  The window: an id
    destroyed while iw_cm work was still queued (the passive host's trace).  The connects go one
    at a time, each once the last was taken: siw's listener has one ACCEPT
    work per backlog slot, and a connection whose handshake beats the last
    ACCEPT stays in the TCP accept queue, never a request; the passive host's
    ``ss`` and ``rdma resource show cm_id`` show the hold.  On a widened kernel
    (the revert score's, bench/reverts/widen/): also a passive id destroyed while
    iw_cm holds its CLOSE upcall, the window the kernel's marker shows.
    """
    tl = cm.run(iwcm.regress_iwcm_refused_child, connects=4)
    contract(tl)
    _reached(tl)


def test_iwcm_6883b680e703_work_objects_after_cm_id_destruction(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/iwcm: Fix use-after-free of work objects after cm_id destruction (6883b680e703, 2025,
    found by blktests nvme/061 on siw; Debian 6.1.147-1).

    The last reference of a cm_id dropped inside an event's work freed the
    work objects that work was running from.  Here: three connections under
    RDMA WRITE load, the active worker SIGKILLed (every connection aborted at
    once), and the passive side destroying all its ids at the first
    DISCONNECTED: at least one id is destroyed before its own DISCONNECTED
    was delivered, while the CM was handling its close.  The window: an id
    destroyed while iw_cm work was still queued (the passive host's trace).  On 6.1
    the bug corrupts nothing, so no KASAN report shows it; the trace does: an id the
    application destroyed, freed inside its event's work (its kfree in
    ``iwcm_deref_id`` within a cm_work_handler run), fails "kernel trace: ..."
    (hil/cm/regressions/iwcm.py).
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
    gets REJECTED with the provider's status.  The window: a reject while the
    siw work whose upcall delivered that same request still ran (the passive
    host's trace; on a widened kernel, bench/reverts/widen/, a reject begun
    while the kernel held that gap open, its marker logged).
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
    the listener still connects afterwards.  The window: an at-once request
    taken on the immediate path (the passive host's trace: only the ACCEPT
    work ran for it; on a widened kernel, bench/reverts/widen/, the failed
    request's endpoint held on its socket past the close, its marker logged).
    """
    tl = cm.run(siw.regress_siw_mpareq_failure)
    contract(tl)
    _reached(tl)


@IPV4_ONLY
@pytest.mark.hil_requires("driver=iw_cxgb4")
def test_cxgb4_b33bd0cbfa10_endpoint_timeout_under_cpl_churn(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/cxgb4: Endpoint timeout fixes (b33bd0cbfa10, 2014; in 6.1 from its
    release).

    With CPL messages flowing in all the time, iw_cxgb4 never processed its
    timed-out endpoints, and an endpoint already on the timeout list still
    handled MPA starts and replies.  The CPLs the host driver queues are the
    connection manager's, not the data path's (an RDMA WRITE is placed by the
    adapter: hil/cm/regressions/cxgb4.py cites cm.c, device.c and cq.c), so
    here connections churn on the active host (connect, MPA exchange, close)
    while one of its connects waits for an MPA reply that never comes (the
    listener reads nothing); that connect must end within the profile's
    bound (ep_timeout_secs), judged by the contract, and connections must
    have churned meanwhile.  iw_cxgb4 pairs only: siw has no CPL path (the
    sequence runs there too, by hand: ``hil cm run
    regress_cxgb4_ep_timeout_under_churn``).
    """
    tl = cm.run(cxgb4.regress_cxgb4_ep_timeout_under_churn)
    contract(tl)
    _reached(tl)


@IPV4_ONLY
@pytest.mark.hil_requires("driver=iw_cxgb4")
def test_cxgb4_d219face9059_close_on_entering_term(cm: CMSession, hil_test: TestRun | None) -> None:
    """RDMA/iw_cxgb4: initiate CLOSE when entering TERM (d219face9059, 2020; in 6.1
    from its release: cm.c 3024-3050 of 6.1.192).

    A TERMINATE received in RDMA mode moved the QP to TERMINATE but left the
    connection open (draft-hilland-iwarp-verbs-v1.0 6.2.3: entering TERM the
    RNIC MUST initiate a CLOSE).  Here the reference peer connects to the DUT
    (the passive side), and once the DUT's MPA reply came sends a TERMINATE;
    the DUT must close the stream (iw_cxgb4's abortive close: RST) within
    the scenario's 5 s, and its application see DISCONNECTED, judged by the
    peer verdict (hil/judge/peerproviders.py).  iw_cxgb4 pairs only: the fix
    is in iw_cxgb4's CPL_RDMA_TERMINATE handler, which siw does not have (siw
    closes after a TERMINATE on its own path, which the wire suite judges).
    """
    run = peer_regressions.peer_terminate(cm)
    _peer_judged(run, hil_test)
    _reached(peer_regressions.terminate_evidence(run))
    assert run.verdict.ok, explain(run.timeline, _peer_text(run))


@IPV4_ONLY
def test_siw_3056fc6c32e6_connect_reply_reported_once(
    cm: CMSession,
    contract: Contract,
    hil_run: PairRun,
    family: Family,
    hil_test: TestRun | None,
) -> None:
    """RDMA/siw: Fix duplicated reported IW_CM_EVENT_CONNECT_REPLY event (3056fc6c32e6,
    2022, CVE-2022-50136; in 6.1 from its release: siw_cm.c:745-749, 915-917 of
    6.1.192; 6.12.118 too).

    siw reported a failed connect when its MPA reply had arrived only in part, and
    then the connect's outcome again once the rest came: iw_cm's BUG_ON in
    cm_conn_rep_handler.  Here the DUT connects to the reference peer, whose reply
    comes in two pieces 1.5 s apart (:func:`hil.peer.regressions.reply_in_pieces`);
    the DUT must be ESTABLISHED once and receive a SEND, judged by the peer verdict,
    and then accept a normal connection.  The window: siw's work read the first
    piece and ended without an upcall, seen as two runs of it before the
    ESTABLISHED (the debug lab's event tracing).
    """
    run, tl = peer_regressions.reply_in_pieces(cm)
    _peer_judged(run, hil_test)
    assert run.verdict.ok, explain(run.timeline, _peer_text(run))
    _accepts_after(hil_run, family, contract)
    _reached(tl)


@IPV4_ONLY
def test_siw_661f385961f0_zero_ird_and_ord(cm: CMSession, contract: Contract) -> None:
    """RDMA/siw: Fix handling of zero-sized Read and Receive Queues. (661f385961f0,
    2020; in 6.1 from its release).

    A connection negotiating IRD and ORD 0 made siw size its read queues with
    roundup_pow_of_two(0), a shift out of bounds.  Here one connection asks
    and accepts IRD 0 and ORD 0 (the ``ird_ord`` sequence); both sides must be
    ESTABLISHED reporting 0 and 0 and both QPs' depths read; the contract
    judges the depths (0: ``ird-ord-qp-depths``), where the unfixed code's
    one-slot queues would show (hil/cm/regressions/siwqp.py says why).  Its revert:
    bench/reverts/661f385961f0.patch (the read queues' sizing only).
    """
    tl = cm.run(siwqp.regress_siw_zero_ird_ord)
    contract(tl)
    _reached(tl)


@IPV4_ONLY
def test_siw_c18646248fed_kernel_consumer_sends_slab_pages(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/siw: Fix the sendmsg byte count in siw_tcp_sendpages (c18646248fed, 2025,
    CVE-2025-39758; Debian 6.1.187-1 brought the bug and the fix together; 6.12.43).

    siw_tcp_sendpages gave each page's iov_iter the byte count of the whole send: for
    a slab page, which TCP copies rather than splices, the copy ran off the page's one
    bvec.  Only a kernel consumer posting a kmalloc'd buffer unsignalled reaches it, and
    user space is none (a verbs buffer is pinned user memory): the instrument
    bench/reverts/widen/c18646248fed.patch adds one to siw.  Here that consumer on the
    active host SENDs 8192 bytes of the payload pattern to a listener on the passive
    host, which checks every byte (``payload-intact``).  The window: a slab page copied
    whose send went on past the page, counted by the instrument; without it (every lab
    kernel but the revert score's) not observable (hil/cm/regressions/siwtx.py says
    why).  Its revert: bench/reverts/c18646248fed.patch, on the debug kernel, whose
    KASAN reports the read past the bvec.
    """
    tl = cm.run(siwtx.regress_siw_sendpages_slab)
    contract(tl)
    _reached(tl)


@IPV4_ONLY
def test_iwcm_7874eeacfa42_connect_disconnect_storm(
    cm: CMSession, contract: Contract, request: pytest.FixtureRequest
) -> None:
    """RDMA/iwcm: Fix workqueue list corruption by removing work_list (7874eeacfa42,
    CVE-2026-45898; the bug is 6.11's, the fix in 6.12.75: the lab's 6.12.117 has
    both, its 6.1.192 neither).

    A ucmatose connect/disconnect storm corrupted iw_cm's workqueue when two
    events were queued for one cm_id at once.  Here 256 connections from 8
    processes to 8 listeners, each closed by its active side: siw queues
    DISCONNECT and CLOSE back to back for every passive id, so every
    connection closed on both sides reached the window once.  Nightly only
    (``--hil-race-sweeps full``, ci/nightly's plain kernels): ci/suites' own
    storm (test_storm.py) runs 16 connections.  Its revert (on 6.12):
    bench/reverts/7874eeacfa42.patch, where the debug kernel's ODEBUG reports a
    queued work initialised again (docs/regressions.md).
    """
    if request.config.getoption("hil_race_sweeps") != "full":
        pytest.skip("nightly only (--hil-race-sweeps full): a 256-connection storm")
    tl = cm.run(iwcm.regress_iwcm_connect_disconnect_storm, count=256)
    contract(tl)
    _reached(tl)
    assert not tl.metrics.get("failed"), explain(tl, "connections of the storm failed")


@IPV4_ONLY
def test_siw_16b87037b488_port_query_after_the_core_let_go_of_the_netdev(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/siw: Remove direct link to net_device (16b87037b488, December 2024; syzbot
    4b87489410b4efd181bf; stable 6.12.9: the lab's 6.12 has it, its 6.1.192 lacks it).

    siw read the netdev through its own pointer in siw_query_port, which the core's
    iw_query_port calls after it has dropped its own reference to the netdev: a device
    unregistering in that gap lets go of the netdev, which is freed under the query.
    Here a siw device on a veth, nothing using it: its port taken down (PORT_ERR, whose
    cache work queries the port), then the veth deleted while that query waits.  The
    window: the driver's query after the core let go of the netdev, which only the
    widened kernel holds open and shows (bench/reverts/widen/16b87037b488.patch: the
    hold's closing line); elsewhere not observable (hil/cm/regressions/portquery.py
    says why).  On the lab's 6.1 widened debug kernel it fails with the fix's KASAN
    report (the known finding ``siw-netdev-query-port-uaf``); the 6.12 kernel has the
    fix (bench/reverts/16b87037b488.patch, ``Unfixed:``; docs/regressions.md).
    """
    tl = cm.run(portquery.regress_siw_netdev_port_query)
    contract(tl)
    _reached(tl)


@IPV4_ONLY
def test_siw_60dc7fcafea8_qps_destroyed_while_an_admin_down_walks_them(
    cm: CMSession, contract: Contract
) -> None:
    """RDMA/siw: Remove NETDEV_GOING_DOWN event handler (60dc7fcafea8, July 2024; in
    every 6.12.y, in no 6.1.y: the lab's 6.12 has it, its 6.1.192 lacks it).

    Toggling the link under NVMe-oF over siw panicked: at an administrative down
    siw walked its QPs unlocked and unreferenced (siw_netdev_down) while a QP was
    destroyed under the walk.  Here four connections; the active host's link is
    pulled ``admin`` and its ids (and so its QPs) destroyed while the port is down,
    then the link is restored and the other side closes.  The window: a QP destroyed
    while the walk held the next, which only the widened revert kernel holds open
    (bench/reverts/widen/60dc7fcafea8.patch: the case destroys once the walk's
    marker is logged and within its hold); elsewhere the destroys within 2 s of the
    pull (hil/cm/regressions/goingdown.py says why).  On 6.1 a run that hits the
    walk's window is the known finding ``siw-going-down-walk-uaf``
    (suites/known-kernel-findings.yaml); its revert (on 6.12):
    bench/reverts/60dc7fcafea8.patch.
    """
    tl = cm.run(goingdown.regress_siw_going_down)
    contract(tl)
    _reached(tl)


def test_ucma_event_channel_closed_while_resolve_route_runs(
    cm: CMSession, contract: Contract, request: pytest.FixtureRequest
) -> None:
    """syzbot a2e2735f09ebb9d95bd1: KASAN slab-use-after-free Read in rdma_resolve_route
    (February 2024): ucma_close freed an id rdma_resolve_route still used.

    That report's path is RoCE's netevent tree; on iWARP the same window is
    ucma_close destroying an id whose route work was just queued.  Here: 12
    rounds a sweep on the active host, each a fresh event channel whose fd is
    closed 0 µs to 5 ms after rdma_resolve_route returned with its route
    event unread, at least one within 100 µs.  The window: a close with the
    route's work still pending (its event not yet on the file), swept again
    until one came, up to 20 sweeps; on the lab's one-vCPU guests it is rare
    (6.1: none in 240 rounds, 2026-12-05; 6.12: one in 24), so the case is
    nightly only (``--hil-race-sweeps full``): in ci/suites it could only fail
    "window not reached".  The after-test checks see that the closes left no
    cm_id behind and the kernel log clean.
    """
    if request.config.getoption("hil_race_sweeps") != "full":
        pytest.skip(
            "nightly only (--hil-race-sweeps full): its window (a close with the route "
            "work pending) took more than 240 rounds on the lab's 6.1 guests"
        )
    tl = cm.run(ucma.regress_ucma_close_during_resolve_route, sweeps=20)
    contract(tl)
    _reached(tl)


# Known bugs through the reference peer (issue 26, item 6): the wire conditions each bug
# needs, sent by the peer on B to A's siw.  IPv4 only: the bugs are in siw's MPA and
# FPDU parsing, after TCP, where the family plays no part (the ci/suites budget).


@pytest.mark.parametrize("family", ["ipv4"])
def test_siw_cve_2026_23242_first_fpdu_header_error(peer_runs: PeerRuns) -> None:
    """RDMA/siw: Fix potential NULL pointer dereference in header processing
    (CVE-2026-23242; stable 14ab3da122bd18920ad57428f6cf4fade8385142, one of the
    backports the CVE record lists; Debian 6.1.170-1; 6.12.75).

    When siw_get_hdr() failed before set_rx_fpdu_context(), qp->rx_fpdu was
    still NULL, and siw_tcp_rx_data()'s error path read
    qp->rx_fpdu->more_ddp_segs (KASAN null-ptr-deref in siw_tcp_rx_data).
    Here: the peer connects (MPA v2, CRC) and the connection's first FPDU
    carries RDMAP opcode 8, which siw_get_hdr refuses before any FPDU context
    exists (siw_qp_rx.c:1071-1080, 6.1.192).  siw must answer with its
    TERMINATE and close (its provider expectation, a known finding for the
    swapped Layer/EType), then accept a normal connection; a kernel without
    the fix oopses here.  Debian 6.1.192 has the fix (``qp->rx_fpdu &&`` at
    siw_qp_rx.c:1483); so does 6.12 from 6.12.75 (the CVE record).  Three runs.
    The window is the connection's first FPDU refused by siw_get_hdr: the DUT's
    TERMINATE for it, which the provider expectation requires.  Its revert:
    bench/reverts/14ab3da122bd.patch.
    """
    peer_runs(("first-fpdu-unknown-opcode", 3))


@pytest.mark.parametrize("family", ["ipv4"])
def test_siw_cve_2026_74345_malformed_mpa_request_closes_the_new_endpoint(
    cm: CMSession,
    contract: Contract,
    hil_run: PairRun,
    family: Family,
    hil_test: TestRun | None,
) -> None:
    """RDMA/siw: Fix endpoint/socket association handling (CVE-2026-74345;
    stable ea4f6f6c53577fb3f05dbd78b15e586772d49831, one of the backports the CVE
    record lists; Debian 6.1.192-1; 6.12.97).

    siw_socket_disassoc() could drop the last reference on the endpoint, and
    its callers cleared ``cep->sock`` after it: a KASAN slab-use-after-free in
    siw_cm_work_handler "after processing a malformed MPA request during
    connection establishment, causing the new endpoint to be closed" (the fix's
    message).  Here: the peer sends a request with the reply's key and one of
    revision 3, each at once after its connect, three of each, again up to four
    times until the window was seen (:func:`hil.peer.regressions.malformed_requests`).
    siw must close each without a CONNECT_REQUEST (its provider expectation), then
    accept a normal connection.
    The window: a request that failed on siw_accept_newconn's immediate path (found
    queued when the listener's ACCEPT work ran), whose error path the fix changed;
    seen as one run of siw's CM work for its connection (the debug lab's event
    tracing), or, on the widened kernel, in its kernel log.  Debian 6.1.192 has the
    fix (siw_socket_disassoc clears ``cep->sock`` itself, siw_cm.c:96); so does 6.12
    from 6.12.97 (the CVE record).  Its revert (debug kernel: the write into freed
    memory is silent elsewhere): bench/reverts/ea4f6f6c5357.patch, widened by
    bench/reverts/widen/ea4f6f6c5357.patch.
    """
    plan = (("mpa-bad-key", 3), ("mpa-unknown-revision", 3))
    done, tl = peer_regressions.malformed_requests(cm, plan)
    for run in done:
        _peer_judged(run, hil_test)
        assert run.verdict.ok, explain(run.timeline, _peer_text(run))
    _accepts_after(hil_run, family, contract)
    _reached(tl)


@pytest.mark.parametrize("family", ["ipv4"])
def test_siw_2019_cxgb4_interop_mpa_reply_with_the_first_fpdu(peer_runs: PeerRuns) -> None:
    """siw: MPA Reply handler tries to read beyond MPA message (Krishnamraju
    Eraparaju, Chelsio, linux-rdma, 2019-07-31; the siw <-> cxgb4 interop report;
    no fix commit: the patch was not taken).

    A cxgb4 responder sent its MPA reply and its first FPDU back to back, and
    siw's siw_recv_mpa_rr read 4 bytes past the reply's private data, found
    FPDU bytes and failed the connect (RDMA_CM_EVENT_CONNECT_ERROR).  siw's
    maintainer held that RFC 5044 7.1.2 forbids the responder's early FPDU, and
    the 4-byte read stayed: Debian 6.1.192 still reads pd_len + 4
    (siw_cm.c:579-591).  Here: siw on A connects to the peer, which answers
    with an MPA v2 reply and a SEND in one segment; siw must fail that connect
    as its provider expectation says (a known finding: RFC 6581 lets a
    responder without RTR send at once), with no crash or leak, and accept a
    normal connection afterwards.  The lab's 6.12 tree was not read for this
    (not built when this was written).
    """
    peer_runs(("reply-with-first-fpdu", 1))
