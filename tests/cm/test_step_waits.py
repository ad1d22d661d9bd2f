"""How long the CM steps wait comes from the pair's profiles, never from siw's constants.

A close that iw_cxgb4 is allowed to take (its initiator's DISCONNECTED up to
``ep_timeout_secs`` + 5 s after rdma_disconnect, when the peer's FIN is
slow) is waited for and judged by the contract; only one past the bound and
the steps' slack is a step failure.  The fake world (tests/cm/fake_cm.py)
runs on a virtual clock here, so a 64 s close takes no time.
"""

from __future__ import annotations

from typing import Any

import fake_cm
import pytest
from fake_cm import Cid, FakeAgent, FakeCMWorld, FakeEp

from hil.agent import protocol
from hil.cm import clock, endpointcore, pulls, recording, steps
from hil.cm.session import CMSession
from hil.judge.contract import check
from hil.judge.profiles import SIW, PairProfile, Profiles, cxgb4_profile
from hil.timeouts import configured


class VirtualClock:
    """The controller's CLOCK_MONOTONIC in µs: moves 1 µs a read, jumps when waited on."""

    def __init__(self) -> None:
        self.t_us = 1_000_000_000

    def __call__(self) -> int:
        self.t_us += 1
        return self.t_us


@pytest.fixture
def virtual(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    now = VirtualClock()
    for module in (clock, endpointcore, recording, pulls, fake_cm):
        monkeypatch.setattr(module, "controller_us", now)
    return now


class SlowClose:
    """The initiator's DISCONNECTED ``delay_s`` after its rdma_disconnect; the peer's at once.

    iw_cxgb4's initiator waits for the peer's FIN (up to ``ep_timeout_secs``);
    an events call that waits long enough moves the clock to when it comes.
    """

    def __init__(self, now: VirtualClock, delay_s: float) -> None:
        self.now, self.delay_us = now, int(delay_s * 1e6)
        self.pending: list[tuple[int, Cid]] = []

    def disconnect(self, agent: FakeAgent, ep: FakeEp, id: int) -> protocol.TimedReply:
        result = agent._timed()
        cid = ep.ids[id]
        peer = cid.peer
        if peer is not None and peer.state == "up":
            peer.state = "closed"
            peer.ep.event(peer, "DISCONNECTED")
        if cid.state == "up":
            cid.state = "closed"
            self.pending.append((self.now.t_us + self.delay_us, cid))
        return result

    def events(self, ep: FakeEp, after: int, wait: float, **_: Any) -> protocol.EventsReply:
        due = [(t, c) for t, c in self.pending if c.ep is ep]
        if due and due[0][0] <= self.now.t_us + wait * 1e6:
            self.now.t_us = max(self.now.t_us, due[0][0])
            self.pending.remove(due[0])
            ep.event(due[0][1], "DISCONNECTED")
        elif wait:
            self.now.t_us += int(wait * 1e6)
        return {"log": ep.log[after:], "t_us": ep.host.now()}


@pytest.fixture
def world(virtual: VirtualClock) -> FakeCMWorld:
    return FakeCMWorld()


def slow(monkeypatch: pytest.MonkeyPatch, now: VirtualClock, delay_s: float) -> None:
    s = SlowClose(now, delay_s)
    monkeypatch.setattr(FakeAgent, "op_disconnect", lambda self, ep, id: s.disconnect(self, ep, id))
    monkeypatch.setattr(FakeAgent, "op_events", lambda self, ep, **kw: s.events(ep, **kw))


def session(world: FakeCMWorld, profile: Profiles) -> CMSession:
    return CMSession(world, world.pair, profile=profile)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "profile, reply_s, close_s, destroy_s",
    [
        (SIW, 13 + 10, SIW.local_close_bound_s + 10, 13 + 10),
        # iw_cxgb4's listener destroy waits for the firmware: up to C4IW_WR_TO, 60 s (+ 5).
        (cxgb4_profile(10), 15 + 10, 15 + 10, 65 + 10),
        (cxgb4_profile(60), 65 + 10, 65 + 10, 65 + 10),
        (PairProfile((("h0", SIW), ("h1", cxgb4_profile(10)))), 15 + 10, 15 + 10, 65 + 10),
    ],
)
def test_the_waits_are_the_slower_hosts_bounds_and_the_slack(
    world: FakeCMWorld, profile: Profiles, reply_s: float, close_s: float, destroy_s: float
) -> None:
    waits = steps.waits(session(world, profile))
    assert (waits.reply_s, waits.close_s, waits.destroy_s) == (reply_s, close_s, destroy_s)
    if destroy_s > max(reply_s, close_s):
        assert waits.destroy_why.startswith("iw_cxgb4 listener destroy bound 65 s")


