"""The egress hold's refusals against the netns lab (real agent, real tc), and its
failure path against a fake agent.

Holding frames back needs netem, which the controller's kernel may lack: that part
runs on the virtual lab's guests (test_netdelay_lab.py).  What runs here needs none:
a root qdisc someone configured (pfifo, handle 7:) is refused and left alone, and a
hold out of range is refused before the host is asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from netnslab.lab import NetnsLab

from hil.agent.types import CommandResult
from hil.errors import InputError, RemoteError
from hil.host.hosts import Hosts
from hil.host.journal import Journal
from hil.host.netdelay import held_egress, hold_undo, root_qdisc

HOLD_US = 80_000


@pytest.mark.netns
def test_a_configured_root_qdisc_is_refused_and_left_alone(
    netns_lab: NetnsLab, netns_hosts: Hosts, run_journal: Journal
) -> None:
    netns_lab.exec(1, ["tc", "qdisc", "add", "dev", "data0", "root", "handle", "7:", "pfifo"])
    try:
        agent = netns_hosts.agent("ns1")
        with (
            pytest.raises(InputError, match=r"ns1: data0 has a configured root qdisc \(pfifo 7:\)"),
            held_egress(agent, run_journal, "ns1", "data0", HOLD_US),
        ):
            pass
        assert root_qdisc(agent, "ns1", "data0") == ("pfifo", "7:")
        assert not run_journal.find(["ns1"], hold="data0")
    finally:
        netns_lab.exec(1, ["tc", "qdisc", "del", "dev", "data0", "root"], check=False)


@pytest.mark.netns
def test_a_hold_journaled_but_never_added_is_undone_without_a_failure(
    netns_hosts: Hosts, run_journal: Journal
) -> None:
    # A run killed between journaling the hold and adding it leaves only the entry: its
    # replay deletes a root qdisc that is the kernel's default, which tc refuses.
    run_journal.change("ns1", hold_undo("data0"))
    report = run_journal.undo(run_journal.find(["ns1"], hold="data0"))
    report.check("replaying a hold never added")
    assert report.undone == ("ns1: remove the egress hold of data0",)
    assert root_qdisc(netns_hosts.agent("ns1"), "ns1", "data0")[1] == "0:"


@pytest.mark.netns
def test_a_netdev_that_is_not_there_is_named(netns_hosts: Hosts, run_journal: Journal) -> None:
    with (
        pytest.raises(RemoteError, match=r"ns1: tc qdisc show dev nosuch0 failed .*is nosuch0"),
        held_egress(netns_hosts.agent("ns1"), run_journal, "ns1", "nosuch0", HOLD_US),
    ):
        pass


@pytest.mark.netns
@pytest.mark.parametrize("delay_us", [0, -5, 2_000_000])
def test_a_hold_out_of_range_is_refused_before_the_host_is_asked(
    netns_hosts: Hosts, run_journal: Journal, delay_us: int
) -> None:
    with (
        pytest.raises(InputError, match="an egress hold is 1..1000000 µs"),
        held_egress(netns_hosts.agent("ns1"), run_journal, "ns1", "data0", delay_us),
    ):
        pass


@dataclass
class _Agent:
    """A host whose tc shows the default qdisc and refuses netem (a kernel without it)."""

    calls: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], timeout: float, **_: Any) -> CommandResult:
        self.calls.append(argv)
        if "show" in argv:
            return CommandResult(
                tuple(argv), 0, '[{"kind":"noqueue","handle":"0:","root":true}]', ""
            )
        return CommandResult(tuple(argv), 2, "", "Error: Specified qdisc kind is unknown.\n")


@dataclass
class _Journal:
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)

    def change(self, host: str, undo: dict[str, Any]) -> int:
        self.entries[len(self.entries) + 1] = undo
        return len(self.entries)

    def forget(self, entry_id: int) -> None:
        del self.entries[entry_id]


def test_a_hold_the_kernel_refuses_says_why_and_leaves_no_undo_behind() -> None:
    agent, journal = _Agent(), _Journal()
    with (
        pytest.raises(RemoteError, match=r"h1: cannot hold d0's frames back \(Error: Spec.*NETEM"),
        held_egress(agent, journal, "h1", "d0", HOLD_US),  # type: ignore[arg-type]
    ):
        pass
    assert journal.entries == {}, "the undo of a hold never made would delete the default qdisc"
    assert [c[1:4] for c in agent.calls] == [["-j", "qdisc", "show"], ["qdisc", "add", "dev"]]
