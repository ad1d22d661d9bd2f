"""``request-reaches-its-listener``: a CONNECT_REQUEST through a listener bound to another
address or port, or through the wildcard beside the exact one, fails; its own passes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cmtimelines import Builder
from contractcheck import breaks, violations

from hil.judge.profiles import SIW
from hil.judge.timeline import Timeline

RULE = "request-reaches-its-listener"
DATA, EXTRA, ANY = "198.18.0.2", "198.18.0.254", "0.0.0.0"


def listeners(*bound: tuple[str, str, int]) -> Builder:
    """Listeners on side b, each (id, address, port), from 0 ms."""
    b = Builder("listeners-by-address")
    for i, (cm_id, address, port) in enumerate(bound):
        b.act("b", "listen", cm_id, i * 0.1, address=address, port=port, backlog=16)
    return b


def request(b: Builder, dst: str, port: int, arrived_on: str, conn: str = "c1") -> Timeline:
    """A connect from a to ``dst:port`` at 1 ms; its CONNECT_REQUEST through ``arrived_on``."""
    b.act("a", "connect", f"a:{conn}", 1, dst=dst, port=port, listener=True)
    b.ev("a", "ROUTE_RESOLVED", f"a:{conn}", 0.8, conn=conn)
    b.ev("b", "CONNECT_REQUEST", f"b:{conn}", 3, conn=conn, listen_id=arrived_on)
    return b.build()


TWO = (("b:1", DATA, 7000), ("b:5", EXTRA, 7000))


@pytest.mark.parametrize(("dst", "own"), [(DATA, "b:1"), (EXTRA, "b:5")])
def test_each_of_two_listeners_on_one_port_takes_its_own_address(dst: str, own: str) -> None:
    assert violations(request(listeners(*TWO), dst, 7000, own), SIW, RULE) == ()


def test_a_request_through_the_other_addresss_listener_breaks_it() -> None:
    breaks(
        request(listeners(*TWO), EXTRA, 7000, "b:1"),
        SIW,
        RULE,
        f"a request for {EXTRA}:7000 arrived through listener b:1 bound to {DATA}:7000",
    )


def test_a_request_through_a_listener_of_another_port_breaks_it() -> None:
    b = listeners(("b:1", ANY, 7000), ("b:5", ANY, 7001))
    breaks(request(b, DATA, 7001, "b:1"), SIW, RULE, "bound to 0.0.0.0:7000")


def test_the_wildcard_takes_a_request_for_any_address_of_its_port() -> None:
    b = listeners(("b:1", ANY, 7000), ("b:5", DATA, 7001))
    assert violations(request(b, DATA, 7000, "b:1"), SIW, RULE) == ()


def test_the_wildcard_beside_a_listening_exact_listener_breaks_it() -> None:
    """A stack that allowed both on one port must give the request to the exact one."""
    breaks(
        request(listeners(("b:1", ANY, 7000), ("b:5", DATA, 7000)), DATA, 7000, "b:1"),
        SIW,
        RULE,
        "arrived through the wildcard listener b:1, though b:5 listened on exactly that address",
    )


def test_the_wildcard_may_take_it_once_the_exact_listener_is_destroyed() -> None:
    b = listeners(("b:1", ANY, 7000), ("b:5", DATA, 7000))
    b.act("b", "destroy", "b:5", 0.5)
    assert violations(request(b, DATA, 7000, "b:1"), SIW, RULE) == ()


def test_without_the_connect_the_requests_own_local_address_is_its_target() -> None:
    b = listeners(*TWO)
    b.ev("b", "CONNECT_REQUEST", "b:9", 3, conn=None, listen_id="b:1")
    tl = b.build()
    tl = replace(tl, events=tuple(replace(e, local=f"{EXTRA}:7000") for e in tl.events))
    breaks(tl, SIW, RULE, f"a request for {EXTRA}:7000 arrived through listener b:1")


def test_a_listen_recorded_without_its_address_is_judged_by_its_port() -> None:
    b = Builder("old")
    b.act("b", "listen", "b:1", 0, port=7000, backlog=16)
    assert violations(request(b, EXTRA, 7000, "b:1"), SIW, RULE) == ()
