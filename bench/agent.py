"""Cost of the agent: one call over an open session, and setting a session up.

Runs against a one-host netns lab (real sshd in a network namespace, needs
root) and prints medians:

    .venv/bin/python bench/agent.py [--calls 500] [--setups 15]

- ``call ping`` / ``call links``: one round trip over an open SSH session to a
  running agent (a no-op, and a netlink dump);
- ``setup``: SSH connect + agent start (upload is a cache hit after the first
  round) + handshake, then close; ``setup + first netlink call`` adds the
  first ``links()``, which waits for the agent's background pyroute2 import;
- ``agent start``: the agent start and handshake alone, on an open session.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The netns lab is test support (tests/netnslab/), not part of the installed hil.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from netnslab.lab import NetnsLab

from hil.agent import Agent, build
from hil.inventory.model import Host
from hil.ssh import SSHPool, SSHSession


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _setup(lab: NetnsLab, name: str, first_call: bool = False) -> None:
    with SSHPool(lab.inventory(), ssh_config=None) as pool:
        session = pool.get(name)
        with Agent.start(session, lab.inventory().hosts[name]) as agent:
            if first_call:
                agent.links()  # waits for the agent's background import of pyroute2


def _report(what: str, ms: float, rounds: int) -> None:
    print(f"{what:<28} median {ms:8.2f} ms  over {rounds} rounds")


def main() -> int:
    """Build a lab, measure, print; the lab is torn down on the way out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="rounds per call benchmark")
    parser.add_argument("--setups", type=int, default=15, help="rounds of session setup")
    args = parser.parse_args()
    build()  # outside the timings: built once per process anyway
    with NetnsLab(hosts=1) as lab:
        name = lab.hosts[0].name
        host: Host = lab.inventory().hosts[name]
        _setup(lab, name)  # first upload, outside the timings
        setup_ms = _median_ms(lambda: _setup(lab, name), args.setups)
        _report("setup (connect+start)", setup_ms, args.setups)
        first_ms = _median_ms(lambda: _setup(lab, name, first_call=True), args.setups)
        _report("setup + first netlink call", first_ms, args.setups)
        with SSHPool(lab.inventory(), ssh_config=None) as pool:
            session: SSHSession = pool.get(name)
            start_ms = _median_ms(lambda: Agent.start(session, host).close(), args.setups)
            _report("agent start (open session)", start_ms, args.setups)
            with Agent.start(session, host) as agent:
                _report("call ping", _median_ms(agent.ping, args.calls), args.calls)
                _report("call links", _median_ms(agent.links, args.calls), args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
