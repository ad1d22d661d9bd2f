"""Hardware evidence of a pair's hosts: the port's NIC counters and the RDMA driver's debugfs.

What a NIC engineer asks for when a test on their card fails, taken on each
host before and after the test:

- ``ethtool -S NETDEV``: the driver's counters of the port (for cxgb4 the
  MAC's frame counters, which count offloaded iWARP frames too, the NIC
  queues' and the doorbell counters; ``get_stats`` in
  drivers/net/ethernet/chelsio/cxgb4/cxgb4_ethtool.c), parsed, and diffed:
  the counters that changed, with before, after and delta;
- iw_cxgb4's debugfs files ``/sys/kernel/debug/iw_cxgb4/<PCI function>/``
  ``qps``, ``eps``, ``stags`` and ``stats`` (``setup_debugfs`` in
  drivers/infiniband/hw/cxgb4/device.c names the directory after the
  adapter's PCI function, ``pci_name(lldi.pdev)``, which is the RDMA
  device's parent in sysfs): one line per QP (``dump_qp``), per endpoint
  and listener (``dump_ep``, ``dump_listen_ep``), per memory region
  (``dump_stag``), and the resource table (``stats_show``).

Everything is read through the agent's ``run`` with argv lists and a
timeout, one command per host and snapshot for each source (one ``cat`` of
all four files: each file's lines have their own format, so the output is
split by line, and cat's message names a file it could not read).  A
device whose driver has no such files (siw), debugfs not mounted, or an
agent that is not root leaves the debugfs *absent*, with the reason: that
is recorded, never an error.  The QP and endpoint counts also go to the
after-test leak check (:func:`counter`, :mod:`hil.host.evidence`)::

    target = locate(agent, "t6a", "enp2s0f4", "cxgb4_0", "iw_cxgb4")
    before = snapshot(agent, target)
    ...                                            # the test
    after = snapshot(agent, target)
    print(HwEvidence({"t6a": before}, {"t6a": after}).to_text())
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.agent.types import CommandResult
from hil.host.rdmadev import READ_TIMEOUT, SYSFS_IB

if TYPE_CHECKING:
    from hil.agent.agent import Runner

DEBUGFS_ROOT = "/sys/kernel/debug"
# debugfs_create_dir(DRV_NAME, NULL) in c4iw_init_module (device.c).
CXGB4_DEBUGFS = posixpath.join(DEBUGFS_ROOT, "iw_cxgb4")
CXGB4 = "iw_cxgb4"
FILES = ("qps", "eps", "stags", "stats")
# The first words of each file's lines (device.c: dump_qp, dump_ep and
# dump_listen_ep, dump_stag); every other line is stats_show's table.
LINE_STARTS = {
    "qps": ("qp sq id ", "rc qp sq id "),
    "eps": ("ep ",),
    "stags": ("stag: ",),
}


@dataclass(frozen=True)
class Target:
    """What to read on one host: its port's netdev and the driver's debugfs directory."""

    host: str
    netdev: str
    debugfs: str | None  # /sys/kernel/debug/iw_cxgb4/<PCI function>; None when absent
    absent: str = ""  # why there is no debugfs directory to read


@dataclass(frozen=True)
class Debugfs:
    """The driver's debugfs files on one host at one moment."""

    directory: str
    files: Mapping[str, str]  # file name -> content, for each file that was read
    unreadable: Mapping[str, str]  # file name -> cat's reason

    def lines(self, name: str) -> list[str]:
        """The non-empty lines of file ``name`` (none when it was not read)."""
        return [line for line in self.files.get(name, "").splitlines() if line.strip()]

    @property
    def qps(self) -> int | None:
        """QPs the driver holds (lines of ``qps``), None when unread."""
        return len(self.lines("qps")) if "qps" in self.files else None

    @property
    def eps(self) -> int | None:
        """Endpoints, listeners included (lines of ``eps``), None when unread."""
        return len(self.lines("eps")) if "eps" in self.files else None

    @property
    def listeners(self) -> int | None:
        """Listening endpoints among them (``dump_listen_ep``'s lines carry a ``stid``)."""
        if "eps" not in self.files:
            return None
        return sum(1 for line in self.lines("eps") if " stid " in line)


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


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """``ethtool -S`` output as {counter: value}.

    Names are stripped (cxgb4 pads them: ``"tx_frames_ok           "``); a
    name seen twice gets ``#2``, ``#3``; lines without an integer value
    (the ``NIC statistics:`` header) are skipped.
    """
    stats: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.rpartition(":")
        name = name.strip()
        if not sep or not name:
            continue
        try:
            number = int(value.strip())
        except ValueError:
            continue
        key, n = name, 1
        while key in stats:
            n += 1
            key = f"{name}#{n}"
        stats[key] = number
    return stats


def diff_counters(before: Mapping[str, int], after: Mapping[str, int]) -> tuple[CounterChange, ...]:
    """The counters present before and after whose value changed, in ``after``'s order."""
    return tuple(
        CounterChange(name, before[name], value)
        for name, value in after.items()
        if name in before and before[name] != value
    )


