"""What rdma_cm's core and the verbs decide whatever the iWARP provider: completion
statuses the profiles name, the event statuses cma.c sets alone, the port events."""

from __future__ import annotations

import errno

# enum ibv_wc_status values the profiles name.
IBV_WC_SUCCESS = 0
IBV_WC_LOC_QP_OP_ERR = 2
IBV_WC_WR_FLUSH_ERR = 5

# Event statuses cma.c decides alone, whatever the iWARP provider (6.1.192 line numbers).
CORE_EVENT_STATUSES: tuple[tuple[str, frozenset[int]], ...] = (
    ("ADDR_RESOLVED", frozenset({0})),  # cma.c:3497 addr_handler: status 0 on success
    # cma.c:3494 addr_handler passes addr.c's error: -ETIMEDOUT (addr.c:621, the
    # neighbour never resolved), -EADDRNOTAVAIL (236, 308, 441), -ENODEV (270, 506),
    # -EINVAL (552-743), -ENODATA (164-328), or the route lookup's -ENETUNREACH,
    # -EHOSTUNREACH (addr4_resolve/addr6_resolve: ip_route_output_key's error).
    (
        "ADDR_ERROR",
        frozenset(
            -e
            for e in (
                errno.ETIMEDOUT,
                errno.EADDRNOTAVAIL,
                errno.ENODEV,
                errno.EINVAL,
                errno.ENODATA,
                errno.ENETUNREACH,
                errno.EHOSTUNREACH,
            )
        ),
    ),
    ("ROUTE_RESOLVED", frozenset({0})),  # cma.c:3156 cma_resolve_iw_route: a work, no error
    ("ROUTE_ERROR", frozenset()),  # cma.c:3156: an iWARP route never fails
    # cma.c:2544 iw_conn_req_handler: the event is zeroed and its status never set.
    ("CONNECT_REQUEST", frozenset({0})),
    # cma.c:5216 cma_send_device_removal_put: a zeroed event (siw: `rdma link delete`).
    ("DEVICE_REMOVAL", frozenset({0})),
    # cma.c:2511 cma_iw_handler: CONNECT_REPLY -ETIMEDOUT alone becomes UNREACHABLE.
    ("UNREACHABLE", frozenset({-errno.ETIMEDOUT})),
)

PORT_ERR, PORT_ACTIVE = "IBV_EVENT_PORT_ERR", "IBV_EVENT_PORT_ACTIVE"
