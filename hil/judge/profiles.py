"""Provider profiles: where siw and iw_cxgb4 keep the iWARP CM contract differently.

The contract rules (:mod:`hil.judge.contract`) read statuses and time bounds
from a :class:`Profile` and never look at the driver's name, so the same
suites run on both providers.  Each value's source is in docs/contract.md.

A pair is judged by :data:`Profiles`: one :class:`Profile` when both hosts
would get the same one, else a :class:`PairProfile` holding each host's own
(a mixed pair, siw on one side and iw_cxgb4 on the other, or two iw_cxgb4
hosts with different ``ep_timeout_secs``).  Either answers ``of(host)``: a
rule judges an event by the profile of the host that reported it and a bound
on an action by the profile of the host that acted.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

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


# enum ibv_wc_status values the profiles name.
IBV_WC_SUCCESS = 0
IBV_WC_WR_FLUSH_ERR = 5

# TCP and iWARP signals a wire rule names (hil.wire.rules): how a connection ends.
WireSignal = Literal["FIN", "RST", "TERMINATE"]


@dataclass(frozen=True)
class WireExpect:
    """What a provider puts on the wire where the iWARP RFCs leave it a choice.

    Read by the wire rules (``hil.wire.rules``); each value's source is in
    docs/wire.md.
    """

    # MPA revisions the provider may send (cxgb4 falls back to v1 after a RST).
    mpa_revisions: frozenset[int]
    # The CRC flag in MPA frames; None when it is a per-host setting we do not pin.
    crc: bool | None
    # MPA v2 enhanced connection setup (the IRD/ORD words before private data).
    enhanced: bool
    # How the rejecting side ends the TCP connection after its MPA reject reply.
    reject_teardown: frozenset[WireSignal]
    # What an abortive close (QP to ERR, destroy while connected, SIGKILL) must put on
    # the wire: at least one of these, and never a FIN-only close.
    abortive_signals: frozenset[WireSignal]
    # A remote access error's TERMINATE: layer, error type, and the codes allowed for
    # each way the remote_access_error sequence breaks the WRITE ("bad_rkey", "past_end").
    access_error_layer: str
    access_error_type: int
    access_error_codes: tuple[tuple[str, frozenset[int]], ...]


@dataclass(frozen=True)
class Profile:
    """What one provider promises where the iWARP CM contract leaves room.

    Statuses are kernel statuses (negative errnos or 0), bounds are seconds
    and already include a margin for a slow (TCG) guest.
    """

    name: str
    # Status of REJECTED when the peer calls rdma_reject (or destroys the request).
    reject_status: int
    # True: with no listener, rdma_connect() itself fails ECONNREFUSED and no
    # event follows.  False: rdma_connect() returns 0, one of
    # no_listener_events follows.
    no_listener_connect_error: bool
    no_listener_events: frozenset[str]
    # DISCONNECTED statuses after rdma_disconnect (either side).
    orderly_close_statuses: frozenset[int]
    # The local DISCONNECTED status after moving a connected QP to ERR.
    abort_statuses: frozenset[int]
    # True when the peer of an abortive close sees what an orderly close shows.
    abortive_peer_looks_orderly: bool
    # How soon the initiator's DISCONNECTED follows rdma_disconnect.
    local_close_bound_s: float
    # How long rdma_destroy_id may block on an id in CONN_SENT.
    conn_sent_destroy_bound_s: float
    # cxgb4 retries with MPA v1 after a RST during MPA v2: the passive side
    # may then see a second CONNECT_REQUEST for one connect.
    mpa_v1_retry: bool
    # Invariant 8: whether TCP is torn down when DISCONNECTED is reported.
    disconnected_means_tcp_down: bool
    # Link pull, carrier lost: detection bound with data in flight and when
    # idle (None: the provider promises no detection).
    pull_traffic_bound_s: float | None
    pull_idle_bound_s: float | None
    # Link set administratively down on one host (None: as carrier lost).
    admin_down_bound_s: float | None
    # Remote access error (an RDMA WRITE with a wrong rkey or past the end of the
    # peer's buffer): the writer's completion, as enum ibv_wc_status values (the
    # verbs' answer is 10, IBV_WC_REM_ACCESS_ERR), and both sides' DISCONNECTED.
    remote_access_write_statuses: frozenset[int]
    remote_access_statuses: frozenset[int]
    # What the provider puts on the wire (the wire rules).
    wire: WireExpect

    def of(self, host: str) -> Profile:
        """The profile of ``host``: this one, for every host (see :class:`PairProfile`)."""
        return self

    def peer_abort_statuses(self, actor: Profile | None = None) -> frozenset[int]:
        """The DISCONNECTED statuses this host may see when its peer closes abortively.

        What the peer sees depends on what the aborting host (``actor``, this
        profile when None) puts on the wire: one that may close with a FIN
        only (siw) may look orderly to its peer, one that always sends a RST
        or TERMINATE (cxgb4) does not.
        """
        actor = actor or self
        if actor.abortive_peer_looks_orderly:
            return self.orderly_close_statuses | self.abort_statuses
        return self.abort_statuses

    def link_pull_bound_s(self, mode: str, traffic: bool) -> float | None:
        """Within how many seconds a pulled link must end a connection, or None.

        ``mode`` is ``"carrier"`` (cable pulled) or ``"admin"`` (``ip link
        set down`` on one host); ``traffic`` says whether data was in flight.
        """
        if mode not in ("carrier", "admin"):
            raise InputError(f"unknown link pull mode {mode!r} (known: carrier, admin)")
        if mode == "admin" and self.admin_down_bound_s is not None:
            return self.admin_down_bound_s
        return self.pull_traffic_bound_s if traffic else self.pull_idle_bound_s


@dataclass(frozen=True)
class PairProfile:
    """Each host's own profile, for a pair whose two hosts are judged differently.

    ``by_host`` is ``((host_a, profile_a), (host_b, profile_b))``.  Its
    ``name`` joins the two profiles' names when they differ (``siw+iw_cxgb4``).
    """

    by_host: tuple[tuple[str, Profile], tuple[str, Profile]]

    @property
    def name(self) -> str:
        """The profiles' names, end A first, once when both are the same."""
        names = [p.name for _, p in self.by_host]
        return names[0] if names[0] == names[1] else "+".join(names)

    @property
    def hosts(self) -> tuple[str, str]:
        """The pair's hosts, end A first."""
        return self.by_host[0][0], self.by_host[1][0]

    def of(self, host: str) -> Profile:
        """The profile of ``host``; InputError for a host not in the pair."""
        for name, profile in self.by_host:
            if name == host:
                return profile
        raise InputError(
            f"no contract profile for host {host!r}: the pair's hosts are "
            f"{' and '.join(self.hosts)}"
        )

    def link_pull_bound_s(self, mode: str, traffic: bool) -> float | None:
        """The largest bound either host promises for a pulled link, or None.

        A pull is noticed by whichever end sends (the writer retransmits), so
        the pair's bound is the later of the ends' promises.
        """
        bounds = [p.link_pull_bound_s(mode, traffic) for _, p in self.by_host]
        promised = [b for b in bounds if b is not None]
        return max(promised) if promised else None


