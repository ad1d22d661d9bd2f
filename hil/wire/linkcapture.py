"""Capture a link at every point of its capture plan, for one test.

    plan = capture_plan(pair, provider.driver)          # hil.wire.plan
    with LinkCapture.start(hosts, plan) as capture:      # every point capturing
        ...                                              # the test
        captured = capture.stop(directory, run_offsets)  # {point: pcap}, notes
    exchange = captured.placement().apply(decode(captured.files))

``start`` returns once every point captures (tcpdump says it listens, or the
tool's ``start`` succeeded).  The hosts are worked on at once, one thread
each (each host has its own SSH session and agent; a host's points go in
turn); ``start`` and ``stop`` return only when every thread is done, on an
error or interrupt too, so nothing starts after the clean-up.  A point that
fails to start or to deliver is a note, and the other points go on.  Each
point gets a wall-clock sample of its host (``hil.cm.clock.wall_sample``)
before its capture starts and after it stops, and its host a clock offset
(unless known), so that its packets can be put on the timeline
(:mod:`hil.wire.clock`).  Nothing is left running on a host:
an error or an interrupt anywhere stops and removes what was started.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from hil.cm.clock import agent_now, estimate, wall_sample
from hil.errors import HilError, InputError
from hil.judge.timeline import ClockOffset, WallSample
from hil.wire import clock
from hil.wire.capture import COUNT, SNAPLEN, Capture, Fetched
from hil.wire.command import CommandCapture
from hil.wire.plan import CapturePlan, CapturePoint, TcpdumpPoint

if TYPE_CHECKING:
    from hil.host.hosts import Hosts

log = logging.getLogger(__name__)

Samples = dict[str, tuple[WallSample | None, WallSample | None]]


@dataclass(frozen=True)
class Captured:
    """What a link capture delivered: a pcap per capture point that worked, notes on the
    rest, and each point's clock samples and its host's offset."""

    files: dict[str, Path]
    notes: tuple[str, ...]
    samples: Samples
    offsets: tuple[ClockOffset, ...]

    def placement(self) -> clock.Placement:
        """Where each point's packets go on the timeline."""
        return clock.place(self.samples, self.offsets)


