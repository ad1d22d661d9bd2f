"""The rules that a link pull proves itself: the link went down and came back, and the
pulled host's RDMA port showed it (state and async events) as its profile says."""

from __future__ import annotations

import pytest
from cmtimelines import UP, link_pull
from contractcheck import breaks, conforms

from hil.judge.profiles import IW_CXGB4, profile_for

LAB_SIW = profile_for("siw", tcp_retries2=5)
NOTHING_DOWN = (True, True, "UP", False, "ACTIVE")


@pytest.mark.parametrize("mode", ["admin", "carrier", "blackhole"])
def test_each_siw_pull_mode_conforms_as_the_profile_says(mode: str) -> None:
    # [lab] an admin pull is detected in 22-80 ms (docs/notes/profile-measure.md)
    conforms(link_pull(50 if mode == "admin" else 12_000, mode=mode), LAB_SIW)


@pytest.mark.parametrize("mode", ["admin", "carrier", "blackhole"])
def test_a_pull_that_left_the_link_up_is_not_effective(mode: str) -> None:
    rule = "link-pull-effective"
    tl = link_pull(12_000, mode=mode, pulled=NOTHING_DOWN)
    breaks(
        tl,
        LAB_SIW,
        rule,
        f"pull not effective: {mode} pull on side a, and both ends still up: "
        "lab-a eth1: up, carrier, operstate UP, not blackholed",
    )


def test_a_link_still_down_after_the_restore_fails() -> None:
    tl = link_pull(12_000, restored=(True, False, "DOWN", False, "ACTIVE"))
    breaks(tl, LAB_SIW, "link-pull-effective", "restore not effective: after the carrier pull")


def test_a_pull_never_sampled_fails() -> None:
    tl = link_pull(12_000)
    unsampled = tl.__class__(
        **{**vars(tl), "actions": tuple(a for a in tl.actions if a.name != "link_state")}
    )
    breaks(unsampled, LAB_SIW, "link-pull-effective", "the carrier pull on side a was not checked")


def test_siw_port_state_follows_the_netdev_not_the_carrier() -> None:
    rule = "link-pull-port-state"
    active = (False, False, "DOWN", False, "ACTIVE")  # the pull-port-active mutant
    breaks(
        link_pull(500, mode="admin", pulled=active),
        LAB_SIW,
        rule,
        "admin pull: the RDMA port of lab-a was ACTIVE while pulled, expected DOWN",
    )
    down = (True, False, "DOWN", False, "DOWN")
    breaks(link_pull(12_000, pulled=down), LAB_SIW, rule, "was DOWN while pulled, expected ACTIVE")
    still = (*UP[:4], "DOWN")
    breaks(link_pull(500, mode="admin", restored=still), LAB_SIW, rule, "after the restore")


def test_siw_port_events_per_mode() -> None:
    rule = "link-pull-port-events"
    breaks(
        link_pull(500, mode="admin", watched=()),
        LAB_SIW,
        rule,
        "admin pull on side a: port events none, expected IBV_EVENT_PORT_ERR, "
        "IBV_EVENT_PORT_ACTIVE",
    )
    no_active = link_pull(500, mode="admin", watched=("IBV_EVENT_PORT_ERR",))
    breaks(no_active, LAB_SIW, rule, "expected IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE")
    carrier = link_pull(12_000, watched=("IBV_EVENT_PORT_ERR",))
    breaks(carrier, LAB_SIW, rule, "carrier pull on side a: port events IBV_EVENT_PORT_ERR")
    breaks(link_pull(500, mode="admin", watched=None), LAB_SIW, rule, "was not watched")
    failed = link_pull(500, mode="admin", watch_result="exit 127: no such file")
    breaks(failed, LAB_SIW, rule, "watch on side a failed: exit 127")


def test_a_profile_that_does_not_know_its_port_judges_nothing_of_it() -> None:
    assert IW_CXGB4.port_promise("admin") is None
    odd = link_pull(500, mode="admin", watched=None, pulled=(False, False, "DOWN", False, "?"))
    conforms(odd, IW_CXGB4)