# What judges a pair: one profile for both hosts, or each host's own.
Profiles = Profile | PairProfile


def pair_profile(by_host: tuple[tuple[str, Profile], tuple[str, Profile]]) -> Profiles:
    """One :class:`Profile` when both hosts have the same, else a :class:`PairProfile`."""
    (_, a), (_, b) = by_host
    return a if a == b else PairProfile(by_host)


# DDP error type 1 (tagged buffer) and its codes, RFC 5041 7.2: 0x00 invalid
# STag (a wrong rkey), 0x01 base or bounds violation (past the region's end).
_TAGGED_BUFFER = 1
_TAGGED_CODES = (("bad_rkey", frozenset({0x00})), ("past_end", frozenset({0x01})))

SIW_WIRE = WireExpect(
    mpa_revisions=frozenset({2}),
    crc=False,  # siw's mpa_crc_required defaults to false: no CRC unless the peer asks
    enhanced=True,
    reject_teardown=frozenset({"FIN", "RST"}),
    # siw's emergency close (QP RTS -> ERROR: siw_qp_nextstate_from_rts) drops the
    # connection with no TERMINATE and releases its socket, a FIN-only close; destroy
    # and SIGKILL take the same path through iw_cm (iwcm_modify_qp_err).  [src, lab]
    abortive_signals=frozenset({"TERMINATE", "RST", "FIN"}),
    access_error_layer="DDP",
    access_error_type=_TAGGED_BUFFER,
    access_error_codes=_TAGGED_CODES,
)

CXGB4_WIRE = WireExpect(
    mpa_revisions=frozenset({1, 2}),
    crc=None,  # the crc_enabled module parameter (default on); pinned by issue 13's doctor
    enhanced=True,
    reject_teardown=frozenset({"FIN", "RST"}),
    abortive_signals=frozenset({"TERMINATE", "RST"}),
    access_error_layer="DDP",
    access_error_type=_TAGGED_BUFFER,
    access_error_codes=_TAGGED_CODES,
)


