"""A siw port query that outlives the netdev: 16b87037b488.

``regress_siw_netdev_port_query`` guards 16b87037b488 "RDMA/siw: Remove direct link
to net_device" (Bernard Metzler, December 2024; syzbot 4b87489410b4efd181bf, KASAN
slab-use-after-free, read in ``ib_cache_event_task``'s port query while a netns
cleanup freed the veth): siw kept its own pointer to the net_device and
``siw_query_port`` read the netdev through it.  Every port query of an iWARP device
goes through the core's ``iw_query_port``, which takes the netdev from the core
first (``ib_device_get_netdev``) and drops that reference before it calls the
driver (device.c:2070-2071 in 6.1.192, 2116-2117 in 6.12.118).  A device's
unregistration lets go of the netdev in that gap (``free_netdevs``), and the netdev
is freed once nothing else holds it: siw then reads freed memory.  The fix asks the
core for the netdev inside ``siw_query_port`` as well.  Debian 6.1.192 lacks the fix;
the lab's 6.12.118 has it.

On the active host: a veth with a siw device on it, nothing using the device.  Its
port is taken down first: siw raises PORT_ERR, whose cache work queries the port
(cache.c ``ib_cache_event_task``) while the netdev is still registered (6.1's
``ib_device_get_netdev`` answers NULL for one that is not, device.c:2260).  On the
widened kernel (bench/reverts/widen/16b87037b488.patch) ``iw_query_port`` holds that
query in the gap, and the veth is deleted inside the hold: the device unregisters
and the core lets go of the netdev while the query waits.  The hold's closing line
says whether the core had let go of it: that is the window.  Elsewhere the window is
not observable (user space cannot see a query inside the core).

What frees the netdev inside the window differs by kernel: on 6.1 nothing else holds
it; on 6.12 the device's iWARP GID entry does (cache.c:1463-1468 and :311, dropped only
in ``gid_table_cleanup_one`` after ``ib_cache_cleanup_one`` has flushed ``ib_wq``,
which waits for the held query), so the fix's revert on 6.12 reads a live netdev
(docs/regressions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm.clock import controller_us
from hil.cm.registry import sequence
from hil.cm.regressions.device import LISTED_S, NETDEV, make_device, wait_gone, wait_listed
from hil.cm.regressions.evidence import note, window
from hil.cm.regressions.widen import Widen
from hil.errors import InputError
from hil.judge.timeline import Timeline

if TYPE_CHECKING:
    from hil.cm.sides import PairSides

FIX = "16b87037b488"
# The hold: long enough for the veth's deletion inside it to free the netdev on a debug
# guest: on 6.1 it was freed within it (the KASAN report at the hold's end, 10 s,
# 2026-12-07); on 6.12 no hold lets it go (the GID entry, above).
WIDEN_16B87037B488_MS = 10000
OPENED_S = 20.0  # from the port's down to the widening's marker, on a debug guest
CLOSED = f"hil widen {FIX}: window closed:"  # the hold's end: the core holds or let go
RELEASED = f"{CLOSED} the core let go of"
WINDOW = "the_drivers_query_came_after_the_core_let_go"


@sequence
def regress_siw_netdev_port_query(s: PairSides) -> Timeline:
    """16b87037b488: a siw device's port query held past the core's hold on its netdev."""
    if s.journal is None:
        raise InputError("regress_siw_netdev_port_query changes a host: it needs a restore journal")
    host, agent = s.host(s.active), s.agent(s.active)
    with s.recording("regress-siw-netdev-port-query") as rec:
        made = make_device(s.journal, host, agent)
        try:
            listed = wait_listed(agent, True, LISTED_S)
            note(rec, "device_made", listed)
            with Widen.on(s, s.active, "ib_core", FIX, WIDEN_16B87037B488_MS) as widen:
                start = controller_us()
                agent.set_link(NETDEV, up=False)  # PORT_ERR: the cache work's port query
                rec.controller_action(s.active, "netdev_down", start, netdev=NETDEV)
                held = widen.wait_opened(OPENED_S)
                start = controller_us()
                agent.delete_link(NETDEV)  # nothing uses the device: it unregisters at once
                rec.controller_action(s.active, "delete_netdev", start, netdev=NETDEV)
                if held:
                    widen.wait_said(CLOSED, WIDEN_16B87037B488_MS / 1000 + OPENED_S)
                gone = wait_gone(agent)
        finally:
            s.journal.undo(s.journal.find([host], regress=made))
        note(rec, "device_gone", gone)
        rec.metric("widen_lines", float(len(widen.said)))
        window(rec, WINDOW, widen.window(None, core_let_go(widen.said)))
    return rec.timeline()


def core_let_go(said: list[str]) -> bool:
    """Whether the widening's lines (``said``) report a held query whose hold ended
    after the core had let go of the netdev (its closing line; "still holds" is a miss)."""
    return any(RELEASED in line for line in said)
