"""Hardware evidence over a test: what changed between the snapshots, and how it reads.

Each host's :class:`HostSnapshot` before and after the test (taken by
:mod:`hil.host.hwevidence`): the ``ethtool -S`` counters that changed, with
before, after and delta, and the driver's debugfs files before and after
(printed once when unchanged), as text for a report or as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hil.host.hwdebugfs import FILES, Debugfs


@dataclass(frozen=True)
class HostSnapshot:
    """One host's hardware evidence at one moment; a source not read says why."""

    host: str
    netdev: str
    counters: Mapping[str, int]  # ethtool -S name -> value
    counters_absent: str  # "" when read
    debugfs: Debugfs | None
    debugfs_absent: str  # "" when read


@dataclass(frozen=True)
class CounterChange:
    """One ``ethtool -S`` counter that changed over a test."""

    name: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        """after - before (negative when the counter was reset)."""
        return self.after - self.before


def diff_counters(before: Mapping[str, int], after: Mapping[str, int]) -> tuple[CounterChange, ...]:
    """The counters present before and after whose value changed, in ``after``'s order."""
    return tuple(
        CounterChange(name, before[name], value)
        for name, value in after.items()
        if name in before and before[name] != value
    )


@dataclass(frozen=True)
class HwEvidence:
    """Both hosts' snapshots before and after a test."""

    before: Mapping[str, HostSnapshot]
    after: Mapping[str, HostSnapshot]

    def changes(self, host: str) -> tuple[CounterChange, ...]:
        """The ``ethtool -S`` counters of ``host`` that changed."""
        return diff_counters(self.before[host].counters, self.after[host].counters)

    def to_text(self) -> str:
        """Per host: the changed counters (before, after, delta), then debugfs before/after."""
        out: list[str] = []
        for host in self.before:
            b, a = self.before[host], self.after.get(host, self.before[host])
            out.append(f"== {host} ({b.netdev})")
            out += self._counters_text(host, b, a)
            out += _debugfs_text(b, a)
        return "\n".join(out) + "\n"

    def _counters_text(self, host: str, b: HostSnapshot, a: HostSnapshot) -> list[str]:
        if b.counters_absent or a.counters_absent:
            return [f"ethtool -S: absent: {b.counters_absent or a.counters_absent}"]
        changes = self.changes(host)
        lines = [f"ethtool -S {b.netdev}: {len(changes)} of {len(a.counters)} counters changed"]
        if changes:
            width = max(len(c.name) for c in changes)
            head = f"  {'counter'.ljust(width)}  {'before':>14}  {'after':>14}  {'delta':>12}"
            lines.append(head)
            lines += [
                f"  {c.name.ljust(width)}  {c.before:>14}  {c.after:>14}  {c.delta:>+12}"
                for c in changes
            ]
        return lines

    def to_json(self) -> dict[str, Any]:
        """Each host's snapshots and its counter changes, as plain data."""
        return {
            host: {
                "before": asdict(self.before[host]),
                "after": asdict(self.after[host]),
                "changed": [{**asdict(c), "delta": c.delta} for c in self.changes(host)],
            }
            for host in self.before
            if host in self.after
        }


def _debugfs_text(b: HostSnapshot, a: HostSnapshot) -> list[str]:
    if b.debugfs is None or a.debugfs is None:
        return [f"debugfs: absent: {b.debugfs_absent or a.debugfs_absent}"]
    lines = [
        f"debugfs {b.debugfs.directory}: QPs {b.debugfs.qps} -> {a.debugfs.qps}, "
        f"endpoints {b.debugfs.eps} -> {a.debugfs.eps} "
        f"(listeners {b.debugfs.listeners} -> {a.debugfs.listeners})"
    ]
    for name in FILES:
        same = name in b.debugfs.files and b.debugfs.lines(name) == a.debugfs.lines(name)
        pairs = [("before and after (unchanged)", b.debugfs)]
        if not same:
            pairs = [("before", b.debugfs), ("after", a.debugfs)]
        for when, snap in pairs:
            if name in snap.unreadable:
                lines.append(f"-- {name} {when}: unreadable: {snap.unreadable[name]}")
            else:
                lines.append(f"-- {name} {when}:")
                lines += [f"  {line}" for line in snap.lines(name)] or ["  (empty)"]
    return lines
