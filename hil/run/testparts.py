"""The parts of a TestRun (:mod:`hil.run.testrun`): its options, what it needs of its pair
run, and what it keeps while the test runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from hil.cm.observer import Observer as CMObserver
from hil.host.evidence import SETTLE_S
from hil.judge.expectations import DEFAULT_KERNEL_ALLOW
from hil.run.observer import verdict_of
from hil.wire.capture import COUNT

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.host.pairsetup import PairState
    from hil.inventory.model import Pair
    from hil.judge.contract import Verdict
    from hil.judge.known import KnownFinding
    from hil.judge.profiles import Profiles
    from hil.judge.timeline import Timeline
    from hil.reservation import Lease
    from hil.reservation.store import Store
    from hil.run.observer import EvidenceReport, KernelFindings, Observers
    from hil.run.pairfacts import PairFacts
    from hil.run.provider import Provider
    from hil.run.wirestage import LinkWire
    from hil.wire.judge import WireReport

WIRE_PACKETS = COUNT  # the first N packets per capture point and test


@dataclass(frozen=True)
class TestOptions:
    """Which stages a test gets and their bounds (pytest's ``--hil-*`` options, the CLI's)."""

    __test__ = False

    wire: bool = True  # capture the link and judge it by the wire rules
    wire_packets: int = WIRE_PACKETS
    evidence: bool = True  # resources and kernel log after the test (kmemleak with it)
    kmemleak: bool = True  # scan kmemleak after the test; off: the caller scans (hil peer fuzz)
    settle_s: float = SETTLE_S
    allow: tuple[str, ...] = DEFAULT_KERNEL_ALLOW
    known: tuple[KnownFinding, ...] = ()
    # A fuzz case names no suite test: its kernel log is told apart from every entry known
    # on the pair's kernels, whatever tests the entry names (hil/run/peercase.py).
    known_anywhere: bool = False
    hw_snapshots: bool = False  # ethtool -S and debugfs before/after, for the report
    liveness_s: float = 0.0  # the crash watch's bound (0: no watch)
    attempts: bool = True  # the attempt marker in the store


class TestedPair(Protocol):
    """What a TestRun needs of its pair run (:class:`hil.run.PairRun` is one)."""

    @property
    def pair(self) -> Pair: ...
    @property
    def hosts(self) -> Hosts: ...
    @property
    def provider(self) -> Provider: ...
    @property
    def state(self) -> PairState: ...
    @property
    def facts(self) -> PairFacts: ...
    @property
    def profile(self) -> Profiles: ...
    @property
    def pinned(self) -> dict[str, dict[str, str]]: ...
    @property
    def lease(self) -> Lease: ...
    @property
    def store(self) -> Store: ...
    @property
    def observers(self) -> Observers: ...
    @property
    def wire(self) -> LinkWire: ...


class Keeper(CMObserver):
    """The timelines a test records and the verdicts the CM session gave them."""

    name = "keeper"

    def __init__(self) -> None:
        self.timelines: list[Timeline] = []
        self.verdicts: list[tuple[Timeline, Verdict]] = []

    def timeline(self, timeline: Timeline, complete: bool) -> None:
        if complete:
            self.timelines.append(timeline)

    def verdict(self, timeline: Timeline, verdict: Verdict) -> None:
        self.verdicts.append((timeline, verdict))

    def verdict_of(self, timeline: Timeline) -> Verdict | None:
        """The verdict the CM session gave ``timeline``, if any."""
        return verdict_of(self.verdicts, timeline)


@dataclass
class Collected:
    """What the exit stages found, filled in as they run."""

    failures: list[str] = field(default_factory=list)
    lab_errors: list[str] = field(default_factory=list)
    wire: WireReport | None = None
    evidence: EvidenceReport | None = None
    kernel: KernelFindings | None = None

    def lab_error(self, text: str) -> None:
        self.lab_errors.append(text)
