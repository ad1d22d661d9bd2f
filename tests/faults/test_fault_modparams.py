"""Fault campaign: the controller dying in the middle of a module parameter change.

No host of the labs has a parameter hil may pin for real: the virtual lab's siw has none
(hil/inventory/modparams.py), and the netns hosts share this machine's kernel, whose
modules are not the iw_cxgb4 hil knows (and whose parameters a test must not change).  So
this is the unit part, on the recorded T6 pair (tests/data/t6), with the real SQLite
store: the run dies (a BaseException nothing catches, as SIGKILL leaves no teardown)
right after journaling t6a's second parameter, so the first one is written and the second
is journaled but not written; the next run's replay restores both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeHosts, t6_hosts

from hil.host.journal import Journal, replay
from hil.host.modparams import pin_params
from hil.inventory.model import PinnedParam
from hil.reservation import Store

PARAMS = "/sys/module/iw_cxgb4/parameters"
TIMEOUT = PinnedParam("iw_cxgb4", "ep_timeout_secs", "10")
MPA_REV = PinnedParam("iw_cxgb4", "mpa_rev", "1")


class Died(BaseException):
    """The run's process ends here: no except clause or teardown of hil runs after it."""


class DyingJournal(Journal):
    """A journal whose run dies right after recording its ``die_at``-th entry."""

    die_at = 2
    recorded = 0

    def change(self, host: str, undo: dict[str, Any]) -> int:
        entry_id = super().change(host, undo)
        self.recorded += 1
        if self.recorded == self.die_at:
            raise Died(entry_id)
        return entry_id


def _value(hosts: FakeHosts, host: str, name: str) -> str:
    return hosts.recorded(host).file(f"{PARAMS}/{name}").read_text()


def test_a_run_dying_between_journaling_a_parameter_and_writing_it(
    tmp_path: Path, store: Store
) -> None:
    hosts = t6_hosts(tmp_path / "hosts")
    hosts.store = store
    pair = hosts.inventory.pair("t6")
    with pytest.raises(Died):
        pin_params(hosts, pair, [TIMEOUT, MPA_REV], DyingJournal(hosts, store, "dead"))  # type: ignore[arg-type]
    # What the dead run left: t6a's first value written, its second journaled only, and t6b
    # untouched; both of t6a's undos in the journal under the dead lease.
    assert (_value(hosts, "t6a", "ep_timeout_secs"), _value(hosts, "t6a", "mpa_rev")) == (
        "10\n",
        "2\n",
    )
    assert _value(hosts, "t6b", "ep_timeout_secs") == "60\n"
    entries = store.journal_entries("t6a")
    assert [(e.lease_id, e.entry["what"]) for e in entries] == [
        ("dead", "restore module parameter iw_cxgb4.ep_timeout_secs=60"),
        ("dead", "restore module parameter iw_cxgb4.mpa_rev=2"),
    ]
    # The next run's replay writes both old values back (the second was never changed).
    report = replay(hosts, pair)  # type: ignore[arg-type]
    assert report.failed == ()
    assert len(report.undone) == 2
    assert (_value(hosts, "t6a", "ep_timeout_secs"), _value(hosts, "t6a", "mpa_rev")) == (
        "60\n",
        "2\n",
    )
    assert store.journal_entries("t6a") == store.journal_entries("t6b") == []
