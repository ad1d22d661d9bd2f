"""The egress hold on the virtual lab's guests (kernel with netem): a ping from host a
to host b's data address shows b's replies held back, and b's qdisc is the default
again once the hold's block ends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from vlab import VirtualLab, lab_pair_run

from hil import tools
from hil.agent.agent import Agent
from hil.host.netdelay import held_egress, root_qdisc

pytestmark = pytest.mark.lab

HOLD_US = 30_000  # far above a TCG guest's ping round trip (about a millisecond)


def _rtt_ms(agent: Agent, address: str) -> float:
    """The least of three pings' round trips: one ping beside a loaded machine's other
    guests once took 30.1 ms with no hold (.ci/run, stop 44); the least of three is the
    path's own delay."""
    got = agent.run(tools.argv("ping", "-c", "3", "-i", "0.2", "-w", "10", address), timeout=20)
    rtt = re.search(r"min/avg/max(?:/\S+)? = ([\d.]+)/", got.stdout)
    assert rtt, f"ping {address}: {got.stdout} {got.stderr}"
    return float(rtt.group(1))


def test_the_hold_delays_the_hosts_frames_and_goes_with_the_block(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    with lab_pair_run(virtual_lab, tmp_path, "netdelay lab test") as run:
        a, b = (h.name for h in run.pair.hosts)
        rnic = run.pair.rnic_b
        assert rnic.address is not None
        address = str(rnic.address.ip)
        pinger, held = run.hosts.agent(a), run.hosts.agent(b)
        before = root_qdisc(held, b, rnic.netdev)
        with held_egress(held, run.journal, b, rnic.netdev, HOLD_US):
            assert root_qdisc(held, b, rnic.netdev)[0] == "netem"
            assert run.journal.find([b], hold=rnic.netdev), "the undo was not journaled"
            assert _rtt_ms(pinger, address) >= HOLD_US / 1e3
        assert root_qdisc(held, b, rnic.netdev) == before
        assert not run.journal.find([b], hold=rnic.netdev)
        assert _rtt_ms(pinger, address) < HOLD_US / 1e3
