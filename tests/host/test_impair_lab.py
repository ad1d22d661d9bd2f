"""Impairments on the virtual lab's guests (kernel with netem, hil/lab/siw.config): each
netem kind proves itself on the path between the guests and goes with its block; a flap
takes the port down and leaves it up; an impairment a dead run left is undone by the
next replay."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from vlab import VirtualLab, lab_pair_run

from hil.host.impair import ImpairControl, Point
from hil.host.impairkinds import Impairment
from hil.host.journal import replay
from hil.host.netdelay import root_qdisc
from hil.run import PairRun

pytestmark = pytest.mark.lab

KINDS = [
    [Impairment("loss", percent=20), Impairment("delay", delay_ms=30, jitter_ms=5)],
    [Impairment("reorder", percent=50, delay_ms=20), Impairment("duplicate", percent=20)],
    [Impairment("corrupt", percent=20), Impairment("rate", rate_kbit=1000)],
]


@contextmanager
def _control(
    lab: VirtualLab, scratch: Path, holder: str
) -> Iterator[tuple[PairRun, ImpairControl, Point]]:
    """The lab's pair set up, its impairment control and the a>b impairment point."""
    with lab_pair_run(lab, scratch, holder) as run:
        ctl = ImpairControl(run.hosts, run.journal)
        yield run, ctl, ctl.point(run.pair.link, "a>b")


def test_each_netem_kind_proves_itself_between_the_guests_and_goes_with_its_block(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    with _control(virtual_lab, tmp_path, "impair lab test") as (run, ctl, point):
        link = run.pair.link
        agent = run.hosts.agent(point.host)
        for impairments in KINDS:
            with ctl.impaired(link, "a>b", impairments) as probes:
                assert root_qdisc(agent, point.host, point.netdev)[0] == "netem"
                assert len(probes) == 2
            assert root_qdisc(agent, point.host, point.netdev)[1] == "0:"
            assert not ctl.entries(link)


def test_a_flap_takes_the_port_down_and_leaves_it_up(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    with _control(virtual_lab, tmp_path, "impair flap lab test") as (run, ctl, point):
        with ctl.impaired(run.pair.link, "a>b", [Impairment("flap", every_s=1.0, down_s=0.3)]):
            time.sleep(2.5)  # two periods: the flapper's downs
        assert run.hosts.agent(point.host).link(point.netdev).up


def test_an_impairment_left_by_a_dead_run_is_undone_by_the_replay(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    with _control(virtual_lab, tmp_path, "impair replay lab test") as (run, ctl, point):
        link = run.pair.link
        ctl.apply(link, "a>b", [Impairment("loss", percent=50)])  # the run "dies" here
        replay(run.hosts, run.pair, run.store).check("replaying the dead run's impairment")
        assert root_qdisc(run.hosts.agent(point.host), point.host, point.netdev)[1] == "0:"
        assert not ctl.entries(link)
