"""irdma's profile (Intel E810 and X722 in iWARP mode, Linux 6.1.192, Debian's
linux-source-6.1 6.1.192-3): from the driver's source only, each value marked [src] or
[inferred]; docs/irdma.md explains them.  Files are drivers/infiniband/hw/irdma/ unless
another is named.

irdma runs the TCP of connection setup itself (cm.c: SYN, MPA, its own retransmit timer
irdma_cm_timer_tick); once the MPA exchange is done the connection moves into the
adapter (IRDMA_CM_STATE_OFFLOADED), whose TCP the host never sees.
"""

from __future__ import annotations

import errno

from hil.judge.corestatus import (
    CORE_EVENT_STATUSES,
    IBV_WC_SUCCESS,
    IBV_WC_WR_FLUSH_ERR,
    PORT_ACTIVE,
    PORT_ERR,
)
from hil.judge.profile import PdataLimits, PortPromise, Profile
from hil.judge.provenance import Provenance
from hil.judge.tcpmodel import tcp_retries2_timeout_s
from hil.judge.wireexpect import IRDMA_WIRE

IBV_WC_REM_ACCESS_ERR = 10  # enum ibv_wc_status

# The CM's own retransmit schedule (cm.c irdma_schedule_cm_timer :1145-1168,
# irdma_cm_timer_tick :1342-1350): first resend after IRDMA_RETRY_TIMEOUT (HZ, cm.h:50),
# then HZ << n, at most IRDMA_MAX_TIMEOUT (12 s, cm.h:53), IRDMA_DEFAULT_RETRANS (32,
# cm.h:44) times; then irdma_retrans_expired (:1197) sends a RST and posts ABORTED.
# 1 + 2 + 4 + 8 + 29 x 12 s.  A bare ACK of the MPA request keeps the entry (only
# ack_rcvd is set, :2804-2812), so an unanswered MPA request ends the same way.
CM_RETRANS_S = 1.0 + 2.0 + 4.0 + 8.0 + 29 * 12.0
IRDMA_MAX_TIMEOUT_S = 12.0
_SCHEDULE = "cm.c irdma_cm_timer_tick :1259, irdma_retrans_expired :1197 (Linux 6.1.192)"
# The adapter's own TCP after offload: IRDMA_DEFAULT_REXMIT_THRESH (8, cm.h:48) resends
# (irdma_init_tcp_ctx cm.c:3287), then IRDMA_AE_LLP_TOO_MANY_RETRIES (hw.c:379)
# terminates the QP.  The RTO is the firmware's: modelled as Linux's.
REXMIT_THRESH = 8
MARGIN_S = 5.0

# rdma_cm passes at most 255 bytes (u8 private_data_len); irdma checks nothing at connect
# or accept (irdma_create_cm_node cm.c:2966-2995 copies into the 512-byte pdata_buf,
# cm.h:314; irdma_accept :3642) and irdma_reject only past IRDMA_MAX_CM_BUF (544, :3762).
# The receiving irdma copies PD_Length bytes after the MPA v2 RTR words and reports
# PD_Length, those 4 bytes included (irdma_parse_mpa :1103-1104), as the event's u8
# private_data_len (:183): past 251 bytes it wraps.  [src; inferred: not seen on a card]
IRDMA_PDATA = PdataLimits(
    connect=251,
    accept=251,
    reject=251,
    taken=(255, 255, 255),
    broken="an irdma receiver reports PD_Length, the 4 MPA v2 RTR bytes included, as a u8 "
    "private_data_len (cm.c:183, :1103-1104, Linux 6.1.192): past 251 bytes it wraps "
    "[src, inferred]",
)

