"""CM sequences between the two siw guests of a real virtual lab (marker ``lab``).

What the suites run in CI is not repeated here: destroy in CONN_SENT
(suites/test_races.py) and link pulls under traffic (suites/test_link_pull.py).
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time

import pytest
from cmlab import CMPair

from hil.cm import steps
from hil.cm.session import CMSession
from hil.host.evidence import KINDS
from hil.judge.contract import check
from hil.judge.timeline import Timeline

pytestmark = pytest.mark.lab


@pytest.fixture
def session(cm_pair: CMPair) -> CMSession:
    return cm_pair.run.session()


def types(tl: Timeline, side: str) -> list[tuple[str, int]]:
    return [(e.type, e.status) for e in tl.events if e.side == side]


def assert_contract(tl: Timeline, session: CMSession) -> None:
    verdict = check(tl, session.profile)
    assert verdict.ok, verdict.to_text() + "\n" + "\n".join(x.brief() for x in tl.merged())


def test_connect_and_orderly_close(session: CMSession) -> None:
    tl = session.run("connect", private_data=b"hello-lab")
    assert types(tl, "a") == [
        ("ADDR_RESOLVED", 0),
        ("ROUTE_RESOLVED", 0),
        ("ESTABLISHED", 0),
        ("DISCONNECTED", 0),
    ]
    assert types(tl, "b") == [("CONNECT_REQUEST", 0), ("ESTABLISHED", 0), ("DISCONNECTED", 0)]
    request = next(e for e in tl.events if e.type == "CONNECT_REQUEST")
    assert request.private_bytes.startswith(b"hello-lab") and request.listen_id
    # Each event carries its id's 4-tuple: the two sides' mirror each other, and the
    # passive side's own port is the listener's.
    connect = next(a for a in tl.actions if a.name == "connect")
    established = next(e for e in tl.events if e.side == "a" and e.type == "ESTABLISHED")
    assert established.remote == f"{connect.params['dst']}:{connect.params['port']}"
    assert established.local.rsplit(":", 1)[1] not in ("", "0")
    passive = [e for e in tl.events if e.side == "b" and e.type != "DISCONNECTED"]
    assert [(e.local, e.remote) for e in passive] == [(established.remote, established.local)] * 2
    assert {o.host for o in tl.offsets} == set(tl.pair)
    assert all(0 < o.uncertainty_us < 1_000_000 for o in tl.offsets)
    assert tl.metrics["connect_us"] > 0
    # Every type the 6.1 guests' resource summary lists, on both hosts (nldev.c fill_res_info).
    assert all(r.after == r.before for r in tl.resources) and len(tl.resources) == 2 * len(KINDS)
    assert_contract(tl, session)


def test_reject_gives_econnreset_with_private_data(session: CMSession) -> None:
    tl = session.run("reject", private_data=b"go away")
    rejected = [e for e in tl.events if e.type == "REJECTED"]
    assert [(e.side, e.status) for e in rejected] == [("a", -errno.ECONNRESET)]
    assert rejected[0].private_bytes.startswith(b"go away")
    assert not [e for e in tl.events if e.side == "b" and e.type != "CONNECT_REQUEST"]
    assert_contract(tl, session)


def test_no_listener_is_econnrefused_without_event(session: CMSession) -> None:
    tl = session.run("no_listener")
    connect = next(a for a in tl.actions if a.name == "connect")
    assert connect.result == "ECONNREFUSED" and connect.id
    assert [e.type for e in tl.events] == ["ADDR_RESOLVED", "ROUTE_RESOLVED"]
    assert_contract(tl, session)


def test_sigkill_of_the_holder_leaves_no_cm_id(session: CMSession) -> None:
    agent = session.agent(session.active)
    before = agent.rdma_resources(["cm_id"])["cm_id"]
    with session.recording("kill") as rec:
        listener = steps.listen(rec, session.passive)
        conn = steps.establish(rec, rec.endpoint(session.active), listener, "c1")
        assert agent.rdma_resources(["cm_id"])["cm_id"] == before + 1
        pid = conn.active.pid
        conn.active.kill((conn.active_id,))
        assert agent.run(["kill", "-0", str(pid)]).status != 0  # the holder is gone
        deadline = time.monotonic() + 10
        while agent.rdma_resources(["cm_id"])["cm_id"] > before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert agent.rdma_resources(["cm_id"])["cm_id"] == before
        steps.wait_disconnected(conn, 10, ("passive",))
        steps.destroy(conn.passive, conn.passive_id, listener.id)
    tl = rec.timeline()
    assert [a.name for a in tl.actions if a.name == "kill"] == ["kill"]
    assert ("DISCONNECTED", 0) in types(tl, session.passive)
    assert all(r.after == r.before for r in tl.resources)
    assert_contract(tl, session)


@pytest.mark.parametrize("end", ["close", "sigkill"])
def test_cm_workers_die_with_their_agent(cm_pair: CMPair, end: str) -> None:
    """An agent that exits (or is SIGKILLed) takes its CM workers and their ids along."""
    from hil.agent import Agent

    name = cm_pair.pair.host_a.name
    address = cm_pair.pair.rnic_a.address
    assert address is not None  # CMSession refuses a pair without data addresses
    probe = cm_pair.hosts.agent(name)
    before = probe.rdma_resources(["cm_id"])["cm_id"]
    extra = Agent.start(cm_pair.hosts.session(name), cm_pair.hosts.host(name))
    try:
        worker = extra.call("cm_open", timeout=30)
        extra.call(
            "cm_call",
            endpoint=worker["endpoint"],
            op="listen",
            params={"address": str(address.ip), "port": 7999},
        )
        assert probe.rdma_resources(["cm_id"])["cm_id"] == before + 1
        if end == "sigkill":
            probe.run(["kill", "-9", str(extra.hello.pid)], check=True)
        else:
            extra.close()
        deadline = time.monotonic() + 15
        while (
            probe.run(["kill", "-0", str(worker["pid"])]).status == 0
            and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert probe.run(["kill", "-0", str(worker["pid"])]).status != 0, "the worker outlived it"
        while probe.rdma_resources(["cm_id"])["cm_id"] > before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert probe.rdma_resources(["cm_id"])["cm_id"] == before
    finally:
        extra.close()


def test_cli_runs_a_sequence_under_the_lease(cm_pair: CMPair) -> None:
    """``hil cm run reject --lease ... --json``: the timeline and a holding verdict, exit 0."""
    store = ["--store", cm_pair.store] if cm_pair.store else []
    argv = [
        sys.executable,
        "-m",
        "hil",
        "--inventory",
        cm_pair.inventory,
        *store,
        "cm",
        "run",
        "reject",
        "--lease",
        cm_pair.lease,
        "--direction",
        "b-a",
        "-p",
        "private_data=bye",
        "--json",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["verdict"]["ok"] and doc["lease"]["lease"] == cm_pair.lease
    rejected = [e for e in doc["timeline"]["events"] if e["type"] == "REJECTED"]
    assert [(e["side"], e["status"], bytes.fromhex(e["private_data"])[:3]) for e in rejected] == [
        ("b", -104, b"bye")
    ]
