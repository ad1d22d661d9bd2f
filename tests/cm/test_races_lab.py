"""A race sweep on the two siw guests of a real virtual lab (marker ``lab``): destroy vs
CONNECT_REPLY, few rounds (the full sweep is ``hil cm run race_destroy_reply`` with a
wider window and more rounds: docs/cm-engine.md)."""

from __future__ import annotations

import pytest
from cmlab import CMPair

from hil.cm.races import CERTAIN_ORDERS, sweep_destroy_vs_reply
from hil.cm.session import CMSession
from hil.judge.contract import check

pytestmark = pytest.mark.lab


@pytest.fixture
def session(cm_pair: CMPair) -> CMSession:
    return cm_pair.run.session()


def test_destroy_vs_reply_sweep_reaches_its_orders_and_holds_the_contract(
    session: CMSession,
) -> None:
    """The orders the lab's clocks can certify are reached (in_flight needs clocks known
    to better than its window: it is counted, and asked for by the full sweep)."""
    sweep = sweep_destroy_vs_reply(session, rounds=2, wanted=CERTAIN_ORDERS)
    print(sweep.summary() + "\n" + sweep.table())
    verdict = check(sweep.timeline, session.profile)
    assert verdict.ok, verdict.to_text() + "\n" + sweep.table()
    assert len(sweep.rounds) == 18 and all(r.active_id for r in sweep.rounds), sweep.table()
    reached = sweep.not_reached()
    assert reached is None, reached + "\n" + sweep.table()
