"""Linux TCP's give-up times, which bound what siw (a TCP user) can promise.

``tcp_retries2_timeout_s`` is the kernel's ``tcp_model_timeout()``: with the
RTO starting at 200 ms it is how long a connection with data in flight
retransmits (``net.ipv4.tcp_retries2``); starting at 1 s (TCP_TIMEOUT_INIT) it
is how long a connect retransmits its SYN (``net.ipv4.tcp_syn_retries``).
"""

from __future__ import annotations

import math

from hil.errors import InputError

# Linux TCP constants that bound siw's link-pull detection (include/net/tcp.h).
TCP_RTO_MIN_S = 0.2
TCP_RTO_MAX_S = 120.0


def tcp_retries2_timeout_s(
    retries2: int, rto_min_s: float = TCP_RTO_MIN_S, rto_max_s: float = TCP_RTO_MAX_S
) -> float:
    """How long Linux TCP retransmits before it gives up, for ``net.ipv4.tcp_retries2``.

    The kernel's ``tcp_model_timeout()``: the RTO doubles from ``rto_min`` until
    it reaches ``rto_max``, then stays there; 15 (the default) gives 924.6 s,
    5 gives 12.6 s.
    """
    if retries2 < 0:
        raise InputError(f"tcp_retries2 must be >= 0, not {retries2}")
    linear_backoff_thresh = int(math.log2(rto_max_s / rto_min_s))
    if retries2 <= linear_backoff_thresh:
        return ((2 << retries2) - 1) * rto_min_s
    return ((2 << linear_backoff_thresh) - 1) * rto_min_s + (
        retries2 - linear_backoff_thresh
    ) * rto_max_s
