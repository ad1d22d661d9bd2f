"""The timeline picture: valid SVG, a lane per host, readable labels, status and uncertainty."""

from __future__ import annotations

import itertools
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from hil.judge.contract import check
from hil.judge.profiles import profile_for
from hil.judge.timeline import Event, Timeline
from hil.report.svg import render_timeline
from hil.report.svgdraw import BAD_COLOR, CHAR_W
from hil.wire.judge import RuleResult, WireVerdict
from hil.wire.rule import Outcome, WireFinding

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
import cmtimelines  # the contract tests' hand-built timelines
import wireexchanges  # hand-built exchanges of those timelines

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def test_a_lane_per_host_with_actions_and_events_labelled() -> None:
    tl = cmtimelines.orderly_close()
    root = parse(render_timeline(tl))
    lanes = [g.get("data-host") for g in root.iter(f"{NS}g") if g.get("class") == "lane"]
    assert lanes == ["lab-a (a)", "lab-b (b)"]
    labels = texts(root)
    for expected in (
        "connect a:1",
        "accept b:2",
        "disconnect a:1",
        "CONNECT_REQUEST b:2",
        "ESTABLISHED a:1",
        "DISCONNECTED b:2",
    ):
        assert expected in labels
    assert any(t.startswith("scenario close · provider siw · pair lab-a") for t in labels)
    # One dot per event, one bar per action, each with a full tooltip.
    assert len(list(root.iter(f"{NS}circle"))) == len(tl.events)
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(bars) == len(tl.actions)


def test_the_offsets_and_their_uncertainty_are_stated() -> None:
    labels = texts(parse(render_timeline(cmtimelines.orderly_close())))
    assert "lab-a: offset +1000.000 ms ± 0.300 ms (shaded bar around its events)" in labels
    assert "order across hosts is only certain beyond ± 0.600 ms" in labels


def test_an_uncertainty_wide_enough_to_see_is_drawn_around_each_event() -> None:
    tl = cmtimelines.orderly_close()
    wide = replace(tl, offsets=tuple(replace(o, uncertainty_us=2000) for o in tl.offsets))
    bars = [
        ln for ln in parse(render_timeline(wide)).iter(f"{NS}line") if ln.get("stroke-width") == "5"
    ]
    assert len(bars) == len(tl.events)


def test_a_violation_is_shown_in_the_header_and_ringed_on_its_event() -> None:
    tl = cmtimelines.qp_err_close("siw", -110, 0)
    # One rule: the status also breaks event-status-in-profile, on the same event.
    verdict = check(tl, profile_for("siw"), rules=["close-status"])
    assert not verdict.ok
    root = parse(render_timeline(tl, verdict))
    assert any("contract FAILED (1 violations)" in t for t in texts(root))
    rings = [c for c in root.iter(f"{NS}circle") if c.get("fill") == "none"]
    assert len(rings) == 1 and rings[0].get("stroke") == BAD_COLOR
    assert "DISCONNECTED(-110) a:1" in texts(root)


def test_failed_actions_are_red_and_say_their_result() -> None:
    tl = cmtimelines.no_listener("siw", "ECONNREFUSED")
    root = parse(render_timeline(tl))
    label = next(t for t in root.iter(f"{NS}text") if "".join(t.itertext()).startswith("connect"))
    assert "".join(label.itertext()) == "connect a:1 → ECONNREFUSED"
    assert label.get("fill") == BAD_COLOR


def test_a_link_pull_is_shaded_until_its_restore() -> None:
    root = parse(render_timeline(cmtimelines.link_pull(12_000)))
    assert "link pulled (carrier)" in texts(root)


def test_crowded_labels_do_not_overlap_and_keep_their_tooltips() -> None:
    tl = cmtimelines.orderly_close()
    storm = tuple(
        Event("lab-a", "a", 50_000 + i * 10, 0, "ESTABLISHED", 0, f"a:{i}", seq=i)
        for i in range(300)
    )
    root = parse(render_timeline(replace(tl, events=storm)))
    placed = [t for t in root.iter(f"{NS}text") if "".join(t.itertext()).startswith("ESTAB")]
    assert 0 < len(placed) < 300  # what does not fit is left to the tooltip
    rows: dict[str, list[tuple[float, float]]] = {}
    for t in placed:
        x, width = float(t.get("x", "0")), len("".join(t.itertext())) * CHAR_W
        left = x - width if t.get("text-anchor") == "end" else x
        rows.setdefault(t.get("y", ""), []).append((left, left + width))
    for spans in rows.values():  # no two labels of a row overlap
        spans.sort()
        assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
    titles = [t.text for t in root.iter(f"{NS}title")]
    assert sum(1 for t in titles if t and "ESTABLISHED" in t) == 300


