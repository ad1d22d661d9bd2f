"""The wire rules on the virtual lab's own packets: unmodified siw passes, broken siw fails.

Each capture in tests/data/wire/ named ``*-siw`` was recorded on a lab guest
(tests/siw_capture.py; README.md there says how) while ``hil cm run`` ran a
sequence; beside it are that run's JSON (its timeline) and the guest's
clock samples, so the packets are placed on the timeline exactly as the
pytest plugin places a live capture.  The ``*-fault-siw`` ones come from
the fault kernels of tests/siw_faults.py (siw closing with RST, siw
accepting without private data): their CM events look right, and only the
wire rules catch them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from hil.judge.profiles import IW_CXGB4, SIW, Profile
from hil.judge.timeline import Timeline, WallSample
from hil.wire.clock import place
from hil.wire.decode import decode
from hil.wire.judge import WireVerdict, judge

DATA = Path(__file__).resolve().parent.parent / "data" / "wire"
# The samples read both clocks in one Python expression on the guest: well within 1 ms.
SAMPLE_SPREAD_US = 1000


def recorded(name: str) -> tuple[Timeline, WireVerdict]:
    """The run's timeline and the wire verdict on its capture (siw profile)."""
    return recorded_as(name, SIW)


def recorded_as(name: str, profile: Profile, folder: Path = DATA) -> tuple[Timeline, WireVerdict]:
    run = json.loads((folder / f"{name}.json").read_text())
    timeline = Timeline.from_dict(run["timeline"])
    clock = json.loads((folder / f"{name}.clock.json").read_text())
    host = clock["host"]
    before, after = (
        WallSample(host, s["wall_ns"] // 1000, s["monotonic_ns"] // 1000, SAMPLE_SPREAD_US)
        for s in clock["samples"]
    )
    exchange = decode({host: folder / f"{name}.pcap"}, timeout=60)
    placed = place({host: (before, after)}, timeline.offsets).apply(exchange)
    return timeline, judge(placed, [timeline], profile)


def statuses(verdict: WireVerdict) -> dict[str, str]:
    return {r.rule: r.outcome.status for r in verdict.results}


def failure(verdict: WireVerdict, rule: str) -> str:
    got = next(r.outcome for r in verdict.results if r.rule == rule)
    assert got.status == "fail", verdict.to_text()
    return "\n".join(f.to_text() for f in got.findings)


@pytest.mark.parametrize(
    ("name", "judged"),
    [
        ("close-siw", "orderly-close-is-fin"),
        ("reject-siw", "reject-on-the-wire"),
        ("no_listener-siw", "no-listener-is-rst"),
        ("abort-qp_err-siw", "abortive-close-on-the-wire"),
        ("abort-destroy-siw", "abortive-close-on-the-wire"),
        ("abort-kill-siw", "abortive-close-on-the-wire"),
    ],
)
def test_unmodified_siw_passes_every_wire_rule(name: str, judged: str) -> None:
    _, verdict = recorded(name)
    got = statuses(verdict)
    assert verdict.ok, verdict.to_text()
    assert got[judged] == "pass", verdict.to_text()
    # The packets were placed on the timeline, so the causes were judged too.
    assert got["every-teardown-event-has-a-cause"] in ("pass", "n/a"), verdict.to_text()


def test_the_placed_packets_come_before_the_events_they_cause() -> None:
    _, verdict = recorded("close-siw")
    assert statuses(verdict)["every-teardown-event-has-a-cause"] == "pass", verdict.to_text()


def test_siw_closing_with_rst_fails_orderly_close_is_fin() -> None:
    timeline, verdict = recorded("close-rst-fault-siw")
    # The CM events are those of an orderly close: DISCONNECTED(0) on both sides.
    disconnected = [e for e in timeline.events if e.type == "DISCONNECTED"]
    assert {(e.side, e.status) for e in disconnected} == {("a", 0), ("b", 0)}
    found = failure(verdict, "orderly-close-is-fin")
    assert "1 RST" in found and "FIN from no side" in found


def test_siw_accepting_without_private_data_fails_mpa_reply_carries_accept_pdata() -> None:
    _, verdict = recorded("connect-no-accept-pdata-fault-siw")
    found = failure(verdict, "mpa-reply-carries-accept-pdata")
    assert "MPA reply carries 0 bytes of private data ''" in found


def test_siw_abort_is_fin_only_which_an_offloading_profile_refuses() -> None:
    # siw's emergency close is a FIN-only close; under iw_cxgb4's expectations (RST and/or
    # TERMINATE) the same packets break the rule, naming the FINs.
    strict = replace(SIW, wire=IW_CXGB4.wire)
    _, verdict = recorded_as("abort-qp_err-siw", strict)
    found = failure(verdict, "abortive-close-on-the-wire")
    assert "the wire shows FIN" in found and "never a FIN-only close" in found


@pytest.mark.parametrize("how", ["bad_rkey", "past_end"])
def test_siw_refusing_a_write_sends_the_terminate_of_its_cause(how: str) -> None:
    _, verdict = recorded(f"remote-access-{how.replace('_', '-')}-siw")
    assert statuses(verdict)["remote-access-error-terminates"] == "pass", verdict.to_text()
    assert verdict.ok, verdict.to_text()


def test_a_terminate_of_another_cause_fails_remote_access_error_terminates(
    tmp_path: Path,
) -> None:
    # The wrong-rkey run's packets (TERMINATE: invalid STag), held against a timeline whose
    # WRITE went past the end of the region, where base-or-bounds is the right code.
    run = json.loads((DATA / "remote-access-bad-rkey-siw.json").read_text())
    for action in run["timeline"]["actions"]:
        if action["name"] == "write":
            action["params"]["how"] = "past_end"
    name = "claimed-past-end"
    (tmp_path / f"{name}.json").write_text(json.dumps(run))
    for suffix in (".pcap", ".clock.json"):
        (tmp_path / f"{name}{suffix}").write_bytes(
            (DATA / f"remote-access-bad-rkey-siw{suffix}").read_bytes()
        )
    _, verdict = recorded_as(name, SIW, folder=tmp_path)
    found = failure(verdict, "remote-access-error-terminates")
    assert "code in [1]" in found and "TERMINATE DDP type 1 code 0x0" in found
