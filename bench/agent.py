"""Cost of the agent: starting one, its first netlink call, one call, a session.

Runs against a one-host netns lab (real sshd in a network namespace, needs
root), or with ``--inventory`` against a host of any inventory (e.g. a
virtual-lab guest: ``--inventory "$(hil lab inventory)"``), and prints medians:

    .venv/bin/python bench/agent.py [--calls 500] [--setups 15] [--cold 3]
    .venv/bin/python bench/agent.py --inventory "$(hil lab inventory)" [--host NAME]

- ``cold agent``: the first agent of a build on the host (a fresh upload
  directory each round: upload, the agent unpacking itself, Python compiling
  what it imports) from ``Agent.start`` to its first ``links()`` answered;
- ``warm agent``: the same, for an agent of a build that ran on the host
  before (its bytecode cached), and ``warm first netlink call``: that first
  ``links()`` alone (it waits for the agent's background pyroute2 import);
- ``setup``: SSH connect + agent start + handshake, then close;
- ``agent start``: the agent start and handshake alone, on an open session;
- ``call ping`` / ``call links``: one round trip over an open SSH session to a
  running agent (a no-op, and a netlink dump);
- ``CM endpoint open+close``: ``cm_open`` (a worker process started, its
  librdmacm loaded, its event channel open) and ``cm_close``, what each
  endpoint of a CM test costs; on a host without RDMA (the netns lab) the
  open fails after the worker started, and that is what is timed.

To compare builds of hil, run this file with ``PYTHONPATH`` set to each
checkout: the agent measured is the one that checkout builds.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import benchmain  # bench/, beside this script

from hil.agent import Agent, build
from hil.agent.client import AgentCallError
from hil.agent.deploy import REMOTE_DIR
from hil.inventory.loader import load
from hil.inventory.model import Inventory
from hil.ssh import SSHPool, SSHSession


def _samples_ms(fn: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _report(what: str, samples: list[float]) -> None:
    print(
        f"{what:<30} median {statistics.median(samples):8.1f} ms  "
        f"max {max(samples):8.1f} ms  over {len(samples)} rounds",
        flush=True,
    )


@contextlib.contextmanager
def _target(inventory_path: str | None, host: str | None) -> Iterator[tuple[Inventory, str]]:
    """The inventory and host to measure on: the given ones, or a one-host netns lab."""
    if inventory_path is not None:
        inventory = load(inventory_path)
        yield inventory, host or next(iter(inventory.hosts))
        return
    # The netns lab is test support (tests/netnslab/), not part of the installed hil.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from netnslab.lab import NetnsLab

    with NetnsLab(hosts=1) as lab:
        yield lab.inventory(), lab.hosts[0].name


class Bench:
    """Measurements on one host of an inventory."""

    def __init__(self, inventory: Inventory, name: str) -> None:
        self.inventory = inventory
        self.name = name
        self.host = inventory.hosts[name]

    def first_call(self, session: SSHSession, remote_dir: str = REMOTE_DIR) -> float:
        """Start an agent and make its first netlink call; ms of that call alone."""
        with Agent.start(session, self.host, remote_dir) as agent:
            start = time.perf_counter()
            agent.links()
            return (time.perf_counter() - start) * 1000

    def cold(self, session: SSHSession, rounds: int) -> list[float]:
        """First agents of a build: each in a fresh upload directory, removed after."""
        samples = []
        for _ in range(rounds):
            remote_dir = f".cache/hil/bench-{uuid.uuid4().hex[:12]}"
            start = time.perf_counter()
            self.first_call(session, remote_dir)
            samples.append((time.perf_counter() - start) * 1000)
            with Agent.start(session, self.host) as agent:
                agent.run(["rm", "-rf", remote_dir], check=True)
        return samples

    def setup(self, first_call: bool = False) -> None:
        """SSH connect, agent start and handshake (and its first netlink call), close."""
        with SSHPool(self.inventory, ssh_config=None) as pool:
            session = pool.get(self.name)
            with Agent.start(session, self.host) as agent:
                if first_call:
                    agent.links()


def _endpoints(agent: Agent, rounds: int) -> tuple[str, list[float]]:
    """Time CM endpoint opens (and closes); without RDMA, the worker start the open fails after."""

    def open_close() -> None:
        agent.call("cm_close", endpoint=agent.call("cm_open", timeout=30)["endpoint"], timeout=10)

    def failing_open() -> None:
        with contextlib.suppress(AgentCallError):
            agent.call("cm_open", timeout=30)

    try:
        open_close()  # outside the timings: says whether the host has RDMA
    except AgentCallError as e:
        if e.kind != "rdma_unavailable":
            raise
        return "CM worker start (open fails: no RDMA)", _samples_ms(failing_open, rounds)
    return "CM endpoint open+close", _samples_ms(open_close, rounds)


def main() -> int:
    """Measure, print; a netns lab is torn down on the way out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="rounds per call benchmark")
    parser.add_argument("--setups", type=int, default=15, help="rounds of setups, warm agents")
    parser.add_argument("--cold", type=int, default=3, help="rounds of first agents of a build")
    parser.add_argument("--inventory", help="measure on this inventory's host, not a netns lab")
    parser.add_argument("--host", help="the inventory's host (default: its first)")
    args = parser.parse_args()
    build()  # outside the timings: built once per process anyway
    with _target(args.inventory, args.host) as (inventory, name):
        bench = Bench(inventory, name)
        print(f"host {name}, agent {build().sha256[:12]} ({build().size} bytes)", flush=True)
        with SSHPool(inventory, ssh_config=None) as pool:
            session = pool.get(name)
            bench.first_call(session)  # the default directory's upload, outside the timings
            _report("cold agent (start+first call)", bench.cold(session, args.cold))
            warm = _samples_ms(lambda: bench.first_call(session), args.setups)
            _report("warm agent (start+first call)", warm)
            calls = [bench.first_call(session) for _ in range(args.setups)]
            _report("warm first netlink call", calls)
            _report(
                "agent start (open session)",
                _samples_ms(lambda: Agent.start(session, bench.host).close(), args.setups),
            )
            with Agent.start(session, bench.host) as agent:
                _report("call ping", _samples_ms(agent.ping, args.calls))
                _report("call links", _samples_ms(agent.links, args.calls))
                what, opens = _endpoints(agent, args.setups)
                _report(what, opens)
        _report("setup (connect+start)", _samples_ms(bench.setup, args.setups))
    return 0


if __name__ == "__main__":
    sys.exit(benchmain.run("agent", main))
