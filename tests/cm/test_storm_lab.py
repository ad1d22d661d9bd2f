"""A storm run by the hosts' workers between the two siw guests of a virtual lab (``lab``).

About 10 s: it replaces the controller-paced storm of test_sequences_lab.py.
The backlog case runs in suites/test_storm.py; the full-size comparison with
cmtime is bench/cm_rate.py (docs/storm.md).
"""

from __future__ import annotations

import pytest
from cmlab import CMPair

from hil.cm.session import CMSession
from hil.cm.storm import run_storm
from hil.judge.contract import check
from hil.judge.timeline import Timeline

pytestmark = pytest.mark.lab


@pytest.fixture
def session(cm_pair: CMPair) -> CMSession:
    return cm_pair.run.session()


def assert_contract(tl: Timeline, session: CMSession) -> None:
    verdict = check(tl, session.profile)
    assert verdict.ok, verdict.to_text() + "\n" + "\n".join(x.brief() for x in tl.merged())


def test_a_storm_from_two_processes_closes_every_connection_on_both_sides(
    session: CMSession,
) -> None:
    """12 connections from 2 processes to 2 listeners, 2 SENDs each: every one established,
    each side's id DISCONNECTED exactly once, every step timed for all of them."""
    tl, result = run_storm(session, count=12, processes=2, listeners=2, parallel=3, traffic=2)
    assert not result.failed, result.table()
    assert (result.established, result.closed_active, result.closed_passive) == (12, 12, 12), (
        result.table()
    )
    for step in ("create_id", "resolve_addr", "resolve_route", "create_qp", "connect"):
        assert result.step(step) is not None and result.step(step).n == 12, step  # type: ignore[union-attr]
    for step in ("traffic", "disconnect", "destroy"):
        assert result.step(step) is not None and result.step(step).n == 12, step  # type: ignore[union-attr]
    for step in ("accept", "established", "destroy"):
        assert result.step(step, passive=True) is not None, step
    # Both sides' ids of each connection are tied by its private data, and each side
    # saw its own DISCONNECTED once: the passive side's close is checked too.
    conns = {e.conn for e in tl.events if e.conn}
    assert len(conns) == 12
    for conn in conns:
        events = tl.events_of_conn(conn)
        for side in ("a", "b"):
            assert [e.type for e in events if e.side == side].count("DISCONNECTED") == 1, conn
            assert any(e.type == "ESTABLISHED" and e.side == side for e in events), conn
    assert result.rate_per_s > 0 and result.cycle_rate_per_s > 0
    assert all(r.after == r.before for r in tl.resources)
    assert_contract(tl, session)