def test_text_from_the_lab_is_escaped_and_an_empty_timeline_renders() -> None:
    tl = Timeline("<script>&", "siw", ("lab-a", "lab-b"))
    root = parse(render_timeline(tl))
    assert any("<script>&" in t for t in texts(root))


def _wire(root: ET.Element) -> ET.Element:
    (lane,) = [g for g in root.iter(f"{NS}g") if g.get("class") == "wire"]
    return lane


def test_a_placed_exchange_is_a_ladder_between_the_two_lanes() -> None:
    root = parse(render_timeline(wireexchanges.timeline(), None, wireexchanges.closed()))
    order = [g.get("class") for g in root.iter(f"{NS}g") if g.get("class") in ("lane", "wire")]
    assert order == ["lane", "wire", "lane"]
    crossings = [g for g in _wire(root).iter(f"{NS}g") if g.get("class") == "crossing"]
    got = []
    for g in crossings:
        line = g.find(f"{NS}line")
        assert line is not None and g.find(f"{NS}polygon") is not None
        assert float(line.get("x2", "0")) > float(line.get("x1", "0"))  # arrival later
        down = float(line.get("y2", "0")) > float(line.get("y1", "0"))
        got.append((g.get("data-label"), "a→b" if down else "b→a"))
    assert got == [
        ("SYN", "a→b"),
        ("SYN-ACK", "b→a"),
        ("MPA request", "a→b"),
        ("MPA reply", "b→a"),
        ("FIN", "a→b"),
        ("FIN", "b→a"),
    ]
    assert "wire lab-b: packets placed ± 0.250 ms" in texts(root)


def test_an_unplaced_exchange_draws_no_arrow_and_says_why() -> None:
    root = parse(render_timeline(wireexchanges.timeline(), None, wireexchanges.closed(False)))
    assert _wire(root).get("data-crossings") == "0"
    assert not [g for g in root.iter(f"{NS}g") if g.get("class") == "crossing"]
    labels = texts(root)
    assert "wire: 18 packets without a timeline time left out" in labels
    assert "wire lab-a: not placed on the timeline (no clock samples)" in labels


def test_red_packets_a_cited_packet_and_the_wire_verdict_in_the_header() -> None:
    ex = wireexchanges.aborted()
    rst = next(p for c in ex.connections for p in c.packets if "RST" in p.flags)
    finding = WireFinding("RST on an orderly close", ex.connections[0].name, (rst.brief(),))
    wire = WireVerdict(
        "siw", (RuleResult("orderly-close-is-fin", Outcome("fail", "RST", (finding,))),)
    )
    root = parse(render_timeline(wireexchanges.timeline(), None, ex, wire))
    assert any("wire FAILED (1 rules)" in t for t in texts(root))
    by_label = {g.get("data-label"): g for g in root.iter(f"{NS}g") if g.get("class") == "crossing"}
    for red in ("RST", "TERMINATE DDP"):
        assert by_label[red].find(f"{NS}polygon").get("fill") == BAD_COLOR  # type: ignore[union-attr]
    assert len(by_label["RST"].findall(f"{NS}line")) == 2  # the halo of a cited packet
    assert len(by_label["TERMINATE DDP"].findall(f"{NS}line")) == 1
    marks = [p for p in root.iter(f"{NS}path") if p.get("class") == "retransmission"]
    assert len(marks) == 1


def test_without_an_exchange_there_is_no_wire_lane() -> None:
    root = parse(render_timeline(wireexchanges.timeline()))
    assert not [g for g in root.iter(f"{NS}g") if g.get("class") == "wire"]
    assert not any(t.startswith("wire") for t in texts(root))
