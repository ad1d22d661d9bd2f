"""The async event watch around a step: what the tool printed becomes the action's events.

The agent is faked at its boundary (``run``): the lab test is
suites/test_link_pull.py's admin pulls (``link-pull-port-events``).
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_cm import FakeAgent, FakeCMWorld

from hil.agent.types import CommandResult
from hil.cm.asyncwatch import AsyncWatch
from hil.cm.session import CMSession
from hil.judge.profiles import SIW

PRINTED = "siw_data0: async event FD 4\n  event_type IBV_EVENT_PORT_ERR (10), port_num 1\n"


class Watched:
    """The fake host's answers: the tool holds the device open, then ends as ``status``."""

    def __init__(self, status: int, stdout: str = PRINTED) -> None:
        self.status, self.stdout = status, stdout
        self.calls: list[list[str]] = []

    def run(self, agent: FakeAgent, argv: list[str], timeout: float = 60.0, **_: Any) -> Any:
        self.calls.append(list(argv))
        out = {
            "pgrep": "4242\n",
            "ls": "lrwx------ 1 root root 64 3 -> /dev/infiniband/uverbs0\n",
            "pkill": "",
        }.get(argv[0])
        if out is not None:
            return CommandResult(tuple(argv), 0, out, "")
        return CommandResult(tuple(argv), self.status, self.stdout, "")


@pytest.mark.parametrize("status", [124, -15, 143])
def test_the_events_the_tool_printed_are_the_watchs(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    world = FakeCMWorld()
    fake = Watched(status)
    monkeypatch.setattr(
        FakeAgent, "run", lambda self, argv, timeout=60.0, **kw: fake.run(self, argv, timeout)
    )
    s = CMSession(world, world.pair, profile=SIW)  # type: ignore[arg-type]
    with s.recording("watch") as rec, AsyncWatch(rec, "a", 5.0, device="siw_data0"):
        pass
    (watch,) = [a for a in rec.timeline().actions if a.name == "async_watch"]
    assert watch.ok and watch.params["events"] == ["IBV_EVENT_PORT_ERR"]
    tool = next(c for c in fake.calls if c[0] == "timeout")
    assert tool == ["timeout", "5", "stdbuf", "-oL", "ibv_asyncwatch", "-d", "siw_data0"]
    assert ["pkill", "-n", "-x", "ibv_asyncwatch"] in fake.calls  # ended with the block


def test_a_tool_that_could_not_watch_says_why() -> None:
    world = FakeCMWorld()
    fake = Watched(127, stdout="")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            FakeAgent, "run", lambda self, argv, timeout=60.0, **kw: fake.run(self, argv, timeout)
        )
        s = CMSession(world, world.pair, profile=SIW)  # type: ignore[arg-type]
        with s.recording("watch") as rec, AsyncWatch(rec, "a", 1.0):
            pass
    (watch,) = [a for a in rec.timeline().actions if a.name == "async_watch"]
    assert (
        not watch.ok and str(watch.result).startswith("exit 127") and watch.params["events"] == []
    )