def split_debugfs(directory: str, result: CommandResult, names: tuple[str, ...]) -> Debugfs:
    """One ``cat`` of several of the driver's files, back into one text per file.

    Each line goes to the file its format belongs to (:data:`LINE_STARTS`);
    a file cat named in a message on stderr is unreadable, with that
    message (coreutils quotes a name with a colon, as every PCI function's
    has: ``cat: '/sys/.../0000:81:00.4/qps': Permission denied``).  The NUL
    byte ``qp_open`` and ``stag_open`` end their buffer with is dropped.
    """
    unreadable = {}
    for line in result.stderr.splitlines():
        for name in names:
            path = posixpath.join(directory, name)
            for prefix in (f"'{path}': ", f"{path}: "):
                if prefix in line:
                    unreadable[name] = line.split(prefix, 1)[1].strip()
                    break
    read = [n for n in names if n not in unreadable]
    texts: dict[str, list[str]] = {n: [] for n in read}
    for line in result.stdout.replace("\0", "").splitlines():
        owner = _owner(line, read)
        if owner is not None:
            texts[owner].append(line)
    files = {n: "".join(f"{line}\n" for line in lines) for n, lines in texts.items()}
    return Debugfs(directory, files, unreadable)


def _owner(line: str, names: list[str]) -> str | None:
    """Which of ``names`` printed ``line``: by its first words, else ``stats``."""
    start = line.lstrip()
    for name in names:
        if start.startswith(LINE_STARTS.get(name, ())):
            return name
    return "stats" if "stats" in names and line.strip() else None


def locate(agent: Runner, host: str, netdev: str, rdma_device: str | None, driver: str) -> Target:
    """Where ``host``'s hardware evidence is: the netdev, and the debugfs directory if any.

    iw_cxgb4 names its directory after the adapter's PCI function, the
    RDMA device's parent in sysfs (one ``readlink -f``); other drivers have
    none hil reads.
    """
    if rdma_device is None:
        return Target(host, netdev, None, "no RDMA device was set up on this host")
    if driver != CXGB4:
        return Target(host, netdev, None, f"{driver} has no debugfs files (only {CXGB4} has)")
    device = posixpath.join(SYSFS_IB, rdma_device, "device")
    r = agent.run(tools.argv("readlink", "-f", device), timeout=READ_TIMEOUT)
    pci = posixpath.basename(r.stdout.strip()) if r.status == 0 else ""
    if not pci:
        why = _why(r)
        return Target(host, netdev, None, f"cannot find {rdma_device}'s PCI function ({why})")
    return Target(host, netdev, posixpath.join(CXGB4_DEBUGFS, pci))


def read_counters(agent: Runner, target: Target) -> tuple[dict[str, int], str]:
    """``ethtool -S`` of the target's netdev: (counters, "") or ({}, why there are none)."""
    r = agent.run(tools.argv("ethtool", "-S", target.netdev), timeout=READ_TIMEOUT)
    if r.status != 0:
        return {}, f"ethtool -S {target.netdev} failed: {_why(r)}"
    counters = parse_ethtool_stats(r.stdout)
    if not counters:
        return {}, f"ethtool -S {target.netdev} printed no counters"
    return counters, ""


def read_debugfs(
    agent: Runner, target: Target, names: tuple[str, ...] = FILES
) -> tuple[Debugfs | None, str]:
    """The debugfs files ``names`` in one ``cat``: (files, "") or (None, why they are absent).

    Absent when no file could be read: the driver has none, debugfs is not
    mounted, or the agent is not root (debugfs is root's only).
    """
    if target.debugfs is None:
        return None, target.absent
    paths = [posixpath.join(target.debugfs, n) for n in names]
    r = agent.run(tools.argv("cat", *paths), timeout=READ_TIMEOUT)
    found = split_debugfs(target.debugfs, r, names)
    if found.files:
        return found, ""
    reasons = sorted(set(found.unreadable.values())) or [_why(r)]
    return None, f"{target.debugfs} unreadable ({'; '.join(reasons)}){_hint(reasons)}"


def _hint(reasons: list[str]) -> str:
    text = " ".join(reasons)
    if "Permission denied" in text:
        return ": debugfs is root's only; run the agent as root (ssh.user root or ssh.sudo)"
    if "No such file" in text:
        return f": is debugfs mounted (mount -t debugfs none /sys/kernel/debug) and {CXGB4} loaded?"
    return ""


def snapshot(agent: Runner, target: Target) -> HostSnapshot:
    """The target's counters and debugfs files now (two commands; one without debugfs)."""
    counters, counters_absent = read_counters(agent, target)
    debugfs, debugfs_absent = read_debugfs(agent, target)
    return HostSnapshot(
        target.host, target.netdev, counters, counters_absent, debugfs, debugfs_absent
    )


def counter(agent: Runner, target: Target) -> Callable[[], dict[str, int]]:
    """The leak check's extra counts of this host: QPs and endpoints in debugfs.

    Each call reads ``qps`` and ``eps`` in one ``cat``; a file it cannot
    read gives no count (nothing to compare), never an error.  The kinds
    name the file, so a leak reads "t6a holds 3 QPs listed in
    /sys/kernel/debug/iw_cxgb4/0000:02:00.4/qps after the test, 2 before".
    """

    def counts() -> dict[str, int]:
        found, _ = read_debugfs(agent, target, ("qps", "eps"))
        if found is None:
            return {}
        out = {}
        if found.qps is not None:
            out[count_kind(found.directory, "qps")] = found.qps
        if found.eps is not None:
            out[count_kind(found.directory, "eps")] = found.eps
        return out

    return counts


def count_kind(directory: str, name: str) -> str:
    """The leak check's name of a debugfs count: what it counts and the file."""
    what = {"qps": "QPs", "eps": "endpoints"}[name]
    return f"{what} listed in {posixpath.join(directory, name)}"


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


def _why(r: CommandResult) -> str:
    return (r.stderr.strip().splitlines() or [f"exit {r.status}"])[-1]