def test_a_slow_iw_cxgb4_close_within_ep_timeout_is_waited_for_and_passes(
    world: FakeCMWorld, virtual: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow(monkeypatch, virtual, delay_s=64.0)  # ep_timeout_secs 60 + 5 s allows it
    profile = cxgb4_profile(60)
    tl = session(world, profile).run("close")
    verdict = check(tl, profile)
    assert verdict.ok, verdict.to_text()
    assert tl.metrics["close_us"] == pytest.approx(64e6, abs=1e3)


def test_a_close_past_the_closing_hosts_bound_is_judged_not_a_step_failure(
    world: FakeCMWorld, virtual: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 s: past iw_cxgb4's bound for ep_timeout_secs 10 (15 s), within the steps' wait
    # (25 s); siw's old 15 s step timeout would have called it a lab error.
    slow(monkeypatch, virtual, delay_s=20.0)
    profile = cxgb4_profile(10)
    tl = session(world, profile).run("close")
    verdict = check(tl, profile)
    assert [v.rule for v in verdict.violations] == ["disconnect-completes-within"]
    assert "bound 15000.0 ms" in verdict.to_text()


def test_a_close_that_never_comes_within_the_wait_is_a_step_failure_naming_it(
    world: FakeCMWorld, virtual: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow(monkeypatch, virtual, delay_s=30.0)
    with pytest.raises(
        steps.StepFailed,
        match=r"timeout \(step layer, 25 s: iw_cxgb4 close bound 15 s \+ slack 10 s\) "
        r"waiting for DISCONNECTED on the active side \(h0\)",
    ):
        session(world, cxgb4_profile(10)).run("close")


def test_each_side_of_a_mixed_pair_waits_for_the_slower_host(
    world: FakeCMWorld, virtual: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # siw initiator on h0, iw_cxgb4 (ep_timeout_secs 60) on h1: a 40 s close by h1 is its own.
    slow(monkeypatch, virtual, delay_s=40.0)
    profile = PairProfile((("h0", SIW), ("h1", cxgb4_profile(60))))
    tl = CMSession(world, world.pair, profile=profile, direction="b-a").run("close")  # type: ignore[arg-type]
    verdict = check(tl, profile)
    assert verdict.ok, verdict.to_text()
    assert verdict.profile == "siw+iw_cxgb4"
    assert tl.metrics["close_us"] == pytest.approx(40e6, abs=1e3)


def test_the_step_layers_slack_is_configurable_and_its_expiry_says_where_the_bound_came_from(
    world: FakeCMWorld, virtual: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow(monkeypatch, virtual, delay_s=20.0)  # within 15 s + 10 s, not within 15 s + 2 s
    with configured(step_slack_s=2.0):
        w = steps.waits(session(world, cxgb4_profile(10)))
        assert (w.reply_s, w.close_s) == (17.0, 17.0)
        with pytest.raises(steps.StepFailed) as e:
            session(world, cxgb4_profile(10)).run("close")
    assert str(e.value) == (
        "h0: close of c1 by the active side: timeout (step layer, 17 s: iw_cxgb4 close bound "
        "15 s + slack 2 s) waiting for DISCONNECTED on the active side (h0)"
    )


def test_a_step_that_waits_for_a_reply_names_the_reply_bound(world: FakeCMWorld) -> None:
    w = steps.waits(session(world, PairProfile((("h0", SIW), ("h1", cxgb4_profile(60))))))
    assert w.reply_why == "iw_cxgb4 reply bound 65 s + slack 10 s"
    assert w.destroy_why == w.reply_why
