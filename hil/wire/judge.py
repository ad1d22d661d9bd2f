"""A test's wire verdict: every wire rule run on its exchange and timelines.

    verdict = judge(exchange, timelines, profile)
    if not verdict.ok:
        print(verdict.to_text())

With no usable capture (``unusable`` gives the reason: no capture point on
the link, the capture failed) every rule is skipped with that reason; a
rule that needs the timeline is ``n/a`` when there is none (``hil wire
judge`` on a bare capture); one that needs the clock is skipped when the
packets could not be placed on the timeline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hil.judge.profiles import Profiles
from hil.judge.timeline import RAW_TCP, SIDES, Action, Timeline
from hil.wire.link import connect_target, link, parse_endpoint
from hil.wire.model import Connection, Exchange, canonical
from hil.wire.rule import Outcome, WireCase, WireRule
from hil.wire.rules import WIRE_RULES


@dataclass(frozen=True)
class RuleResult:
    """One wire rule's outcome on a test."""

    rule: str
    outcome: Outcome


@dataclass(frozen=True)
class WireVerdict:
    """The outcome of all wire rules on one test."""

    profile: str
    results: tuple[RuleResult, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no rule failed (skipped and n/a rules do not fail)."""
        return not self.failed

    @property
    def failed(self) -> tuple[RuleResult, ...]:
        """The rules that failed."""
        return tuple(r for r in self.results if r.outcome.status == "fail")

    def count(self, status: str) -> int:
        """How many rules ended with ``status``."""
        return sum(1 for r in self.results if r.outcome.status == status)

    def to_text(self) -> str:
        """Headline, then each rule's status and reason, and the findings of failed ones."""
        head = (
            f"wire {'PASSED' if self.ok else 'FAILED'}: profile {self.profile}, "
            f"{self.count('pass')} passed, {self.count('fail')} failed, "
            f"{self.count('skip')} skipped, {self.count('n/a')} not applicable"
        )
        lines = [head, *(f"  note: {n}" for n in self.notes)]
        for r in self.results:
            lines.append(f"  [{r.rule}] {r.outcome.status}: {r.outcome.reason}")
            lines += ["      " + f.to_text().replace("\n", "\n      ") for f in r.outcome.findings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (with ``ok``)."""
        return {**asdict(self), "ok": self.ok}

    def to_json(self, indent: int | None = None) -> str:
        """The verdict as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)


def judge(
    exchange: Exchange | None,
    timelines: Sequence[Timeline],
    profile: Profiles,
    *,
    unusable: str | None = None,
    rules: Sequence[WireRule] | None = None,
    timeline_known: bool = True,
) -> WireVerdict:
    """Run the wire rules (default: all registered) on one test.

    ``profile`` is one profile or each host's own: a rule judges what a host
    put on the wire by that host's expectations (:meth:`WireCase.expects`).

    ``timeline_known=False`` says there is no CM timeline at all (a capture
    from elsewhere), as opposed to a test that ran no sequence.
    """
    chosen = list(rules or WIRE_RULES)
    if exchange is None or unusable is not None:
        why = unusable or "no capture"
        return WireVerdict(
            profile.name, tuple(RuleResult(r.name, Outcome("skip", why)) for r in chosen)
        )
    exchange, timelines = _without_raw(exchange, timelines)
    case = WireCase(exchange, tuple(timelines), tuple(link(timelines, exchange)), profile)
    results = tuple(RuleResult(r.name, _run(r, case, timeline_known)) for r in chosen)
    return WireVerdict(profile.name, results, exchange.notes)


def _without_raw(
    exchange: Exchange, timelines: Sequence[Timeline]
) -> tuple[Exchange, Sequence[Timeline]]:
    """The exchange less the connections a test made by hand outside the CM (actions
    ``RAW_TCP``: bytes no iWARP stack sends, on purpose), with a note saying so, and the
    timelines less the CM connects to such a connection's passive end (a stack's connect
    to the reference peer's listener: the connection is the peer's scenario, not judged)."""
    raw = [(tl, a) for tl in timelines for a in tl.actions if a.name == RAW_TCP]
    mine = [c for c in exchange.connections if any(_made_by(c, exchange, *ta) for ta in raw)]
    if not mine:
        return exchange, timelines
    note = f"not judged, made by hand outside the CM ({RAW_TCP}): " + ", ".join(
        c.name for c in mine
    )
    kept = tuple(c for c in exchange.connections if c not in mine)
    targets = {canonical(c.passive) for c in mine}
    left = [
        replace(tl, actions=tuple(a for a in tl.actions if connect_target(a) not in targets))
        for tl in timelines
    ]
    return replace(exchange, connections=kept, notes=(*exchange.notes, note)), left


def _made_by(conn: Connection, exchange: Exchange, tl: Timeline, action: Action) -> bool:
    """Whether ``action`` (a ``RAW_TCP``) made ``conn``: its ends, in whatever form the
    action writes them (``[v6]:port``, ``v6:port``, a scope, uncompressed), are ``conn``'s
    4-tuple, and, when the packets are placed, ``conn`` began while the action ran (give
    or take the clocks' uncertainty): a CM connection that reused the 4-tuple is judged."""
    local = parse_endpoint(str(action.params.get("local", "")))
    remote = parse_endpoint(str(action.params.get("remote", "")))
    if local is None or (local, remote) != (canonical(conn.active), canonical(conn.passive)):
        return False
    began = exchange.began(conn)
    if began is None:
        return True
    slack = began[1] + tl.uncertainty_us(tl.pair[SIDES.index(action.side)])
    return action.t_us - slack <= began[0] <= action.end_us + slack


def _run(rule: WireRule, case: WireCase, timeline_known: bool) -> Outcome:
    if rule.needs_timeline and not timeline_known:
        return Outcome("n/a", "needs the test's CM timeline; a bare capture has none")
    if rule.needs_clock and not case.placed:
        return Outcome("skip", "the packets could not be placed on the timeline (no clock samples)")
    return rule.check(case)


@dataclass(frozen=True)
class WireReport:
    """What the wire judge made of one test, for reports: files, decoded packets, verdict.

    ``pcaps`` maps each capture point to its file; the files live only until
    the report's hook returns (copy what you keep).
    """

    pcaps: dict[str, Path]
    exchange: Exchange | None
    verdict: WireVerdict
    timelines: tuple[Timeline, ...]
