"""Hold a host's outgoing frames back on one netdev for a while (tc netem), journaled.

A race whose middle order lives while a frame is on its way (a CONNECT_REPLY
sent but not delivered, a TERMINATE) is a window as wide as the frame's trip:
on the TCG lab a few hundred µs to a few ms, and it moves by milliseconds
from round to round.  Holding the sender's frames back by a fixed delay
widens that window by the delay, so a sweep aimed at it lands there in most
rounds instead of one in thirty, and the two hosts' clocks (+/- 0.3-0.5 ms)
no longer make every round near it ``unclear``.

:func:`held_egress` puts a netem qdisc at the netdev's root for the length of
a ``with`` block.  Its undo (delete the root qdisc, which gives the kernel's
default back) is journaled before the qdisc is added, so a run killed in the
middle is restored by the next reservation of the pair.  A netdev whose root
qdisc someone configured (a handle other than ``0:``) is refused, never
replaced: deleting it would lose that configuration.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.errors import InputError, RemoteError
from hil.host.journal import agent_undo

if TYPE_CHECKING:
    from hil.agent.agent import Agent
    from hil.host.journal import Journal

log = logging.getLogger(__name__)

TC_TIMEOUT = 15.0  # one tc call on a host
DEFAULT_HANDLE = "0:"  # the handle of a root qdisc nobody configured (the kernel's default)
MAX_DELAY_US = 1_000_000  # a hold is for race windows: anything longer is a typo


def root_qdisc(agent: Agent, host: str, netdev: str) -> tuple[str, str]:
    """The kind and handle of ``netdev``'s root qdisc on ``host`` (``tc -j qdisc show``)."""
    argv = tools.argv("tc", "-j", "qdisc", "show", "dev", netdev, "root")
    got = agent.run(argv, TC_TIMEOUT)
    if got.status != 0:
        why = got.why()
        raise RemoteError(host, f"tc qdisc show dev {netdev} failed ({why}); is {netdev} there?")
    try:
        qdiscs = json.loads(got.stdout or "[]")
        root = next(q for q in qdiscs if q.get("root"))
        return str(root["kind"]), str(root["handle"])
    except (ValueError, StopIteration, KeyError, TypeError, AttributeError):
        raise RemoteError(
            host, f"tc printed no root qdisc for {netdev}: {got.stdout.strip()[:200]!r}"
        ) from None


def hold_undo(netdev: str) -> dict[str, Any]:
    """The journal entry that removes ``netdev``'s hold (tagged ``hold``: the netdev); done
    also when there is none (a run killed between journaling it and adding the qdisc)."""
    delete = tools.argv("tc", "qdisc", "del", "dev", netdev, "root")
    undo = agent_undo("run", f"remove the egress hold of {netdev}", argv=delete)
    undo.update(timeout=TC_TIMEOUT, missing_ok=True, hold=netdev)
    return undo


@contextmanager
def held_egress(
    agent: Agent, journal: Journal, host: str, netdev: str, delay_us: int
) -> Iterator[None]:
    """Delay every frame ``host`` sends on ``netdev`` by ``delay_us`` inside the block.

    The undo is journaled first and carried out when the block ends, however
    it ends; a root qdisc someone configured is an ``InputError``.
    """
    if not 0 < delay_us <= MAX_DELAY_US:
        raise InputError(f"an egress hold is 1..{MAX_DELAY_US} µs, not {delay_us}")
    kind, handle = root_qdisc(agent, host, netdev)
    if handle != DEFAULT_HANDLE:
        raise InputError(
            f"{host}: {netdev} has a configured root qdisc ({kind} {handle}); hil holds "
            "frames back only on a netdev with the kernel's default qdisc, so as not to "
            f"lose that configuration: remove it (tc qdisc del dev {netdev} root) or run "
            "this race without its hold"
        )
    entry = journal.change(host, hold_undo(netdev))
    add = ("qdisc", "add", "dev", netdev, "root", "netem", "delay", f"{delay_us}us")
    got = agent.run(tools.argv("tc", *add), TC_TIMEOUT)
    if got.status != 0:
        journal.forget(entry)  # nothing was added: its undo would delete the default
        why = got.why()
        raise RemoteError(
            host,
            f"cannot hold {netdev}'s frames back ({why}); the kernel needs "
            "CONFIG_NET_SCH_NETEM (the lab's has it) and the agent root",
        )
    log.info("%s: %s's frames held back %d µs", host, netdev, delay_us)
    try:
        yield
    finally:
        journal.undo(journal.find([host], hold=netdev)).check(
            f"removing the egress hold of {netdev} on {host}"
        )
