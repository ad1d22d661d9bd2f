"""iw_cxgb4's profile (Chelsio T5/T6/T7, Linux 6.1.192): from the driver's source only,
each value marked [src] or [inferred]; docs/contract.md explains them."""

from __future__ import annotations

import errno

from hil.judge.corestatus import (
    CORE_EVENT_STATUSES,
    IBV_WC_SUCCESS,
    IBV_WC_WR_FLUSH_ERR,
)
from hil.judge.profile import PdataLimits, Profile
from hil.judge.provenance import Provenance
from hil.judge.wireexpect import CXGB4_WIRE

# iw_cxgb4 under mpa_rev=2: MPA_MAX_PRIVATE_DATA (256, iw_cxgb4.h:666) less the four
# MPA v2 bytes, which the peer counts in its limit (cm.c:1515, :1758).  [inferred]: c4iw
# checks no length at the call (cm.c c4iw_connect, c4iw_accept_cr, c4iw_reject_cr).
CXGB4_PDATA = PdataLimits(
    connect=252,
    accept=252,
    reject=252,
    taken=(255, 255, 255),
    broken="iw_cxgb4 checks no private data length at the call (cm.c:3094-3111, :3332; "
    "[inferred]): the peer refuses the MPA frame, -EPROTO (cm.c:1515, :1758)",
)


_CXGB4_TIMER = "cm.c:111 ep_timeout_secs (default 60), armed by start_ep_timer cm.c:177"
CXGB4_PROVENANCE = (
    (
        "local_close_bound_s",
        Provenance(
            "src",
            f"{_CXGB4_TIMER}: a close waits that long for the peer's FIN, then "
            "-ETIMEDOUT; + 5 s margin (Linux 6.1.192)",
        ),
    ),
    (
        "conn_sent_destroy_bound_s",
        Provenance("src", f"{_CXGB4_TIMER} runs in MPA_REQ_SENT; + 5 s margin (Linux 6.1.192)"),
    ),
    (
        "conn_sent_destroy_min_s",
        Provenance("inferred", "a cxgb4 peer's own timers may end the connect sooner: none"),
    ),
    (
        "listener_destroy_bound_s",
        Provenance(
            "src",
            "c4iw_destroy_listen cm.c:3604-3627 waits for CLOSE_LISTSRV_RPL, C4IW_WR_TO "
            "60 s (iw_cxgb4.h:208, :271); + 5 s margin (Linux 6.1.192)",
        ),
    ),
    (
        "pull_traffic_bound_s",
        Provenance(
            "inferred",
            "the firmware's retransmit abort, not measured: 2 x ep_timeout_secs + 5 s",
        ),
    ),
    (
        "pull_idle_bound_s",
        Provenance("inferred", "keepalive is adapter configuration: no promise"),
    ),
    (
        "admin_down_bound_s",
        Provenance("inferred", "no netdev-down handling known: judged as a carrier loss"),
    ),
    (
        "unreachable_bound_s",
        Provenance(
            "inferred",
            "the firmware's SYN retries (act_open_rpl CPL_ERR_CONN_TIMEDOUT), not "
            "measured: 2 x ep_timeout_secs + 5 s",
        ),
    ),
)


def cxgb4_profile(ep_timeout_secs: int = 60) -> Profile:
    """The Chelsio iw_cxgb4 profile for the module's ``ep_timeout_secs``."""
    margin = 5.0
    return Profile(
        name="iw_cxgb4",
        reject_status=-errno.ECONNREFUSED,
        no_listener_connect_error=False,
        no_listener_events=frozenset({"REJECTED", "UNREACHABLE", "CONNECT_ERROR"}),
        # -ETIMEDOUT when the peer's FIN does not come within ep_timeout_secs.
        orderly_close_statuses=frozenset({0, -errno.ETIMEDOUT}),
        abort_statuses=frozenset({-errno.ECONNRESET}),
        abortive_peer_looks_orderly=False,
        local_close_bound_s=ep_timeout_secs + margin,
        conn_sent_destroy_bound_s=ep_timeout_secs + margin,
        # The MPA timer is ep_timeout_secs, but a cxgb4 peer's own timers may end the
        # connection sooner: no lower bound until measured.
        conn_sent_destroy_min_s=None,
        # destroy_listen waits for the firmware's CLOSE_LISTSRV_RPL (C4IW_WR_TO, 60 s).
        listener_destroy_bound_s=60.0 + margin,
        mpa_v1_retry=True,
        disconnected_means_tcp_down=True,
        # Firmware retransmit abort; not measured yet, so a generous bound.
        pull_traffic_bound_s=2.0 * ep_timeout_secs + margin,
        pull_idle_bound_s=None,  # keepalive interval is firmware configuration
        pull_idle_basis="an idle connection notices only by the firmware's keepalive, "
        "whose interval is adapter configuration [inferred]",
        admin_down_bound_s=None,
        pull_ports=(),  # not known: the firmware's link events are not read yet [inferred]
        qp_state_reported=True,  # c4iw_ib_query_qp fills qp_state [src]
        # act_open_rpl CPL_ERR_CONN_TIMEDOUT -> CONNECT_REPLY -ETIMEDOUT: UNREACHABLE;
        # the firmware's SYN retries are not measured: a generous bound [inferred].
        unreachable_connect_error=None,
        unreachable_events=frozenset({"UNREACHABLE"}),
        unreachable_bound_s=2.0 * ep_timeout_secs + margin,
        # Its poll_cq maps no CQE status to IB_WC_REM_ACCESS_ERR: a WRITE completes
        # before the TERMINATE, or is flushed by it; the TERMINATE aborts (RST).
        remote_access_write_statuses=frozenset({IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR}),
        remote_access_statuses=frozenset({0, -errno.ECONNRESET}),
        private_data=CXGB4_PDATA,
        wire=CXGB4_WIRE,
        provenance=CXGB4_PROVENANCE,
        # cxgb4 cm.c (6.1.192) upcalls, mapped by cma.c:2480 cma_iw_handler.
        event_statuses=(
            *CORE_EVENT_STATUSES,
            # cm.c:1399 established_upcall: a zeroed event; active: CONNECT_REPLY 0.
            ("ESTABLISHED", frozenset({0})),
            # cm.c:1538 (MPA reject: -ECONNREFUSED), 2261, 2737, 2870 and
            # status2errno's CPL_ERR_CONN_RESET (-ECONNRESET: a RST, no listener).
            ("REJECTED", frozenset({-errno.ECONNREFUSED, -errno.ECONNRESET})),
            # cm.c:432 status2errno (-EHOSTUNREACH, -ENOMEM, -EADDRINUSE, -EIO), 553,
            # 957, 1264, and process_mpa_reply's -EINVAL, -EPROTO (1480-1524).
            (
                "CONNECT_ERROR",
                frozenset(
                    -e
                    for e in (
                        errno.EHOSTUNREACH,
                        errno.ENOMEM,
                        errno.EADDRINUSE,
                        errno.EIO,
                        errno.EINVAL,
                        errno.EPROTO,
                    )
                ),
            ),
            # cm.c close_complete_upcall: 0 (2781, 3006), -ECONNRESET (1953), -EIO
            # (3663, 3725), -ETIMEDOUT (4256).
            (
                "DISCONNECTED",
                frozenset({0, -errno.ECONNRESET, -errno.EIO, -errno.ETIMEDOUT}),
            ),
        ),
    )


IW_CXGB4 = cxgb4_profile()