def siw_profile(tcp_retries2: int = 15) -> Profile:
    """The soft-iWARP profile for a host whose ``net.ipv4.tcp_retries2`` is given."""
    # Under traffic the retransmit timer fires at RTO steps, so detection can
    # overshoot the model timeout by up to one step (at most doubling it).
    pull_bound = 2 * tcp_retries2_timeout_s(tcp_retries2) + 2.0
    return Profile(
        name="siw",
        reject_status=-errno.ECONNRESET,
        no_listener_connect_error=True,
        no_listener_events=frozenset(),
        orderly_close_statuses=frozenset({0}),
        abort_statuses=frozenset({0}),
        abortive_peer_looks_orderly=True,
        local_close_bound_s=1.0,
        conn_sent_destroy_bound_s=10.0 + 3.0,  # MPAREQ_TIMEOUT plus margin
        mpa_v1_retry=False,
        disconnected_means_tcp_down=False,
        pull_traffic_bound_s=pull_bound,
        pull_idle_bound_s=None,  # no keepalive: an idle connection never notices
        admin_down_bound_s=2.0,  # siw moves every QP of the netdev to ERR at once
        # siw completes a WRITE once it is sent (siw_qp_sq_process): the peer's
        # TERMINATE comes later and only ends the connection.
        remote_access_write_statuses=frozenset({IBV_WC_SUCCESS}),
        remote_access_statuses=frozenset({0}),
        wire=SIW_WIRE,
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
        mpa_v1_retry=True,
        disconnected_means_tcp_down=True,
        # Firmware retransmit abort; not measured yet, so a generous bound.
        pull_traffic_bound_s=2.0 * ep_timeout_secs + margin,
        pull_idle_bound_s=None,  # keepalive interval is firmware configuration
        admin_down_bound_s=None,
        # Its poll_cq maps no CQE status to IB_WC_REM_ACCESS_ERR: a WRITE completes
        # before the TERMINATE, or is flushed by it; the TERMINATE aborts (RST).
        remote_access_write_statuses=frozenset({IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR}),
        remote_access_statuses=frozenset({0, -errno.ECONNRESET}),
        wire=CXGB4_WIRE,
    )


SIW = siw_profile()
IW_CXGB4 = cxgb4_profile()


@dataclass(frozen=True)
class ProviderSpec:
    """How a provider is recognised on a host and how its profile follows from the host.

    ``node_desc`` starts the provider's ``/sys/class/infiniband/DEV/node_desc``;
    ``parent_drivers`` are the drivers of the device below its RDMA device
    (the PCI function of an RNIC).  ``settings`` names each host setting
    that shapes the profile and where it is read: ``sysctl:NAME`` or an
    absolute sysfs path.  ``build(settings)`` makes the profile from those
    that were read on one host (each host of a pair gets its own).
    """

    driver: str
    node_desc: str
    settings: dict[str, str]
    build: Callable[[Mapping[str, int]], Profile]
    parent_drivers: tuple[str, ...] = ()


PROVIDERS: dict[str, ProviderSpec] = {}


def register_provider(spec: ProviderSpec) -> None:
    """Make a provider known to pair runs and to :func:`profile_for` (a new RNIC's profile)."""
    PROVIDERS[spec.driver] = spec


def provider_named(driver: str) -> ProviderSpec:
    """The provider of driver name ``driver`` (or of a parent driver such as ``cxgb4``)."""
    for spec in PROVIDERS.values():
        if driver == spec.driver or driver in spec.parent_drivers:
            return spec
    raise InputError(
        f"no contract profile for RDMA driver {driver!r} (known: {', '.join(sorted(PROVIDERS))})"
    )


def profile_for(driver: str, **settings: int | None) -> Profile:
    """The profile for an RDMA driver, shaped by the host settings given.

    Settings are the provider's (``tcp_retries2`` for siw, ``ep_timeout_secs``
    for iw_cxgb4); one left out or None takes the kernel's default.
    """
    spec = provider_named(driver)
    unknown = set(settings) - set(spec.settings)
    if unknown:
        raise InputError(
            f"provider {spec.driver} takes no setting {', '.join(sorted(unknown))} "
            f"(it takes: {', '.join(sorted(spec.settings)) or 'none'})"
        )
    return spec.build({k: v for k, v in settings.items() if v is not None})


register_provider(
    ProviderSpec(
        "siw",
        node_desc="Software iWARP stack",  # siw_main.c SIW_NODE_DESC_COMMON
        settings={"tcp_retries2": "sysctl:net.ipv4.tcp_retries2"},
        build=lambda s: siw_profile(s["tcp_retries2"]) if "tcp_retries2" in s else SIW,
    )
)
register_provider(
    ProviderSpec(
        "iw_cxgb4",
        node_desc="cxgb4 Chelsio",  # cxgb4/iw_cxgb4.h C4IW_NODE_DESC
        settings={"ep_timeout_secs": "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"},
        build=lambda s: cxgb4_profile(s["ep_timeout_secs"]) if "ep_timeout_secs" in s else IW_CXGB4,
        parent_drivers=("cxgb4",),
    )
)


__all__ = [
    "IW_CXGB4",
    "PROVIDERS",
    "SIW",
    "PairProfile",
    "Profile",
    "Profiles",
    "ProviderSpec",
    "cxgb4_profile",
    "pair_profile",
    "profile_for",
    "provider_named",
    "register_provider",
    "siw_profile",
    "tcp_retries2_timeout_s",
]