class LinkCapture:
    """The running captures of one plan; use :meth:`start`."""

    def __init__(self, hosts: Hosts, plan: CapturePlan) -> None:
        self.hosts = hosts
        self.plan = plan
        self.running: dict[str, Capture | CommandCapture] = {}
        self.notes: list[str] = []
        self._before: dict[str, WallSample | None] = {}

    @classmethod
    def start(
        cls, hosts: Hosts, plan: CapturePlan, *, count: int = COUNT, snaplen: int = SNAPLEN
    ) -> LinkCapture:
        """Start every point of ``plan`` (``count`` packets of ``snaplen`` bytes at most per
        tcpdump); InputError with the plan's reason when it has no usable point."""
        if not plan.usable:
            raise InputError(plan.reason)
        capture = cls(hosts, plan)
        try:
            _each_host(plan.points, lambda point: capture._start(point, count, snaplen))
        except BaseException:
            capture.discard()
            raise
        return capture

    def _start(self, point: CapturePoint, count: int, snaplen: int) -> None:
        self._before[point.name] = self._sample(point, "before the capture")
        try:
            session = self.hosts.session(point.host)
            if isinstance(point, TcpdumpPoint):
                self.running[point.name] = Capture.start(
                    session,
                    point.netdev,
                    snaplen=snaplen,
                    count=count,
                    promiscuous=point.promiscuous,
                )
            else:
                self.running[point.name] = CommandCapture.start(session, point)
        except HilError as e:
            log.warning("capture point %s: %s", point.name, e)
            self.notes.append(f"capture point {point.name}: not captured: {e}")

    @property
    def missing(self) -> list[str]:
        """The plan's points that do not capture (their start failed: see the notes)."""
        return [p.name for p in self.plan.points if p.name not in self.running]

    def begin(self, count: int = COUNT, snaplen: int = SNAPLEN) -> None:
        """A new window, for the next :meth:`cut`: a point that no longer captures (its
        tool was cut, its tcpdump ended, its host's connection went) is started again
        (:attr:`missing` if that failed), each other point's clock is sampled."""
        self.notes = []

        def begin_one(point: CapturePoint) -> None:
            cap = self.running.get(point.name)
            if cap is not None and cap.reusable:
                self._before[point.name] = self._sample(point, "before the window")
                return
            if cap is not None:
                self.running.pop(point.name).discard()
            self._start(point, count, snaplen)

        _each_host(self.plan.points, begin_one)

    def _sample(self, point: CapturePoint, when: str) -> WallSample | None:
        try:
            return wall_sample(self.hosts.agent(point.host))
        except HilError as e:
            self.notes.append(f"capture point {point.name}: no clock sample {when}: {e}")
            return None

    def stop(self, directory: Path, known: Iterable[ClockOffset] = ()) -> Captured:
        """Stop every point, fetch each capture to ``directory/POINT.pcap``, sample the
        clocks; what failed is in the notes.  A host whose offset is ``known`` (the run's
        own, which the timelines were placed with) is not measured again."""
        try:
            return self._collect(directory, known, lambda cap, path: cap.stop(path), keep=False)
        finally:
            self.discard()  # what an interrupt left running

    def cut(
        self, directory: Path, known: Iterable[ClockOffset] = (), count: int = COUNT
    ) -> Captured:
        """Like :meth:`stop`, but each tcpdump goes on: the window since :meth:`begin` (its
        first ``count`` packets per point) is written to ``directory/POINT.pcap``.  A point
        whose capture could not be read is dropped (:meth:`begin` starts it again)."""
        try:
            return self._collect(
                directory, known, lambda cap, path: cap.cut(path, count), keep=True
            )
        except BaseException:
            self.discard()  # an interrupt mid-cut: nothing is known of what is left
            raise

    def _collect(
        self,
        directory: Path,
        known: Iterable[ClockOffset],
        take: Callable[[Capture | CommandCapture, Path], Fetched],
        *,
        keep: bool,
    ) -> Captured:
        """``take`` each point's capture into ``directory``; ``keep`` it running after."""
        files: dict[str, Path] = {}
        after: dict[str, WallSample | None] = {}
        offsets: dict[str, ClockOffset | None] = {o.host: o for o in known}

        def take_one(point: CapturePoint) -> None:
            cap = self.running.get(point.name) if keep else self.running.pop(point.name, None)
            if cap is None:
                return
            try:
                fetched = take(cap, directory / f"{point.name}.pcap")
            except HilError as e:
                self.notes.append(f"capture point {point.name}: capture lost: {e}")
                if keep:
                    self.running.pop(point.name).discard()
                return
            files[point.name] = fetched.path
            self.notes.extend(fetched.notes)
            after[point.name] = self._sample(point, "after the capture")
            if point.host not in offsets:
                offsets[point.host] = self._offset(point.host)

        _each_host(self.plan.points, take_one)
        delivered = [p for p in self.plan.points if p.name in files]
        samples: Samples = {p.name: (self._before.get(p.name), after[p.name]) for p in delivered}
        hosts = dict.fromkeys(p.host for p in delivered)
        found = [o for h in hosts if (o := offsets.get(h))]
        return Captured(files, tuple(self.notes), samples, tuple(found))

    def _offset(self, host: str) -> ClockOffset | None:
        try:
            return estimate(host, agent_now(self.hosts.agent(host)))
        except HilError as e:
            self.notes.append(f"host {host}: no clock offset: {e}")
            return None

    def discard(self) -> None:
        """Stop and remove every capture still running, fetching nothing; never raises."""
        while self.running:
            _, cap = self.running.popitem()
            cap.discard()

    def __enter__(self) -> LinkCapture:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()


def _each_host(points: Sequence[CapturePoint], work: Callable[[CapturePoint], None]) -> None:
    """``work`` on every point: the hosts at once, a host's points in turn.  Returns when
    every thread is done, then raises the first error a thread raised."""
    by_host: dict[str, list[CapturePoint]] = {}
    for point in points:
        by_host.setdefault(point.host, []).append(point)

    def host_work(host_points: list[CapturePoint]) -> None:
        for point in host_points:
            work(point)

    with ThreadPoolExecutor(max_workers=max(len(by_host), 1)) as pool:
        # Leaving the with block waits for every thread, on an interrupt too.
        for future in [pool.submit(host_work, ps) for ps in by_host.values()]:
            future.result()
