"""hil.cm.endpointpool: CM endpoints kept across recordings, against the fake agents of
tests/cm/fake_cm.py (each worker's ids and log)."""

from __future__ import annotations

import errno

import pytest
from fake_cm import FakeCMWorld

from hil.cm.endpointpool import EndpointPool
from hil.cm.session import CMSession
from hil.errors import RemoteError
from hil.judge.contract import check
from hil.judge.profiles import SIW


def _session(world: FakeCMWorld, pool: EndpointPool, direction: str = "a-b") -> CMSession:
    return CMSession(world, world.pair, direction=direction, profile=SIW, pool=pool)  # type: ignore[arg-type]


def _workers(world: FakeCMWorld) -> dict[str, list[int]]:
    """Each fake host's live workers and, for each, how many ids it holds."""
    return {h: [len(ep.ids) for ep in a.eps.values()] for h, a in world.agents.items()}


def test_the_recordings_of_a_pool_share_one_worker_a_host_and_leave_no_id() -> None:
    world, pool = FakeCMWorld(), EndpointPool()
    pool.warm(_session(world, pool))
    assert _workers(world) == {"h0": [0], "h1": [0]}  # one idle worker each, warmed
    first = _session(world, pool).run("connect", private_data=b"hi")
    second = _session(world, pool, "b-a").run("connect", private_data=b"hi")
    assert check(first, SIW).ok and check(second, SIW).ok
    assert _workers(world) == {"h0": [0], "h1": [0]}  # the same two, every id destroyed
    # Each timeline holds only its own events: none fetched by a recording before.
    assert {e.conn for e in second.events} == {"c1"} and len(second.events) == len(first.events)
    pool.close()
    assert _workers(world) == {"h0": [], "h1": []}


def test_a_worker_left_with_ids_has_them_destroyed_as_actions_of_its_recording() -> None:
    world, pool = FakeCMWorld(), EndpointPool()
    s = _session(world, pool)
    with s.recording("leaves a listener") as rec:
        rec.endpoint("a").listen(s.address("a"), s.port())
    assert [a.name for a in rec.timeline().actions] == ["listen", "destroy"]
    assert _workers(world) == {"h0": [0], "h1": []}


def test_a_worker_whose_release_fails_is_closed_not_kept() -> None:
    world, pool = FakeCMWorld(), EndpointPool()
    s = _session(world, pool)
    agent = world.agents["h0"]

    def stuck(ep: object, id: int, order: str = "qp_first") -> None:
        raise agent._rdma_error("destroy", errno.EBUSY)

    with pytest.raises(RemoteError, match="destroy a:1.1: EBUSY"):
        with s.recording("stuck") as rec:
            rec.endpoint("a").listen(s.address("a"), s.port())
            agent.op_destroy = stuck  # type: ignore[assignment,method-assign]
    assert _workers(world) == {"h0": [], "h1": []} and pool.take("h0") is None