# irdma_query_port (verbs.c:85-91) reports ACTIVE only with carrier and the netdev up;
# irdma_netdevice_event (utils.c:321-326) dispatches PORT_ERR on NETDEV_DOWN and
# PORT_ACTIVE on NETDEV_UP (irdma_port_ibevent verbs.c:4567) and ignores NETDEV_CHANGE,
# a carrier change; the ice auxiliary events (main.c:93-119) carry no link change.
_IRDMA_NETDEV = "utils.c irdma_netdevice_event, verbs.c irdma_query_port (6.1.192)"
IRDMA_PULL_PORTS = (
    ("admin", PortPromise("DOWN", (PORT_ERR,), (PORT_ACTIVE,), f"[src] {_IRDMA_NETDEV}")),
    (
        "carrier",
        PortPromise("DOWN", (), (), f"[src] {_IRDMA_NETDEV}: NETDEV_CHANGE not handled"),
    ),
)

IRDMA_PROVENANCE = (
    (
        "local_close_bound_s",
        Provenance(
            "src",
            "verbs.c:1706-1716 irdma_modify_qp arms the CLOSE entry HZ/10 ahead (cm.c:1155); "
            "irdma_handle_close_entry cm.c:1224 ends the connection then, or at the CM "
            "timer's next tick, at most IRDMA_MAX_TIMEOUT 12 s (cm.h:53) when another "
            "connection armed it; + 5 s margin (Linux 6.1.192)",
        ),
    ),
    (
        "conn_sent_destroy_bound_s",
        Provenance("src", f"{_SCHEDULE}: the MPA request's 363 s schedule; + 5 s margin"),
    ),
    (
        "conn_sent_destroy_min_s",
        Provenance("inferred", "a peer's own timers may end the connect sooner: none"),
    ),
    (
        "listener_destroy_bound_s",
        Provenance(
            "inferred",
            "irdma_destroy_listen cm.c:4032 resets pending requests without waiting and "
            "deletes the listener's quad hash through the CQP, each command waiting at most "
            "CQP_COMPL_WAIT_TIME_MS x CQP_TIMEOUT_THRESHOLD = 5 s (protos.h:11-12, "
            "irdma_wait_event utils.c:563); one command + 5 s margin",
        ),
    ),
    (
        "pull_traffic_bound_s",
        Provenance(
            "inferred",
            "the adapter's TCP resends IRDMA_DEFAULT_REXMIT_THRESH (8) times (cm.h:48, "
            "cm.c:3287), then IRDMA_AE_LLP_TOO_MANY_RETRIES (hw.c:379); its RTO is "
            "firmware's, modelled as Linux's from 200 ms: 2 x the model + 5 s",
        ),
    ),
    (
        "pull_idle_bound_s",
        Provenance("inferred", "irdma_init_tcp_ctx sets no keepalive: no promise"),
    ),
    (
        "admin_down_bound_s",
        Provenance(
            "inferred",
            "NETDEV_DOWN only reports the port (utils.c:321); connections are torn down "
            "when an address goes (irdma_inetaddr_event :172, irdma_if_notify cm.c:4334), "
            "which an IPv4 link down does not do: judged as a carrier loss",
        ),
    ),
    (
        "unreachable_bound_s",
        Provenance("src", f"{_SCHEDULE}: the SYN's 363 s schedule; + 5 s margin"),
    ),
)


