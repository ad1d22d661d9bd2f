"""Requirements that select pairs: ``driver=iw_cxgb4``, ``speed>=25000``, ``tag=t6``.

A requirement is ``KEY OP VALUE``.  Port properties (driver, rdma_device,
speed, mtu, firmware, fallback) must hold on both ends of a pair; ``host``
matches when either host has the name; ``tag`` when the link has the tag or
both hosts have it; ``pull`` when the link offers that pull mode; ``pair``
(alias ``link``) compares the pair's name.  ``!=`` is the negation of ``=``
for pair, host, tag and pull, and holds per end for port properties.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hil.errors import RequirementError
from hil.inventory.model import PULL_MODES, Inventory, Pair, Rnic

PORT_KEYS = ("driver", "rdma_device", "speed", "mtu", "firmware", "fallback")
PAIR_KEYS = ("pair", "host", "tag", "pull")
REQUIREMENT_KEYS = PAIR_KEYS + PORT_KEYS
NUMERIC_KEYS = ("speed", "mtu")
OPERATORS = ("=", "!=", ">=", "<=", ">", "<")
_ALIASES = {"link": "pair"}
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_SYNTAX = re.compile(r"\s*([A-Za-z_]+)\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*")
_HELP = f"keys: {', '.join(REQUIREMENT_KEYS)}, link; operators: {' '.join(OPERATORS)}"


@dataclass(frozen=True)
class Requirement:
    """One parsed ``KEY OP VALUE``; ``matches(pair)`` tells whether a pair meets it."""

    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"

    def matches(self, pair: Pair) -> bool:
        """Whether ``pair`` meets this requirement."""
        if self.key in PORT_KEYS:
            return self._holds(pair.rnic_a) and self._holds(pair.rnic_b)
        link = pair.link
        if self.key == "pair":
            hit = link.name == self.value
        elif self.key == "host":
            hit = self.value in (pair.host_a.name, pair.host_b.name)
        elif self.key == "tag":
            hit = self.value in link.tags or all(self.value in h.tags for h in pair.hosts)
        else:  # pull
            hit = any(p.mode == self.value for p in link.pulls)
        return hit if self.op == "=" else not hit

    def _holds(self, rnic: Rnic) -> bool:
        actual = getattr(rnic, self.key)
        if self.key in NUMERIC_KEYS:
            # An unknown speed or mtu cannot be shown to meet any bound.
            return actual is not None and _COMPARE[self.op](int(actual), int(self.value))
        return bool(actual == self.value) == (self.op == "=")


def parse_requirement(text: str) -> Requirement:
    """Parse ``KEY OP VALUE``; ``RequirementError`` names the keys and operators."""
    m = _SYNTAX.fullmatch(text)
    if not m:
        raise RequirementError(f"bad requirement {text!r}: write KEY OP VALUE ({_HELP})")
    key, op, value = m.groups()
    key = _ALIASES.get(key, key)
    if key not in REQUIREMENT_KEYS:
        raise RequirementError(f"bad requirement {text!r}: unknown key {key!r} ({_HELP})")
    if not value:
        raise RequirementError(f"bad requirement {text!r}: no value after {op!r}")
    if key in NUMERIC_KEYS:
        if not re.fullmatch(r"[0-9]+", value):
            raise RequirementError(f"bad requirement {text!r}: {value!r} is not a whole number")
    elif op not in ("=", "!="):
        raise RequirementError(
            f"bad requirement {text!r}: {op!r} compares numbers "
            f"({', '.join(NUMERIC_KEYS)}); use = or != for {key}"
        )
    if key == "pull" and value not in PULL_MODES:
        raise RequirementError(
            f"bad requirement {text!r}: no pull mode {value!r} (modes: {', '.join(PULL_MODES)})"
        )
    return Requirement(key, op, value)


def parse_requirements(texts: Iterable[str]) -> tuple[Requirement, ...]:
    """Parse several requirements (all must hold)."""
    return tuple(parse_requirement(t) for t in texts)


def select(inventory: Inventory, requirements: Iterable[Requirement | str]) -> list[Pair]:
    """The inventory's pairs, in file order, that meet every requirement."""
    reqs = [r if isinstance(r, Requirement) else parse_requirement(r) for r in requirements]
    return [p for p in inventory.pairs() if all(r.matches(p) for r in reqs)]
