"""Which capture points a link has, and whether they see the provider's packets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hil.inventory import CaptureSpec, Pair, load
from hil.wire.plan import CommandPoint, TcpdumpPoint, capture_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example-lab.yaml"


@pytest.fixture(scope="module")
def pair() -> Pair:
    return load(EXAMPLE).pair("t6-pair-1")


def _with(pair: Pair, capture: CaptureSpec) -> Pair:
    return dataclasses.replace(pair, link=dataclasses.replace(pair.link, capture=capture))


def test_default_captures_both_ends_of_a_siw_pair(pair: Pair) -> None:
    plan = capture_plan(pair, "siw")
    assert plan.usable and plan.reason == ""
    assert plan.points == (
        TcpdumpPoint("t6-a", "t6-a", "enp1s0f4"),
        TcpdumpPoint("t6-b", "t6-b", "enp1s0f4"),
    )


def test_default_has_no_usable_point_for_an_offloading_provider(pair: Pair) -> None:
    plan = capture_plan(pair, "iw_cxgb4")
    assert not plan.usable and plan.points == ()
    assert plan.reason.startswith(
        "link t6-pair-1: iw_cxgb4 runs its TCP on the RNIC, not in the host kernel"
    )
    assert "capture: host or command" in plan.reason


def test_a_mixed_pair_is_captured_at_its_siw_end(pair: Pair) -> None:
    plan = capture_plan(pair, "iw_cxgb4+siw")
    assert plan.points == (TcpdumpPoint("t6-b", "t6-b", "enp1s0f4"),)


def test_a_capture_host_sees_any_provider(pair: Pair) -> None:
    plan = capture_plan(_with(pair, CaptureSpec("host", host="bastion", netdev="eth3")), "iw_cxgb4")
    assert plan.points == (TcpdumpPoint("bastion", "bastion", "eth3", promiscuous=True),)


def test_a_command_point_runs_on_its_controller(pair: Pair) -> None:
    spec = CaptureSpec("command", controller="switch-ctl", start=("a",), stop=("b",),
                       fetch=("c", "{pcap}"))  # fmt: skip
    plan = capture_plan(_with(pair, spec), "iw_cxgb4")
    assert plan.points == (CommandPoint("switch-ctl", "t6-pair-1", spec),)
    assert plan.points[0].host == "switch-ctl"


def test_none_says_so(pair: Pair) -> None:
    plan = capture_plan(_with(pair, CaptureSpec("none")), "siw")
    assert not plan.usable
    assert plan.reason == "link t6-pair-1 has no capture point (inventory: capture: none)"
