"""What suites and the CM engine call to put evidence into the Allure report.

Every helper is safe to call anywhere: outside an Allure run (no
``--alluredir``, or allure-pytest not installed) it records nothing and
returns.  Metrics are kept in any case so that the plugin can write them out.

    with step("connect", side="a", port=4791):      # an Allure step with parameters
        ...
    attach_timeline(timeline, verdict)               # SVG picture + raw JSON (+ its metrics)
    attach_verdict(verdict)
    attach_wire_timeline(timeline, exchange, wire)   # the picture with the wire lane
    attach_wire_verdict(wire)
    attach_exchange(exchange)                        # ladder and packets (text) + JSON
    attach_kernel_log(lines)
    attach_resources(before, after)                  # {host: {kind: count}} each
    attach_resource_counts(counts)                   # or as ResourceCounts (evidence, timeline)
    attach_pcap(path)
    attach_hw_evidence(hw)                           # ethtool -S changes, debugfs before/after
    attach_peer_run(run)                             # the reference peer's verdict and record
    metric("connect_latency", 3.2, "ms")
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hil.host.hwevidence import HwEvidence
from hil.judge.contract import Verdict
from hil.judge.timeline import KernelLogLine, ResourceCount, Timeline
from hil.peer.run import PeerRun
from hil.report.metrics import RECORDER, Metric
from hil.report.svg import render_timeline
from hil.wire.judge import WireVerdict
from hil.wire.model import Exchange
from hil.wire.render import exchange_text, ladder_text

try:
    import allure
    from allure_commons.utils import represent
except ImportError:  # the helpers stay callable (as no-ops) without allure-pytest
    allure = None  # type: ignore[assignment]


@contextmanager
def step(name: str, **params: Any) -> Iterator[None]:
    """An Allure step named ``name`` showing ``params``; a plain block without allure."""
    if allure is None:
        yield
        return
    ctx = allure.step(name)
    ctx.params = {k: represent(v) for k, v in params.items()}  # type: ignore[no-untyped-call]
    with ctx:
        yield


def metric(name: str, value: float, unit: str, **labels: str) -> Metric:
    """Record a measurement of the current test (:mod:`hil.report.metrics`); shown as a
    step and kept for the trends."""
    m = RECORDER.record(name, value, unit, **labels)
    if allure is not None:
        with step(f"metric {m.series} = {value:g} {unit}", value=value, unit=unit, **labels):
            pass
    return m


def unit_of(name: str) -> str:
    """The unit a timeline metric's name implies (``connect_us``: µs, per the CM engine)."""
    for suffix, unit in (("_per_s", "1/s"), ("_us", "us"), ("_ms", "ms"), ("_s", "s")):
        if name.endswith(suffix):
            return unit
    return ""


def attach_timeline(timeline: Timeline, verdict: Verdict | None = None) -> None:
    """The timeline as a picture (SVG) and as raw JSON; records its metrics (labelled
    with the scenario: ``detection_us`` of a link pull is not that of an abort)."""
    for name, value in timeline.metrics.items():
        metric(name, value, unit_of(name), scenario=timeline.scenario)
    if allure is None:
        return
    allure.attach(
        render_timeline(timeline, verdict),
        name=f"timeline {timeline.scenario}",
        attachment_type=allure.attachment_type.SVG,
    )
    allure.attach(
        timeline.to_json(indent=1),
        name=f"timeline {timeline.scenario} (json)",
        attachment_type=allure.attachment_type.JSON,
    )


def attach_verdict(verdict: Verdict) -> None:
    """The contract verdict as text (the rules and each violation's evidence) and JSON."""
    if allure is None:
        return
    word = "passed" if verdict.ok else "FAILED"
    allure.attach(
        verdict.to_text(),
        name=f"contract verdict: {word}",
        attachment_type=allure.attachment_type.TEXT,
    )
    allure.attach(
        verdict.to_json(indent=1),
        name="contract verdict (json)",
        attachment_type=allure.attachment_type.JSON,
    )


def attach_wire_timeline(
    timeline: Timeline, exchange: Exchange, wire: WireVerdict, verdict: Verdict | None = None
) -> None:
    """The timeline picture with the wire lane (the packets that matter as a ladder)."""
    if allure is None:
        return
    allure.attach(
        render_timeline(timeline, verdict, exchange, wire),
        name=f"timeline {timeline.scenario} with the wire",
        attachment_type=allure.attachment_type.SVG,
    )


def attach_wire_verdict(wire: WireVerdict) -> None:
    """The wire verdict as text (each rule's outcome, findings with their packets) and JSON."""
    if allure is None:
        return
    word = "passed" if wire.ok else "FAILED"
    allure.attach(
        wire.to_text(), name=f"wire verdict: {word}", attachment_type=allure.attachment_type.TEXT
    )
    allure.attach(
        wire.to_json(indent=1),
        name="wire verdict (json)",
        attachment_type=allure.attachment_type.JSON,
    )


