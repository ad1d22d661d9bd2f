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

What the debugfs files are and how one ``cat`` is split back is
:mod:`hil.host.hwdebugfs`; the snapshots compared and printed
:mod:`hil.host.hwdiff`; this module reads them on a host, and still names
their public names.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil import tools
from hil.host.hwdebugfs import CXGB4, CXGB4_DEBUGFS, FILES, Debugfs, split_debugfs
from hil.host.hwdiff import HostSnapshot as HostSnapshot
from hil.host.hwdiff import HwEvidence as HwEvidence
from hil.host.rdmadev import READ_TIMEOUT, SYSFS_IB

if TYPE_CHECKING:
    from hil.agent.agent import Runner


@dataclass(frozen=True)
class Target:
    """What to read on one host: its port's netdev and the driver's debugfs directory."""

    host: str
    netdev: str
    debugfs: str | None  # /sys/kernel/debug/iw_cxgb4/<PCI function>; None when absent
    absent: str = ""  # why there is no debugfs directory to read


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
        why = r.why()
        return Target(host, netdev, None, f"cannot find {rdma_device}'s PCI function ({why})")
    return Target(host, netdev, posixpath.join(CXGB4_DEBUGFS, pci))


def read_counters(agent: Runner, target: Target) -> tuple[dict[str, int], str]:
    """``ethtool -S`` of the target's netdev: (counters, "") or ({}, why there are none)."""
    r = agent.run(tools.argv("ethtool", "-S", target.netdev), timeout=READ_TIMEOUT)
    if r.status != 0:
        return {}, f"ethtool -S {target.netdev} failed: {r.why()}"
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
    reasons = sorted(set(found.unreadable.values())) or [r.why()]
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
