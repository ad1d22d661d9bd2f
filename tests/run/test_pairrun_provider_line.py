"""Once a pair is set up, the run says what each host really runs, in its progress
output (the pytest session's ``hil:`` lines, ``hil cm run`` and ``hil host setup`` on
stderr) and in the log.  The wording of a fallback and of a mixed pair is
tests/run/test_provider.py's; the real session output with a siw fallback is checked
on the virtual lab (tests/run/test_pairrun_lab.py)."""

from __future__ import annotations

import logging

import pytest
from fake_hosts import FakeHosts, t6_inventory

from hil.reservation import Store
from hil.run import PairRequest, PairRun


def test_the_recorded_t6_pair_is_said_to_run_iw_cxgb4(
    store: Store, fakes: dict[str, FakeHosts], caplog: pytest.LogCaptureFixture
) -> None:
    said: list[str] = []
    with caplog.at_level(logging.INFO, logger="hil.run.pairrun"):
        with PairRun(t6_inventory(), store, PairRequest(pair="t6"), progress=said.append):
            pass
    line = "pair t6 runs iw_cxgb4 on both hosts; judged by profile iw_cxgb4"
    assert line in said
    assert [(r.levelno, r.getMessage()) for r in caplog.records if "judged by" in r.message] == [
        (logging.INFO, line)
    ]