def attach_exchange(exchange: Exchange) -> None:
    """The decoded capture: its ladder and every packet per capture point (text), and JSON."""
    if allure is None:
        return
    allure.attach(
        f"{ladder_text(exchange)}\n{exchange_text(exchange)}",
        name="wire exchange",
        attachment_type=allure.attachment_type.TEXT,
    )
    allure.attach(
        json.dumps(exchange.to_json(), indent=1),
        name="wire exchange (json)",
        attachment_type=allure.attachment_type.JSON,
    )


def attach_kernel_log(lines: Iterable[str | KernelLogLine], name: str = "kernel log") -> None:
    """Kernel log lines printed while the test ran (``host: line`` for KernelLogLine)."""
    if allure is None:
        return
    text = "\n".join(
        f"{x.host}: {x.line}" if isinstance(x, KernelLogLine) else str(x) for x in lines
    )
    allure.attach(
        text or "(nothing logged)", name=name, attachment_type=allure.attachment_type.TEXT
    )


def resources_table(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> str:
    """``rdma resource`` counts per host and kind, before and after, as aligned text."""
    rows = [("host", "kind", "before", "after", "")]
    for host in sorted(set(before) | set(after)):
        kinds = sorted(set(before.get(host, {})) | set(after.get(host, {})))
        for kind in kinds:
            b, a = before.get(host, {}).get(kind), after.get(host, {}).get(kind)
            rows.append((host, kind, str(b), str(a), "" if a == b else "<- changed"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def attach_resources(
    before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]]
) -> None:
    """``rdma resource`` counts ({host: {kind: count}}) before and after the test."""
    if allure is None:
        return
    allure.attach(
        resources_table(before, after),
        name="rdma resource before/after",
        attachment_type=allure.attachment_type.TEXT,
    )


def attach_resource_counts(counts: Iterable[ResourceCount]) -> None:
    """:func:`attach_resources` of counts as the evidence and timelines hold them."""
    before: dict[str, dict[str, int]] = {}
    after: dict[str, dict[str, int]] = {}
    for r in counts:
        before.setdefault(r.host, {})[r.kind] = r.before
        after.setdefault(r.host, {})[r.kind] = r.after
    attach_resources(before, after)


def attach_pcap(path: Path | str, name: str | None = None) -> None:
    """A packet capture file (opens in Wireshark from the report)."""
    if allure is None:
        return
    allure.attach.file(
        str(path),
        name=name or Path(path).name,  # type: ignore[no-untyped-call]
        attachment_type=allure.attachment_type.PCAP,
    )


def attach_hw_evidence(hw: HwEvidence) -> None:
    """Each host's ``ethtool -S`` counters that changed and its driver's debugfs files
    before/after (or why they are absent), as text and JSON."""
    if allure is None:
        return
    allure.attach(
        hw.to_text(),
        name="hardware evidence (ethtool -S, debugfs)",
        attachment_type=allure.attachment_type.TEXT,
    )
    allure.attach(
        json.dumps(hw.to_json(), indent=1),
        name="hardware evidence (json)",
        attachment_type=allure.attachment_type.JSON,
    )


def label(name: str, value: str) -> None:
    """A label of the running test known only once it runs (the provider setup found)."""
    if allure is None:
        return
    allure.dynamic.label(name, value)  # type: ignore[no-untyped-call]


def link(url: str, name: str) -> None:
    """A link of the running test known only once it runs (where a finding is filed)."""
    if allure is None:
        return
    allure.dynamic.link(url, name=name)  # type: ignore[no-untyped-call]


def attach_peer_run(run: PeerRun) -> None:
    """A peer scenario's run: its verdict (text) and the peer's frame record with the
    run's ends (JSON: ``t_ns`` on the peer host's clock); the DUT's timeline is the
    report observer's, as every recording's."""
    if allure is None:
        return
    result = run.result
    record = {
        "scenario": run.scenario.name,
        "dut": run.dut,
        "peer": run.peer,
        "local": result.local,
        "remote": result.remote,
        "unmet": result.unmet,
        "error": result.error,
        "record": result.record,
    }
    allure.attach(
        run.verdict.to_text(), name="peer verdict", attachment_type=allure.attachment_type.TEXT
    )
    allure.attach(
        json.dumps(record, indent=1, default=str),
        name="peer record",
        attachment_type=allure.attachment_type.JSON,
    )


def note(title: str, text: str) -> None:
    """A short text attachment, e.g. why a capture is missing."""
    if allure is None:
        return
    allure.attach(text, name=title, attachment_type=allure.attachment_type.TEXT)


def attach_metrics(test: str) -> None:
    """The metrics recorded by ``test`` as one JSON attachment (the plugin calls this)."""
    found = RECORDER.of_test(test)
    if allure is None or not found:
        return
    allure.attach(
        json.dumps([m.to_json() for m in found], indent=1),
        name="metrics",
        attachment_type=allure.attachment_type.JSON,
    )
