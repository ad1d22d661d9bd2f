"""What a provider profile is: where a provider keeps the iWARP CM contract its own way.

The contract rules (:mod:`hil.judge.contract`) read statuses and time bounds
from a :class:`Profile` and never look at the driver's name, so the same
suites run on both providers.  The providers' own profiles (siw's and
iw_cxgb4's) and how a provider is recognised are in :mod:`hil.judge.profiles`;
each value's source is in docs/contract.md.

A pair is judged by :data:`Profiles`: one :class:`Profile` when both hosts
would get the same one, else a :class:`PairProfile` holding each host's own
(a mixed pair, siw on one side and iw_cxgb4 on the other, or two iw_cxgb4
hosts with different ``ep_timeout_secs``).  Either answers ``of(host)``: a
rule judges an event by the profile of the host that reported it and a bound
on an action by the profile of the host that acted.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from hil.errors import InputError
from hil.judge.provenance import Provenance, problems
from hil.judge.wireexpect import WireExpect


@dataclass(frozen=True)
class PdataLimits:
    """The most private data (bytes) each call delivers exactly, and the most the call
    itself takes (``taken``: connect, accept, reject; None: the same).  Past what it
    takes a call fails ``refusal`` (an errno name) and sends nothing.  A call that takes
    more than it delivers is a provider bug, ``broken`` says which."""

    connect: int
    accept: int
    reject: int
    taken: tuple[int, int, int] | None = None
    refusal: str = "EINVAL"
    broken: str = ""

    def of(self, call: str) -> int:
        """The most ``call`` (connect, accept or reject) delivers; InputError for another."""
        return (self.connect, self.accept, self.reject)[_call_index(call)]

    def taken_by(self, call: str) -> int:
        """The most ``call`` takes before it refuses."""
        return self.of(call) if self.taken is None else self.taken[_call_index(call)]


def _call_index(call: str) -> int:
    calls = ("connect", "accept", "reject")
    if call not in calls:
        raise InputError(f"no private data limit for {call!r} (known: {', '.join(calls)})")
    return calls.index(call)


@dataclass(frozen=True)
class IrdOrdPromise:
    """How a provider negotiates a connection's IRD and ORD (RFC 6581 section 3) and
    reports them (docs/ird-ord.md has each value's source).

    ``max_ird``/``max_ord``: the most a connect or accept takes (ibv_query_device's
    ``max_qp_rd_atom`` and ``max_qp_init_rd_atom``, librdmacm's limits); past them the
    call fails ``refusal``.  ``relaxed``: the responder raises its IRD to the
    initiator's ORD and lowers its ORD to the initiator's IRD rather than refusing.
    ``established_swapped``: ESTABLISHED's ``initiator_depth`` carries the side's IRD and
    ``responder_resources`` its ORD (the reverse of rdma_conn_param's meaning).
    ``qp_swapped``/``qp_pow2``: ibv_query_qp's ``max_rd_atomic`` holds the IRD (and
    ``max_dest_rd_atomic`` the ORD), each rounded up to a power of two.
    ``reads_past_ord``: what RDMA READs posted past the ORD do: ``complete`` (they wait
    for a free slot and complete), None: not judged.
    """

    max_ird: int
    max_ord: int
    refusal: str
    relaxed: bool
    established_swapped: bool
    qp_swapped: bool
    qp_pow2: bool
    reads_past_ord: str | None
    source: str


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
    # What the pulled host's RDMA port shows in each pull mode (absent: not known,
    # not judged): its state while pulled and the async events of the pull and restore.
    pull_ports: tuple[tuple[str, PortPromise], ...]
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
    # The most private data rdma_connect, rdma_accept and rdma_reject take, and
    # how a longer one is refused (docs/contract.md "Private data").
    private_data: PdataLimits
    # What the provider puts on the wire (the wire rules).
    wire: WireExpect
    # Each RDMA CM event type's statuses, as cma.c and the host's driver make them
    # (an empty set: the type never comes on iWARP); a type missing is a profile
    # error, never a pass (the rule event-status-in-profile).
    event_statuses: tuple[tuple[str, frozenset[int]], ...] = ()
    # IRD/ORD negotiation and how it is reported (None: not judged).
    ird_ord: IrdOrdPromise | None = None

    # Each time bound's source, by field name (every *_bound_s and *_min_s has one:
    # tests/judge/test_provenance.py; docs/contract.md "Bounds and their provenance").
    provenance: tuple[tuple[str, Provenance], ...] = ()

    def provenance_of(self, bound: str) -> Provenance | None:
        """Where the time bound named ``bound`` (a field name) comes from; None: unsaid."""
        return dict(self.provenance).get(bound)

    def provenance_problems(self) -> list[str]:
        """Each time bound without a provenance, and each measured one looser than its
        p99 allows (:func:`hil.judge.provenance.problems`)."""
        bounds = {name: getattr(self, name) for name in bound_fields()}
        return [f"{self.name} {p}" for p in problems(bounds, dict(self.provenance))]

    def statuses_of(self, event_type: str) -> frozenset[int] | None:
        """The statuses an event of ``event_type`` may carry; None: the profile has no set."""
        return next((s for t, s in self.event_statuses if t == event_type), None)

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

    def port_promise(self, method: str) -> PortPromise | None:
        """What the pulled host's RDMA port shows in pull mode ``method`` (``admin``,
        ``carrier``, ``blackhole``, ...), or None when the profile does not know."""
        return dict(self.pull_ports).get(method)

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

    def flap_bound_s(self, mode: str, down_s: float) -> float | None:
        """Within how many seconds of its first down a link flapping down for ``down_s``
        at a time (``mode`` as a pull's: ``admin`` when this host's netdev goes down)
        ends a connection carrying traffic; None: the connection lives through the downs.

        A driver that ends its connections when its netdev goes down (an admin bound)
        does so at the first down, however short.  Otherwise only a down as long as the
        pull bound under traffic ends it (TCP's retransmission timeout, tcp_retries2:
        a shorter outage is retransmitted through, RFC 9293 3.8.3), as long as nothing
        else times an established connection out sooner (siw sets no keepalive:
        ``pull_idle_bound_s``).
        """
        if mode == "admin" and self.admin_down_bound_s is not None:
            return self.admin_down_bound_s
        bound = self.link_pull_bound_s(mode, True)
        return bound if bound is not None and bound <= down_s else None

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


def bound_fields() -> tuple[str, ...]:
    """The names of a profile's time bounds: its ``*_bound_s`` and ``*_min_s`` fields."""
    return tuple(f.name for f in fields(Profile) if f.name.endswith(("_bound_s", "_min_s")))


@dataclass(frozen=True)
class PortPromise:
    """What a pulled host's RDMA port shows in one pull mode: its state (``rdma link``,
    ``ibv_devinfo``: ib_query_port) while the link is pulled, the async events the
    pull (``down``) and the restore (``up``) deliver to its verbs users, and the
    driver source or measurement that says so."""

    state: str
    down: tuple[str, ...]
    up: tuple[str, ...]
    source: str


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
