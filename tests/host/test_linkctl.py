"""Link pulls against the netns lab: real sshd, the real agent, real netlink and nftables.

Two namespace hosts ns0 and ns1 are cabled by a veth (data0 198.18.0.1/24 to
data0 198.18.0.2/24); the lab's link ``ns0-ns1`` offers ``admin`` (on ns0)
and ``blackhole`` (on ns1).  A TCP stream from ns0 to ns1 shows that a pull
cuts traffic and that the restore brings it back.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from netnslab.lab import NetnsLab

from hil.errors import InputError
from hil.host.hosts import Hosts
from hil.host.journal import Journal, replay
from hil.host.linkctl import EndState, LinkControl
from hil.inventory.model import Inventory, Pull
from hil.reservation import Claim, Holder, Store, reserve
from tests.netns_stream import Stream

pytestmark = pytest.mark.netns

LINK = "ns0-ns1"
HERE = Path(__file__).parent


@pytest.fixture
def lab(netns_lab: NetnsLab) -> NetnsLab:
    """The session's netns lab (tests/conftest.py); each test leaves it as it found it."""
    return netns_lab


@pytest.fixture
def hosts(netns_hosts: Hosts) -> Hosts:
    return netns_hosts


@pytest.fixture
def ctl(hosts: Hosts, run_journal: Journal) -> LinkControl:
    """A run's link control; its journal's teardown undoes whatever the test left pulled."""
    return LinkControl(hosts, run_journal)


def _end(ctl: LinkControl, host: str) -> EndState:
    state = ctl.state(LINK)
    return state.a if state.a.host == host else state.b


@pytest.mark.parametrize("mode", ["admin", "blackhole"])
def test_a_pull_cuts_a_running_tcp_stream_and_the_restore_brings_it_back(
    lab: NetnsLab, ctl: LinkControl, mode: str
) -> None:
    with Stream(lab, src=0, dst=1, address="198.18.0.2") as stream:
        assert stream.flowing(within=5), "the stream does not flow before the pull"
        ctl.pull(LINK, mode)
        assert ctl.state(LINK).pulled == (mode,)
        assert stream.stalled(), f"bytes still flow during the {mode} pull"
        report = ctl.restore(LINK)
        assert len(report.undone) == 1
        assert stream.flowing(within=20), f"the stream did not resume after the {mode} restore"
    assert ctl.state(LINK).pulled == ()


def test_admin_pull_sets_the_end_down_and_restore_waits_for_carrier(ctl: LinkControl) -> None:
    ctl.pull(LINK, "admin")
    end = _end(ctl, "ns0")
    assert (end.up, end.carrier) == (False, False)
    assert _end(ctl, "ns1").carrier is False  # the peer lost its carrier with it
    ctl.restore(LINK)
    end = _end(ctl, "ns0")
    assert (end.up, end.carrier, end.operstate) == (True, True, "UP")


def test_blackhole_keeps_carrier_and_restore_removes_only_its_table(
    lab: NetnsLab, ctl: LinkControl
) -> None:
    lab.exec(1, ["nft", "add", "table", "inet", "someone_elses"])
    try:
        ctl.pull(LINK, "blackhole")
        end = _end(ctl, "ns1")
        assert (end.blackholed, end.up, end.carrier) == (True, True, True)
        assert lab.exec(0, ["ping", "-c", "1", "-w", "1", "198.18.0.2"], check=False).returncode
        ctl.restore(LINK)
        assert _end(ctl, "ns1").blackholed is False
        ruleset = lab.exec(1, ["nft", "list", "tables"]).stdout
        assert "someone_elses" in ruleset and "hil_blackhole" not in ruleset
        lab.exec(0, ["ping", "-c", "1", "-w", "5", "198.18.0.2"])
    finally:
        lab.exec(1, ["nft", "delete", "table", "inet", "someone_elses"], check=False)


def test_pulling_a_pulled_link_is_an_error_and_restoring_an_unpulled_one_does_nothing(
    ctl: LinkControl,
) -> None:
    assert ctl.restore(LINK).undone == ()
    ctl.pull(LINK, "admin")
    with pytest.raises(InputError, match=r"link ns0-ns1 is already pulled \(admin"):
        ctl.pull(LINK, "blackhole")
    assert ctl.state(LINK).pulled == ("admin",)


def test_unknown_link_and_mode_name_what_exists(ctl: LinkControl) -> None:
    with pytest.raises(InputError, match=r"no link 'nope' \(links: ns0-ns1\)"):
        ctl.pull("nope")
    with pytest.raises(InputError, match=r"offers no 'carrier' pull \(offers: admin, blackhole\)"):
        ctl.pull(LINK, "carrier")
    with pytest.raises(InputError, match="unknown pull mode 'unplug'"):
        ctl.pull(LINK, "unplug")


def _with_command_pull(inv: Inventory) -> Inventory:
    """ns0 acts as the switch controller: its commands take its own data0 down and up."""
    pull = Pull(
        mode="command",
        end=inv.links[LINK].a,
        controller="ns0",
        down=("ip", "link", "set", "dev", "{dev}", "down"),
        up=("ip", "link", "set", "dev", "{dev}", "up"),
        vars=(("dev", "data0"),),
    )
    link = dataclasses.replace(inv.links[LINK], pulls=(pull,))
    return dataclasses.replace(inv, links={LINK: link})


def test_command_pull_runs_the_templates_on_the_controller(lab: NetnsLab, store: Store) -> None:
    with Hosts(_with_command_pull(lab.inventory()), store) as hosts:
        ctl = LinkControl(hosts, Journal(hosts, store, "command-test"))
        try:
            ctl.pull(LINK, "command")
            assert _end(ctl, "ns0").up is False
            assert ctl.restore(LINK).undone == ("ns0: run the up command of link ns0-ns1",)
            assert _end(ctl, "ns0").up is True
        finally:
            ctl.journal.close()


def test_a_run_killed_during_a_pull_is_restored_by_the_next_reservation(
    lab: NetnsLab, hosts: Hosts, store: Store
) -> None:
    store_url = str(store.url)
    argv = [
        sys.executable,
        str(HERE / "pull_and_hang.py"),
        str(lab.inventory_path),
        store_url,
        LINK,
        "blackhole",
        "2",
    ]
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
    pair = hosts.inventory.pair(LINK)
    try:
        assert run.stdout is not None
        line = run.stdout.readline()
        assert line.startswith("pulled "), f"the run did not pull: {line!r}"
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
        ctl = LinkControl(hosts, Journal(hosts, store, "next-run"))
        assert _end(ctl, "ns1").blackholed, "the killed run's pull is not in place"
        claim = Claim(pair.name, (pair.host_a.name, pair.host_b.name))
        lease = reserve(store, [claim], Holder.current("next run"), ttl=30, wait=15, poll=0.2)
        report = replay(hosts, pair)
        store.release(lease.id)
        assert report.undone == ("ns1: remove the blackhole of data0 (link ns0-ns1)",)
        assert _end(ctl, "ns1").blackholed is False
        assert ctl.state(LINK).pulled == ()
        lab.exec(0, ["ping", "-c", "1", "-w", "5", "198.18.0.2"])
    finally:
        run.kill()
        run.wait(timeout=10)
        if run.stdout:
            run.stdout.close()
        replay(hosts, pair)  # the lab is shared: leave it unpulled whatever failed above
