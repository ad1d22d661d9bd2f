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
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hil.errors import InputError
from hil.judge.tcpmodel import tcp_retries2_timeout_s
from hil.judge.wireexpect import CXGB4_WIRE, SIW_WIRE, WireExpect

# enum ibv_wc_status values the profiles name.
IBV_WC_SUCCESS = 0
IBV_WC_WR_FLUSH_ERR = 5


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
    # The earliest such a destroy may return, counted from rdma_connect, when the
    # peer never answers: it waits for the CONNECT_REPLY the provider posts when
    # its connect timer fires (None: no lower bound known).
    conn_sent_destroy_min_s: float | None
    # How long rdma_destroy_id may block on a listener, requests pending on it
    # included (each is rejected as it goes).
    listener_destroy_bound_s: float
    # cxgb4 retries with MPA v1 after a RST during MPA v2: the passive side
    # may then see a second CONNECT_REQUEST for one connect.
    mpa_v1_retry: bool
    # Invariant 8: whether TCP is torn down when DISCONNECTED is reported.
    disconnected_means_tcp_down: bool
    # Link pull, carrier lost: detection bound with data in flight and when
    # idle (None: the provider promises no detection).
    pull_traffic_bound_s: float | None
    pull_idle_bound_s: float | None
    # Why an idle pull is (or is not) detected: what a suite says with the promise.
    pull_idle_basis: str
    # Link set administratively down on one host (None: as carrier lost).
    admin_down_bound_s: float | None
    # Whether that host's device then reports IBV_EVENT_PORT_ERR to its verbs users.
    admin_down_port_event: bool
    # Whether `rdma resource show qp` shows a QP's real state (its query_qp fills it).
    qp_state_reported: bool
    # A connect to a peer that black-holes it (the link pulled, no answer at all):
    # rdma_connect() itself fails with this errno name (None: it returns 0 and one of
    # unreachable_events follows), within unreachable_bound_s of the connect.
    unreachable_connect_error: str | None
    unreachable_events: frozenset[str]
    unreachable_bound_s: float
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

    def link_pull_promise(self, mode: str, traffic: bool) -> PullPromise:
        """What this profile promises for a pulled link, said in words too."""
        bound = self.link_pull_bound_s(mode, traffic)
        if mode == "admin" and self.admin_down_bound_s is not None:
            basis = "the driver ends its connections when its netdev goes down"
        elif traffic:
            basis = "TCP's retransmission timeout ends a connection with data in flight"
        else:
            basis = self.pull_idle_basis
        return PullPromise(self.name, bound, basis)


@dataclass(frozen=True)
class PullPromise:
    """A profile's promise for a pulled link: detection within ``bound_s`` seconds, or
    none at all (``bound_s`` None), and ``basis``: why."""

    profile: str
    bound_s: float | None
    basis: str

    def __str__(self) -> str:
        what = f"detection within {self.bound_s:.1f} s" if self.bound_s is not None else "nothing"
        return f"profile {self.profile} promises {what}: {self.basis}"


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

    def link_pull_promise(self, mode: str, traffic: bool) -> PullPromise:
        """The pair's promise (:meth:`link_pull_bound_s`), with both hosts' reasons."""
        bases = dict.fromkeys(p.link_pull_promise(mode, traffic).basis for _, p in self.by_host)
        return PullPromise(self.name, self.link_pull_bound_s(mode, traffic), "; ".join(bases))


# What judges a pair: one profile for both hosts, or each host's own.
Profiles = Profile | PairProfile


def pair_profile(by_host: tuple[tuple[str, Profile], tuple[str, Profile]]) -> Profiles:
    """One :class:`Profile` when both hosts have the same, else a :class:`PairProfile`."""
    (_, a), (_, b) = by_host
    return a if a == b else PairProfile(by_host)


def siw_profile(tcp_retries2: int = 15, tcp_syn_retries: int = 6) -> Profile:
    """The soft-iWARP profile for a host whose ``net.ipv4.tcp_retries2`` and
    ``net.ipv4.tcp_syn_retries`` are given."""
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
        # MPAREQ_TIMEOUT (10 s) runs from the MPA request, sent inside rdma_connect;
        # the jiffies timer never fires early: 0.5 s is only the stamps' slack.
        conn_sent_destroy_min_s=10.0 - 0.5,
        listener_destroy_bound_s=2.0,  # siw_destroy_listen and siw_reject: no waits
        mpa_v1_retry=False,
        disconnected_means_tcp_down=False,
        pull_traffic_bound_s=pull_bound,
        pull_idle_bound_s=None,  # no keepalive: an idle connection never notices
        pull_idle_basis="siw sets no TCP keepalive: an idle connection sends nothing, so "
        "it never notices a lost carrier [inferred]",
        admin_down_bound_s=2.0,  # siw moves every QP of the netdev to ERR at once
        admin_down_port_event=True,  # siw_main.c siw_netdev_event: NETDEV_DOWN -> PORT_ERR
        # siw_query_qp (6.1) never sets qp_attr->qp_state: nldev prints whatever its
        # stack held (RESET on the lab, whatever the QP's state).  [src, lab]
        qp_state_reported=False,
        # siw_connect's kernel_connect blocks until TCP gives up on its SYNs: the
        # SYN model (tcp_model_timeout from TCP_TIMEOUT_INIT, 1 s) plus a TCG margin.
        unreachable_connect_error="ETIMEDOUT",
        unreachable_events=frozenset(),
        unreachable_bound_s=tcp_retries2_timeout_s(tcp_syn_retries, rto_min_s=1.0) + 3.0,
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
        admin_down_port_event=False,  # not known: a firmware link event [inferred]
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
        settings={
            "tcp_retries2": "sysctl:net.ipv4.tcp_retries2",
            "tcp_syn_retries": "sysctl:net.ipv4.tcp_syn_retries",
        },
        build=lambda s: siw_profile(**s) if s else SIW,
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
    "WireExpect",
    "tcp_retries2_timeout_s",
]
