"""siw's walk of its QPs at an administrative down, and QPs destroyed meanwhile.

- ``regress_siw_going_down`` guards 60dc7fcafea8 "RDMA/siw: Remove
  NETDEV_GOING_DOWN event handler" (Showrya M N, July 2024; in every 6.12.y,
  in no 6.1.y): toggling the link under NVMe-oF over siw panicked.  At
  NETDEV_GOING_DOWN (only an administrative down raises it: ``ip link set
  down``, net/core/dev.c __dev_close_many) 6.1.192's siw queues
  siw_netdev_down (siw_main.c:417-423, 446-448), which walks the device's
  qp_list without sdev->lock and without a reference on any QP
  (list_for_each_safe, 407-413) and moves each to ERROR; a QP destroyed while
  the walk holds it as its next entry is freed under it (ib_destroy_qp_user
  kfrees it once siw_free_qp unlinked it), and the walk locks the freed QP,
  then follows its poisoned list pointer.  6.12 has no such walk: an admin
  down only raises PORT_ERR (siw_main.c:386-388, 6.12.118).

On the pair: :data:`CONNECTIONS` connections; the link is pulled ``admin``
at its pulled end's host, and that host's ids (each destroy frees its QP in the
call: the agent destroys the id, then the QP) are destroyed while the port is
down; the link is restored and the other side's ids closed and destroyed.

The window is the walk's: a QP destroyed while the walk holds its next
entry.  On the lab's one-vCPU guests the walk runs inside the pull's own
call and does not sleep, so unwidened a destroy from user space lands before
or after it (docs/notes/netdev-going-down.md, section 3); the widened kernel
(bench/reverts/widen/60dc7fcafea8.patch) holds the walk after its first QP
and logs a marker, and the case destroys only once it has read the marker
and must end the destroys inside the hold.  Elsewhere the window named is the
scenario's own, which user space sees: the pulled host's QPs destroyed while
its port was administratively down, the first within :data:`FIRST_DESTROY_S`
of the pull.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.clock import controller_us
from hil.cm.pulls import pulled
from hil.cm.registry import sequence
from hil.cm.regressions.evidence import note, window
from hil.cm.regressions.widen import Widen
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint, Outcome
    from hil.cm.sides import PairSides

FIX = "60dc7fcafea8"
# The walk holds its next entry only after a first QP: two at least, a few more so
# that the destroys overlap the walk unwidened as well.
CONNECTIONS = 4
# How long the widened walk holds: a debug guest destroys an id and its QP in
# 0.1-0.4 s under TCG, four of them well inside this.
WIDEN_60DC7FCAFEA8_MS = 4000
MARKER_S = 10.0  # the widened walk's marker read within this of the pull
# Unwidened: the first destroy within this of the pull, when the walk runs.  Measured:
# the admin pull's call took 224 ms and the first destroy began 326 ms after the pull
# on the 6.12 debug guest (bench/reverts/run.py --revert 60dc7fcafea8, its fixed run's
# timeline, 2026-12-07); six times that leaves room for a loaded CI guest.
FIRST_DESTROY_S = 2.0
RESTORED_WAIT_S = 3.0  # the other side's DISCONNECTED after its disconnect, once restored


@sequence
def regress_siw_going_down(s: PairSides) -> Timeline:
    """60dc7fcafea8: the pulled host's QPs destroyed while an admin down walks them."""
    if "admin" not in s.pull_modes():
        raise InputError(
            f"regress_siw_going_down needs an admin pull of link {s.pair.link.name} "
            f"(offers: {', '.join(s.pull_modes()) or 'none'})"
        )
    pull = s.pair.link.pull("admin")
    side = s.side_of(pull.end.host) if pull.end else s.active
    pulled_role = "active" if side == s.active else "passive"
    hold_s = WIDEN_60DC7FCAFEA8_MS / 1000 + MARKER_S
    with s.recording("regress-siw-going-down") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        conns = [steps.establish(rec, active, listener, f"c{i}") for i in range(CONNECTIONS)]
        widen = Widen.on(s, side, "siw", FIX, WIDEN_60DC7FCAFEA8_MS)
        with widen, pulled(rec, s.link_control(), s.pair.link, "admin", side, False, hold_s) as t0:
            marked = widen.wait_opened(MARKER_S)
            marked_us = controller_us()
            gone = [_destroy(*c.end(pulled_role)) for c in conns]
        rec.metric("widened_windows_opened", float(widen.opened))
        note(rec, "connections_established", len(conns) == CONNECTIONS)
        note(rec, "every_qp_of_the_pulled_host_destroyed", all(o.ok for o in gone))
        window(
            rec,
            "a_qp_destroyed_while_the_going_down_walk_held_the_next",
            widen.window(
                soon_after(gone, t0),
                raced=marked and held(gone, marked_us, t0, WIDEN_60DC7FCAFEA8_MS),
            ),
        )
        for c in conns:
            _close(*c.end("passive" if pulled_role == "active" else "active"))
        steps.destroy(listener.ep, listener.id)
    return rec.timeline()


def soon_after(gone: list[Outcome], pull_us: int) -> bool:
    """Unwidened: the destroys (made while the port was down: inside the pull's block) began
    within :data:`FIRST_DESTROY_S` of the pull."""
    return bool(gone) and min(o.action.t_us for o in gone) - pull_us <= FIRST_DESTROY_S * 1e6


def held(gone: list[Outcome], marked_us: int, pull_us: int, hold_ms: int) -> bool:
    """Widened: every destroy began after the walk's marker was read and ended before
    the hold was over (it began after the pull did: the pull raised the walk)."""
    return bool(gone) and all(
        o.action.t_us >= marked_us and o.action.end_us <= pull_us + hold_ms * 1000 for o in gone
    )


def _destroy(ep: Endpoint, cm_id: str) -> Outcome:
    """Destroy a pulled host's id (and so its QP), bounded as :func:`steps.destroy` is."""
    return ep.destroy(cm_id, timeout=steps.waits(ep.rec.session).destroy_s)


def _close(ep: Endpoint, cm_id: str) -> None:
    """Close and destroy the other side's id: its peer's socket is gone, so its FIN meets
    an RST once the link is back."""
    ep.disconnect(cm_id)
    ep.wait("DISCONNECTED", cm_id, RESTORED_WAIT_S)
    steps.destroy(ep, cm_id)
