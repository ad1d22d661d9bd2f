"""The timeline model: ordering helpers, lookups and the JSON round trip."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cmtimelines import HOSTS, OFFSETS, link_pull, orderly_close, with_evidence

from hil.errors import InputError
from hil.judge.timeline import Action, Event, Timeline


def test_json_round_trip_is_lossless() -> None:
    tl = with_evidence(orderly_close(), after_cm_id=1, log=("WARNING: x",))
    text = tl.to_json(indent=2)
    assert Timeline.from_json(text) == tl
    assert json.loads(text)["events"][0]["private_data"] == ""


def test_round_trip_keeps_action_params_and_none_ids() -> None:
    tl = link_pull(detect_ms=5000)
    again = Timeline.from_json(tl.to_json())
    pull = next(a for a in again.actions if a.name == "pull")
    assert pull.id is None and pull.params == {
        "mode": "carrier",
        "method": "carrier",
        "traffic": True,
    }


def test_host_stamps_follow_offsets() -> None:
    tl = orderly_close()
    for e in tl.events:
        side = "a" if e.host == HOSTS["a"] else "b"
        assert e.t_us == e.host_t_us + OFFSETS[side]


def test_events_for_follows_delivery_order() -> None:
    tl = orderly_close()
    assert [e.type for e in tl.events_for("a:1")] == [
        "ADDR_RESOLVED",
        "ROUTE_RESOLVED",
        "ESTABLISHED",
        "DISCONNECTED",
    ]
    assert tl.conn_of("b:2") == "c1"
    assert tl.conn_of("nope") is None


def test_merged_interleaves_actions_and_events_in_time() -> None:
    merged = orderly_close().merged()
    times = [x.t_us for x in merged]
    assert times == sorted(times)
    assert any(isinstance(x, Action) for x in merged) and any(isinstance(x, Event) for x in merged)


def test_sorted_orders_by_controller_time() -> None:
    tl = orderly_close()
    shuffled = Timeline(tl.scenario, tl.provider, tl.pair, tl.actions[::-1], tl.events[::-1])
    assert shuffled.sorted().events == tl.events


def test_uncertainty_sums_hosts() -> None:
    tl = orderly_close()
    assert tl.uncertainty_us(*tl.pair) == 600
    assert tl.uncertainty_us("unknown") == 0


@pytest.mark.parametrize(
    "text, why",
    [
        ("[1, 2]", "not an object"),
        ("{", "invalid JSON"),
        ('{"scenario": "x"}', "KeyError"),
        (
            '{"scenario": "x", "provider": "siw", "pair": ["a", "b"], "events": [{"side": "q"}]}',
            "TypeError",
        ),
    ],
)
def test_from_json_bad_input_is_one_clear_input_error(text: str, why: str) -> None:
    with pytest.raises(InputError, match=why) as info:
        Timeline.from_json(text)
    assert "\n" not in str(info.value)


def test_events_keep_their_endpoints_and_old_json_without_them_loads() -> None:
    tl = orderly_close()
    tagged = replace(
        tl,
        events=tuple(
            replace(e, local="198.18.0.1:40001", remote="[fd00::2]:7471") for e in tl.events
        ),
    )
    again = Timeline.from_json(tagged.to_json())
    assert again == tagged and again.events[0].remote == "[fd00::2]:7471"
    old = json.loads(tl.to_json())
    for e in old["events"]:
        del e["local"], e["remote"]
    assert Timeline.from_dict(old) == tl
    assert {(e.local, e.remote) for e in Timeline.from_dict(old).events} == {("", "")}
