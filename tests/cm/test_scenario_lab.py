"""Scenario scripts on the two siw guests of a real virtual lab (marker ``lab``).

Each script goes to a worker whole and comes back as one reply; what the
steps achieved (how late each ran, how far apart the two hosts' steps
were) is read from the host stamps.
"""

from __future__ import annotations

import pytest
from cmlab import CMPair

from hil.cm import steps
from hil.cm.scenario import Script, Step, apart, together, uncertainty
from hil.cm.session import CMSession
from hil.judge.contract import check
from hil.judge.timeline import Timeline

pytestmark = pytest.mark.lab

START_LATE_US = 250_000  # a script's first step after its start time, on a loaded TCG guest


@pytest.fixture
def session(cm_pair: CMPair) -> CMSession:
    return cm_pair.run.session()


def assert_contract(tl: Timeline, session: CMSession) -> None:
    verdict = check(tl, session.profile)
    assert verdict.ok, verdict.to_text() + "\n" + "\n".join(x.brief() for x in tl.merged())


def test_scripts_connect_and_close_on_events_on_both_hosts(session: CMSession) -> None:
    """Active: connect, disconnect on ESTABLISHED, destroy on DISCONNECTED; passive:
    accept on CONNECT_REQUEST, destroy on DISCONNECTED; no controller round trip between."""
    s = session
    with s.recording("scripted-connect") as rec:
        listener = steps.listen(rec, s.passive)
        active = rec.endpoint(s.active)
        dial = {
            "dst": s.address(s.passive),
            "port": listener.port,
            "src": s.address(s.active),
            "private_data": b"hil-script".hex(),
        }
        a = Script(
            (
                Step("connect", name="c", params=dial),
                Step("disconnect", id_of="c", on="ESTABLISHED", on_id_of="c"),
                Step("destroy", id_of="c", on="DISCONNECTED", on_id_of="c"),
            )
        )
        b = Script(
            (
                Step("accept", name="c", on="CONNECT_REQUEST", id_of="event"),
                Step("destroy", id_of="c", on="DISCONNECTED", on_id_of="c"),
            )
        )
        ra, rb = together([(active, a, 0), (listener.ep, b, 0)])
        rec.label("c1", ra.step("c").id, rb.step("c").id)
        steps.destroy(listener.ep, listener.id)
    tl = rec.timeline()
    assert [(x.op, x.result) for x in ra.steps] == [
        ("connect", "ok"),
        ("disconnect", "ok"),
        ("destroy", "ok"),
    ]
    assert [(x.op, x.result) for x in rb.steps] == [("accept", "ok"), ("destroy", "ok")]
    # Every event came back in the scripts' replies, in the order the contract wants.
    assert [e.type for e in ra.events] == [
        "ADDR_RESOLVED",
        "ROUTE_RESOLVED",
        "ESTABLISHED",
        "DISCONNECTED",
    ]
    assert [e.type for e in rb.events] == ["CONNECT_REQUEST", "ESTABLISHED", "DISCONNECTED"]
    # Each reaction ran after its event was stamped, on the same host's clock.
    for run in (ra, rb):
        for x in run.steps:
            if x.event is not None:
                assert x.event.host_t_us <= x.host_t_us, x  # type: ignore[operator]
                assert x.late_us is not None and 0 <= x.late_us < START_LATE_US, x
    assert rb.steps[0].event is not None and rb.steps[0].event.private_bytes.startswith(
        b"hil-script"
    )
    assert_contract(tl, s)


def test_scripts_started_together_disconnect_at_one_time(session: CMSession) -> None:
    """Both sides rdma_disconnect at one controller time, each host's start computed from
    its measured offset; the achieved gap is read back from the host stamps."""
    s = session
    with s.recording("scripted-disconnect-both") as rec:
        listener = steps.listen(rec, s.passive)
        conn = steps.establish(rec, rec.endpoint(s.active), listener, "c1")
        steps.destroy(listener.ep, listener.id)
        ra, rb = together(
            [
                (conn.active, Script((Step("disconnect", cm_id=conn.active_id),)), 0),
                (conn.passive, Script((Step("disconnect", cm_id=conn.passive_id),)), 0),
            ]
        )
        down = steps.wait_disconnected(conn, steps.waits(s).close_s)
        steps.teardown(conn)
    tl = rec.timeline()
    da, db = ra.steps[0], rb.steps[0]
    assert da.ok and db.ok, (da, db)
    # Both started at the common time: a start computed with a wrong offset would be
    # seconds early (late_us huge: the script ran at once) or late (it would time out).
    assert da.late_us is not None and 0 <= da.late_us < START_LATE_US, da
    assert db.late_us is not None and 0 <= db.late_us < START_LATE_US, db
    assert da.target_us == db.target_us  # the same controller time on both hosts
    gap, off = apart(da, db, uncertainty(ra, rb))
    assert gap == db.late_us - da.late_us and off == tl.uncertainty_us(*tl.pair)
    print(f"disconnects {gap} µs apart +/- {off} µs (late: a {da.late_us}, b {db.late_us} µs)")
    assert all(e is not None for e in down.values()), down
    assert_contract(tl, s)
