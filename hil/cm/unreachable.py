"""The ``unreachable`` sequence: a connect to a listener whose link drops every frame.

The contract's ``unreachable-connect-ends`` judges how the connect ends: on
siw ``rdma_connect`` itself blocks in the kernel's TCP connect until the SYN
retries (``net.ipv4.tcp_syn_retries``) run out and fails ETIMEDOUT, with no
event; on iw_cxgb4 it returns 0 and an UNREACHABLE follows.  The lab guests
set ``tcp_syn_retries`` 3: about 15 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.pulls import pulled
from hil.cm.registry import sequence
from hil.cm.steps import step_slack_s
from hil.errors import InputError

if TYPE_CHECKING:
    from hil.cm.sides import PairSides
    from hil.judge.timeline import Timeline

PDATA = b"hil-unreachable"


@sequence
def unreachable(s: PairSides, mode: str = "blackhole") -> Timeline:
    """Connect to a listener while the link drops every frame (``mode``: a pull that leaves
    both netdevs up), then restore it."""
    if mode == "admin" or mode not in s.pull_modes():
        offered = [m for m in s.pull_modes() if m != "admin"]
        raise InputError(
            f"unreachable needs a pull that leaves the netdevs up; link {s.pair.name} "
            f"offers: {', '.join(offered) or 'none'} (not {mode!r})"
        )
    lc = s.link_control()
    pull = s.pair.link.pull(mode)  # type: ignore[arg-type]
    side = s.side_of(pull.end.host) if pull.end else "a"
    wait_s = s.profile.of(s.host(s.active)).unreachable_bound_s + step_slack_s()
    with s.recording(f"unreachable-{mode}") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        # A connection first: resolving the peer's address needs its MAC, which a
        # link that drops every frame cannot learn; the neighbour entry stays valid.
        warm = steps.establish(rec, active, listener, "c0")
        steps.payload(warm)
        steps.close(warm, "active")
        steps.teardown(warm)
        with pulled(rec, lc, s.pair.link, mode, side, False, 2 * wait_s):
            out = active.connect(
                s.address(s.passive), listener.port, s.address(s.active), PDATA, wait_s
            )
            if out.ok and out.id:
                rec.label("c1", out.id)
                active.wait(steps.REPLY_TYPES, out.id, wait_s)
        steps.destroy(active, *([out.id] if out.id else []))
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()
