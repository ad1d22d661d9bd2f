"""A host's asynchronous verbs events while a step runs, through rdma-core's ibv_asyncwatch.

A port going down is announced to every verbs context of the device as an
async event (``IBV_EVENT_PORT_ERR``), not as a CM event: siw sends it when
its netdev goes administratively down (siw_main.c ``siw_netdev_event``).
The contract's ``link-pull-port-events`` rule judges what a watch saw::

    with AsyncWatch(rec, side, seconds=30.0):
        ...pull the link on ``side``, restore it...

records an ``async_watch`` action on ``side`` (from the watch's start to its
end) with params ``events``: the event names in the order the tool printed
them, e.g. ``["IBV_EVENT_PORT_ERR"]``; ``result`` says why the tool could not
watch (not installed, no device) when it could not.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING

from hil.cm.clock import controller_us
from hil.errors import HilError
from hil.tools import argv

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.types import CommandResult
    from hil.cm.recording import Recording

# rdma-core's tool; run under stdbuf -oL: its printf goes to a pipe, fully buffered,
# and it is ended with SIGTERM: line buffering keeps every line printed before the end.
TOOL = "ibv_asyncwatch"
EVENT = re.compile(r"event_type (IBV_EVENT_\w+)")
OPEN_S = 10.0  # at most, for the tool to start and open the device (a loaded TCG guest)
POLL_S = 0.2
# How the run ends as it should: timeout(1) ran out (124), or the tool was ended by
# pkill's SIGTERM, which timeout(1) passes on by dying of it too (-15 to the agent;
# 143 from a shell).
ENDED = frozenset({124, -15, 128 + 15})


class AsyncWatch:
    """Watch ``side``'s RDMA device (the first, or ``device``) for at most ``seconds``: from
    when the tool holds it open until the ``with`` block ends."""

    def __init__(
        self, rec: Recording, side: str, seconds: float, device: str | None = None
    ) -> None:
        self.rec, self.side, self.seconds = rec, side, seconds
        dev = ["-d", device] if device else []
        self.argv = argv("timeout", f"{seconds:g}", *argv("stdbuf", "-oL", *argv(TOOL, *dev)))
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._run: Future[CommandResult] | None = None
        self._start = 0

    def __enter__(self) -> AsyncWatch:
        agent = self.rec.session.agent(self.side)
        self._start = controller_us()
        self._run = self._pool.submit(agent.run, self.argv, self.seconds + 10.0)
        self._wait_open(agent)
        return self

    def _wait_open(self, agent: Agent) -> None:
        """Until the tool holds the device open (events from then on reach it), or the
        tool ended (its result says why), or OPEN_S: a watch not open in time sees less,
        and the rule judging it says what it saw."""
        deadline = time.monotonic() + OPEN_S
        while time.monotonic() < deadline and self._run is not None and not self._run.done():
            pid = agent.run(argv("pgrep", "-n", "-x", TOOL), timeout=10.0).stdout.strip()
            fds = agent.run(argv("ls", "-l", f"/proc/{pid}/fd"), timeout=10.0) if pid else None
            if fds is not None and "/dev/infiniband/uverbs" in fds.stdout:
                return
            time.sleep(POLL_S)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._run is not None
        try:
            # The step is over: end the tool now (its lines are flushed as printed).
            self.rec.session.agent(self.side).run(argv("pkill", "-n", "-x", TOOL))
            out = self._run.result(timeout=self.seconds + 15.0)
            events = EVENT.findall(out.stdout)
            ok = out.status in ENDED
            result = "ok" if ok else f"exit {out.status}: {out.stderr.strip()[-200:]}"
        except (HilError, TimeoutError) as e:
            events, result = [], f"{type(e).__name__}: {e}"
        finally:
            self._pool.shutdown(wait=False)
        self.rec.controller_action(self.side, "async_watch", self._start, result, events=events)
