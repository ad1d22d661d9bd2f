"""Opening a CM endpoint: the bound its worker's start is given."""

from __future__ import annotations

from typing import Any

import pytest

from hil.cm.endpoint import OPEN_TIMEOUT, Endpoint
from hil.judge.timeline import ClockOffset
from hil.timeouts import configured


class OpeningAgent:
    """An agent that opens endpoint 1 and keeps the bound each call was given."""

    host = "h"

    def __init__(self) -> None:
        self.bounds: list[float] = []

    def call(self, method: str, timeout: float, **params: Any) -> Any:
        self.bounds.append(timeout)
        return {"endpoint": 1, "pid": 4242}


@pytest.mark.parametrize(
    "layer, bound", [(None, OPEN_TIMEOUT), (5.0, OPEN_TIMEOUT), (120.0, 120.0)]
)
def test_an_open_gets_the_agent_layer_when_it_is_raised(layer: float | None, bound: float) -> None:
    # A debug lab's night raises the layer (--hil-timeout-agent 120): a worker's start on
    # its TCG guest took over 20 s, and the open must wait for it too.
    agent = OpeningAgent()
    with configured(agent_call_s=layer):
        ep = Endpoint.open(None, "a", "h", agent, ClockOffset("h", 0, 0))  # type: ignore[arg-type]
    assert (ep.number, ep.pid, agent.bounds) == (1, 4242, [bound])