def irdma_profile() -> Profile:
    """The Intel irdma (iWARP) profile.  irdma 6.1 has no module parameters: its CM
    timers are compile-time constants (cm.h), so every host gets the same profile."""
    return Profile(
        name="irdma",
        # MPA reply with the reject flag: IRDMA_CM_EVENT_MPA_REJECT, CONNECT_REPLY
        # -ECONNREFUSED (cm.c:4191-4197); cma.c:2508 REJECTED.  [src]
        reject_status=-errno.ECONNREFUSED,
        # A RST to the SYN: irdma_handle_rst_pkt (cm.c:2463) retries once with MPA v1,
        # the second RST: irdma_active_open_err, ABORTED, CONNECT_REPLY -ECONNRESET
        # (irdma_event_connect_error :677): REJECTED.  [src]
        no_listener_connect_error=False,
        no_listener_events=frozenset({"REJECTED"}),
        # Every CLOSE upcall carries 0 (cm.c:3542, :4160); IW_CM_EVENT_DISCONNECT, the
        # one with -ECONNRESET, is dropped by cma_iw_handler (cma.c:2525).  [src]
        orderly_close_statuses=frozenset({0}),
        abort_statuses=frozenset({0}),
        # QP to ERR with the connection up: reset_tcp_conn, a RST (verbs.c:1647-1651).
        abortive_peer_looks_orderly=False,
        local_close_bound_s=IRDMA_MAX_TIMEOUT_S + MARGIN_S,
        conn_sent_destroy_bound_s=CM_RETRANS_S + MARGIN_S,
        conn_sent_destroy_min_s=None,
        listener_destroy_bound_s=5.0 + MARGIN_S,
        # A RST during MPA v2 (SYN_SENT, MPAREQ_SENT): a new SYN with MPA v1
        # (cm.c:2476-2484), so a listener may see a second CONNECT_REQUEST.  [src]
        mpa_v1_retry=True,
        # The CLOSE entry marks the TCP state CLOSED and upcalls 100 ms after the QP
        # left RTS (cm.c:1224-1246), whatever the adapter's FIN exchange.  [inferred]
        disconnected_means_tcp_down=False,
        pull_traffic_bound_s=2.0 * tcp_retries2_timeout_s(REXMIT_THRESH) + MARGIN_S,
        pull_idle_bound_s=None,
        pull_idle_basis="irdma sets no TCP keepalive in the adapter's connection "
        "context (irdma_init_tcp_ctx): an idle connection never notices [inferred]",
        admin_down_bound_s=None,
        pull_ports=IRDMA_PULL_PORTS,
        qp_state_reported=True,  # irdma_query_qp sets qp_state (verbs.c:1092) [src]
        # SYNs never answered: the CM schedule expires, ABORTED, -ECONNRESET: REJECTED,
        # not UNREACHABLE (-ETIMEDOUT comes only for a QP being destroyed, :4097).  [src]
        unreachable_connect_error=None,
        unreachable_events=frozenset({"REJECTED"}),
        unreachable_bound_s=CM_RETRANS_S + MARGIN_S,
        # irdma_flush_err_to_ib_wc_status maps FLUSH_REM_ACCESS_ERR to REM_ACCESS_ERR
        # (verbs.c:3374-3375); a WRITE the adapter completed before the peer's TERMINATE
        # is SUCCESS, a later one flushed.  Both CLOSEs carry 0.  [inferred]
        remote_access_write_statuses=frozenset(
            {IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR, IBV_WC_REM_ACCESS_ERR}
        ),
        remote_access_statuses=frozenset({0}),
        private_data=IRDMA_PDATA,
        wire=IRDMA_WIRE,
        # IRD/ORD limits differ by card (ICRDMA_MAX_IRD_SIZE 127 / ORD 255,
        # icrdma_hw.h:65-66; I40IW 63 / 127, i40iw_hw.h:134-135): not judged yet.
        ird_ord=None,
        provenance=IRDMA_PROVENANCE,
        # irdma cm.c (6.1.192) upcalls, mapped by cma.c:2480 cma_iw_handler.
        event_statuses=(
            *CORE_EVENT_STATUSES,
            # CONNECT_REPLY 0 (cm.c:4123); passive: ESTABLISHED 0 (:3717).
            ("ESTABLISHED", frozenset({0})),
            # -ECONNREFUSED: an MPA reject (:4197); -ECONNRESET: ABORTED (:677), a RST,
            # a bad MPA reply, the CM schedule expired.
            ("REJECTED", frozenset({-errno.ECONNREFUSED, -errno.ECONNRESET})),
            # Every CONNECT_REPLY status is 0, -ECONNREFUSED, -ECONNRESET or -ETIMEDOUT
            # (:4097, UNREACHABLE): cma.c never makes CONNECT_ERROR of them.
            ("CONNECT_ERROR", frozenset()),
            ("DISCONNECTED", frozenset({0})),  # every CLOSE carries 0 (:3542, :4160)
        ),
    )


IRDMA = irdma_profile()
