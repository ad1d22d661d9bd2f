"""siw's transmit path as a kernel consumer drives it: c18646248fed.

``regress_siw_sendpages_slab`` guards c18646248fed "RDMA/siw: Fix the sendmsg byte
count in siw_tcp_sendpages" (Pedro Falcato, 2025, CVE-2025-39758; Debian 6.1.187-1
brought it with the MSG_SPLICE_PAGES conversion that made the bug).  For a WR that is
unsignalled and at least a page long siw sends its data page by page through
``siw_tcp_sendpages`` (siw_qp_tx.c 279-283, 6.1.192); the unfixed code gave each page's
iov_iter, and ``tcp_sendmsg_locked``, the byte count of the whole send, not the page's.
TCP splices a page ``sendpage_ok()`` accepts and then stops at the one bvec's end, but
copies one it refuses, a slab page, running off the bvec onto the stack (the fix's
message: ``copy_from_iter``, ``iterate_bvec``).

User space cannot reach it: a user verbs buffer is pinned user memory, which
``sendpage_ok()`` accepts.  Only a kernel consumer posting a kmalloc'd buffer does, and
the lab runs none: ``bench/reverts/widen/c18646248fed.patch`` adds one to siw
(:data:`KNOB`).  Written "ADDRESS PORT LENGTH SEED", it connects to a listener of this
case through the kernel's rdma_cm, SENDs LENGTH bytes of hil's payload pattern
unsignalled from a kmalloc'd buffer, then an empty signalled SEND, and disconnects; its
``crossings`` count the slab pages siw copied whose send went on past the page, the
calls whose byte count the fix corrected: the window.  The passive end checks every
byte of the message (the contract's ``payload-intact``).  On a kernel without that
consumer the window is not observable and the case only listens.

Nothing is left to restore: the consumer's work connects, sends and disconnects by
itself within its own bounds (20 s a step) even when the run is killed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil import tools
from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, window
from hil.cm.regressions.widen import CALL_S, PARAM
from hil.judge.timeline import TOOL_PEER, Action, Timeline

if TYPE_CHECKING:
    from hil.agent.agent import Agent
    from hil.cm.recording import Recording
    from hil.cm.sides import PairSides

FIX = "c18646248fed"
KNOB = PARAM.format(module="siw", fix=FIX)  # a widening's knob, though it holds nothing
# kmalloc's largest slab size (KMALLOC_MAX_CACHE_SIZE, two pages with SLUB): its pages
# are slab pages, and two pages give the SEND's FPDUs a page boundary to cross.
SIZE = 8192
SEED = 0x2A
# From the knob's write to its "done": the consumer's own bounds are 20 s for each of
# its CM steps and its completion; a debug guest runs them in a few seconds.
DONE_S = 90.0
POLL_S = 0.2
RECEIVE_S = 30.0
WINDOW = "copied_slab_page_sent_past_its_end"
_STATE = re.compile(r"(\w+) rv=(-?\d+) slab=(\d) crossings=(\d+)")


@dataclass(frozen=True)
class Consumer:
    """The kernel consumer's state as its knob reads: ``idle``, ``running`` or
    ``done``, the errno its run ended with, whether its buffer was of slab pages and
    how many copied pages were sent past their end."""

    state: str
    rv: int
    slab: bool
    crossings: int


def parse(text: str) -> Consumer | None:
    """The knob's text as a :class:`Consumer`; None when it is not the consumer's."""
    m = _STATE.fullmatch(text.strip())
    if m is None:
        return None
    return Consumer(m[1], int(m[2]), m[3] == "1", int(m[4]))


def read(agent: Agent) -> Consumer | None:
    """The consumer's state on ``agent``'s host; None on a kernel without it."""
    got = agent.run(tools.argv("cat", KNOB), CALL_S)
    return parse(got.stdout) if got.status == 0 else None


def wait_done(agent: Agent, timeout: float = DONE_S) -> Consumer | None:
    """The consumer's state once its run is done, or its last one at ``timeout``."""
    deadline = time.monotonic() + timeout
    state = read(agent)
    while state is not None and state.state != "done" and time.monotonic() < deadline:
        time.sleep(POLL_S)
        state = read(agent)
    return state


@sequence
def regress_siw_sendpages_slab(s: PairSides) -> Timeline:
    """c18646248fed: a kernel consumer's unsignalled SEND of slab pages, checked whole."""
    with s.recording("regress-siw-sendpages-slab") as rec:
        listener = steps.listen(rec, s.passive)
        note(rec, "listening", True)
        present = read(s.agent(s.active)) is not None
        rec.metric("kernel_consumer_present", float(present))
        if present:
            _send(rec, s, listener)
        else:
            window(rec, WINDOW, None)
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


def _send(rec: Recording, s: PairSides, listener: steps.Listener) -> None:
    """The consumer's SEND to ``listener``, taken and checked, and what it measured."""
    agent, ep = s.agent(s.active), listener.ep
    target = listener.target(s.address(s.passive))
    argv, line = tools.argv("tee", KNOB), f"{target} {listener.port} {SIZE} {SEED}"
    # A peer whose own connect and close the timeline does not hold, as a tool peer's.
    said = {"argv": " ".join([*argv, line])}
    rec.add_action(Action(controller_us(), s.active, TOOL_PEER, None, said))
    wrote = agent.run(argv, CALL_S, input=line + "\n")
    if wrote.status != 0:
        raise steps.StepFailed(
            s.host(s.active), f"the kernel consumer refused {KNOB}: {wrote.why()}"
        )
    req = steps.expect(ep, "CONNECT_REQUEST", None, "the kernel consumer's connect")
    rec.label("kernel", req.id)
    acc = ep.accept(req.id)
    if not acc.ok:
        raise steps.StepFailed(ep.host, f"accept the kernel consumer: {acc.action.result}")
    steps.expect(ep, "ESTABLISHED", req.id, "accept the kernel consumer")
    got = ep.received(req.id, RECEIVE_S, size=SIZE, seed=SEED)
    done = wait_done(agent)
    steps.expect(ep, "DISCONNECTED", req.id, "the kernel consumer's disconnect")
    steps.destroy(ep, req.id)
    done = done or Consumer("gone", 0, False, 0)  # the knob vanished: nothing seen
    note(rec, "message_received", got.value.get("status") == 0)
    note(rec, "kernel_consumer_done", done.state == "done" and done.rv == 0)
    note(rec, "buffer_of_slab_pages", done.slab)
    rec.metric("copied_pages_sent_past_their_end", float(done.crossings))
    window(rec, WINDOW, done.crossings > 0)
