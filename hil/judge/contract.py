"""The iWARP CM contract as named rules, checked against a :class:`Timeline`.

Each :class:`Rule` has a name, the invariant it restates (docs/contract.md),
a one-line statement and its source.  A rule reads statuses and time bounds
from a :class:`~hil.judge.profiles.Profile`, never the driver's name; a pair
whose hosts differ is judged by each host's own
(:class:`~hil.judge.profiles.PairProfile`: an event by the profile of the
host that reported it, a bound on an action by the profile of the host that
acted).  A rule that finds nothing to judge in a timeline (no reject, no
link pull) passes.

    verdict = check(timeline, profile_for("siw"))
    if not verdict.ok:
        print(verdict.to_text())
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hil.errors import InputError
from hil.judge import (
    access,
    closedata,
    eventfacts,
    expectations,
    flush,
    invariants,
    irdord,
    listeners,
    payload,
    pullproof,
    staysup,
)
from hil.judge.profiles import Profiles
from hil.judge.rule import Rule
from hil.judge.timeline import Action, Event, Timeline
from hil.registry import Registry


@dataclass(frozen=True)
class Violation:
    """A broken rule: which one, under which profile (the pair's), and the events that broke it."""

    rule: str
    profile: str
    message: str
    events: tuple[Event, ...] = ()
    actions: tuple[Action, ...] = ()
    invariant: int | None = None

    def to_text(self) -> str:
        """The violation and its evidence, one item a line."""
        inv = f"invariant {self.invariant}, " if self.invariant is not None else ""
        lines = [f"[{self.rule}] ({inv}profile {self.profile}) {self.message}"]
        lines += [f"    action {a.brief()}" for a in self.actions]
        lines += [f"    event  {e.brief()}" for e in self.events]
        return "\n".join(lines)


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one timeline: the rules run and what broke."""

    scenario: str
    profile: str
    rules: tuple[str, ...]
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        """True when no rule was broken."""
        return not self.violations

    def to_text(self) -> str:
        """A human-readable report."""
        head = (
            f"contract {'PASSED' if self.ok else 'FAILED'}: scenario {self.scenario}, "
            f"profile {self.profile}, {len(self.rules)} rules, "
            f"{len(self.violations)} violations"
        )
        return "\n".join([head, *(v.to_text() for v in self.violations)])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (with ``ok``)."""
        return {**asdict(self), "ok": self.ok}

    def to_json(self, indent: int | None = None) -> str:
        """The verdict as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)


# Every rule, in the order a verdict lists them: the built-in ones, then those
# registered with register_rule.
RULES = Registry[Rule](
    "contract rule",
    name_of=lambda r: r.name,
    items=(
        *invariants.RULES,
        *expectations.RULES,
        *access.RULES,
        *staysup.RULES,
        *pullproof.RULES,
        *eventfacts.RULES,
        *payload.RULES,
        *flush.RULES,
        *closedata.RULES,
        *listeners.RULES,
        *irdord.RULES,
    ),
)


def register_rule(rule: Rule) -> Rule:
    """Add ``rule`` to those every verdict runs (a lab's own rule); returns it.

    A name already taken is an InputError: replace a rule for one check with
    :func:`rules_with` instead.
    """
    return RULES.register(rule)


def rule_named(name: str) -> Rule:
    """The registered rule of this name."""
    return RULES[name]


def rules_with(*replacements: Rule) -> tuple[Rule, ...]:
    """All rules, with those of the same name swapped for ``replacements``.

    E.g. ``rules_with(kernel_log_clean(allow=(*DEFAULT_KERNEL_ALLOW, "my line")))``.
    """
    by_name = {r.name: r for r in replacements}
    unknown = set(by_name) - set(RULES.names())
    if unknown:
        raise InputError(f"no contract rule {', '.join(sorted(unknown))} to replace")
    return tuple(by_name.get(r.name, r) for r in RULES)


def check(
    timeline: Timeline, profile: Profiles, rules: Sequence[Rule | str] | None = None
) -> Verdict:
    """Check a timeline against rules (default: all) under a provider profile.

    ``profile`` is one profile, or each host's own (a
    :class:`~hil.judge.profiles.PairProfile`); the verdict names it
    (``siw+iw_cxgb4`` for a mixed pair).
    """
    chosen = [rule_named(r) if isinstance(r, str) else r for r in (rules or list(RULES))]
    violations = [
        Violation(rule.name, profile.name, f.message, f.events, f.actions, rule.invariant)
        for rule in chosen
        for f in rule.check(timeline, profile)
    ]
    return Verdict(
        timeline.scenario, profile.name, tuple(r.name for r in chosen), tuple(violations)
    )
