"""Reading composed YAML nodes with their location, for located errors.

``yaml.compose`` keeps every node's line, so each value the loader reads is
an ``At``: the node, its file, its line and its dotted YAML path
(``hosts.t6-a.rnics[0].address``).  Every reader here either returns a plain
Python value or raises ``InventoryError`` at that place.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hil.errors import InventoryError

# Names of hosts, ports, links and tags: they appear in HOST:PORT and in
# reservation keys, so no ':' and no spaces.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
NAME_CHARS = "(letters, digits, '_', '.', '-'; starting with a letter or digit)"
NAME_WHAT = f"a valid name {NAME_CHARS}"
# A Linux interface name (IFNAMSIZ), never taken for an option.
NETDEV = re.compile(r"(?!\.\.?$)(?!-)[^\s/:]{1,15}")
NETDEV_WHAT = "a network interface name"

_TAG = "tag:yaml.org,2002:"
_MERGE = _TAG + "merge"
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# Scalars whose YAML text we take as a string as written ("1.20" stays "1.20").
_TEXTUAL = {_TAG + "str", _TAG + "int", _TAG + "float"}
_KIND = {
    _TAG + "str": "a string",
    _TAG + "int": "an integer",
    _TAG + "float": "a number",
    _TAG + "bool": "a boolean",
    _TAG + "null": "null",
    _TAG + "timestamp": "a date",
    _TAG + "binary": "binary data",
}


@dataclass(frozen=True)
class At:
    """A YAML node and where it is: ``file:line`` and its dotted path."""

    file: str
    line: int
    path: str
    node: yaml.Node

    def error(self, message: str) -> InventoryError:
        """An ``InventoryError`` located here (the caller raises it)."""
        return InventoryError(self.file, self.line, self.path, message)

    def key(self, name: str, node: yaml.Node, line: int) -> At:
        """The child under mapping key ``name``, located at the key's line."""
        part = name if _PLAIN_KEY.match(name) else f"[{name!r}]"
        sep = "." if self.path and not part.startswith("[") else ""
        return At(self.file, line, f"{self.path}{sep}{part}", node)

    def item(self, index: int, node: yaml.Node) -> At:
        """The child at sequence position ``index``."""
        return At(self.file, line_of(node), f"{self.path}[{index}]", node)

    @property
    def is_null(self) -> bool:
        """True for an explicit ``null`` / ``~`` / empty value."""
        return isinstance(self.node, yaml.ScalarNode) and self.node.tag == _TAG + "null"


def line_of(node: yaml.Node) -> int:
    """The 1-based line a node starts on."""
    return int(node.start_mark.line) + 1


def describe(node: yaml.Node) -> str:
    """What a node is, for "expected X, got Y" messages."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag == _TAG + "null":
        return "null"
    return f"{_KIND.get(node.tag, 'a value')} {node.value!r}"


def entries(at: At) -> dict[str, At]:
    """A mapping's entries in file order, keyed by their (string) keys.

    Duplicate keys are errors (naming the first one's line).  YAML merge
    keys (``<<: *anchor``) are honoured: explicit keys win over merged ones.
    """
    return _entries(at, ())


def _entries(at: At, merging: tuple[yaml.Node, ...]) -> dict[str, At]:
    """``entries``; ``merging`` holds the mappings whose ``<<`` led here."""
    if not isinstance(at.node, yaml.MappingNode):
        raise at.error(f"expected a mapping, got {describe(at.node)}")
    own: dict[str, At] = {}
    merged: dict[str, At] = {}
    for key_node, value_node in at.node.value:
        if key_node.tag == _MERGE:
            sources = _merge_sources(at, key_node, value_node, (*merging, at.node))
            for name, child in sources.items():
                merged.setdefault(name, child)
            continue
        name = _key_name(at, key_node)
        if name in own:
            raise at.key(name, key_node, line_of(key_node)).error(
                f"duplicate key {name!r} (first at line {own[name].line})"
            )
        own[name] = at.key(name, value_node, line_of(key_node))
    return {**merged, **own} if merged else own


def fields(at: At, allowed: Collection[str], required: Collection[str] = ()) -> dict[str, At]:
    """A mapping whose keys must be among ``allowed`` and include ``required``."""
    found = entries(at)
    for name, child in found.items():
        if name not in allowed:
            raise child.error(_unknown_key(name, allowed))
    for name in required:
        if name not in found or found[name].is_null:
            raise at.error(f"missing required key {name!r}")
    return found


def sequence(at: At) -> list[At]:
    """A list's items."""
    if not isinstance(at.node, yaml.SequenceNode):
        raise at.error(f"expected a list, got {describe(at.node)}")
    return [at.item(i, n) for i, n in enumerate(at.node.value)]


def text(at: At) -> str:
    """A string (numbers are taken as written: firmware ``1.20`` is "1.20")."""
    if not isinstance(at.node, yaml.ScalarNode) or at.node.tag not in _TEXTUAL:
        raise at.error(f"expected a string, got {describe(at.node)}")
    return str(at.node.value)


def matching(at: At, pattern: re.Pattern[str], what: str) -> str:
    """A string that must match ``pattern``; ``what`` says what it should be."""
    value = text(at)
    if not pattern.fullmatch(value):
        raise at.error(f"{value!r} is not {what}")
    return value


def integer(at: At, low: int, high: int) -> int:
    """An integer within ``low..high``."""
    if not isinstance(at.node, yaml.ScalarNode) or at.node.tag != _TAG + "int":
        raise at.error(f"expected an integer, got {describe(at.node)}")
    value = int(_construct(at.node))
    if not low <= value <= high:
        raise at.error(f"{value} is out of range {low}..{high}")
    return value


def number(at: At, low: float, high: float) -> float:
    """A number (integer or decimal) within ``low..high``."""
    if not isinstance(at.node, yaml.ScalarNode) or at.node.tag not in (
        _TAG + "int",
        _TAG + "float",
    ):
        raise at.error(f"expected a number, got {describe(at.node)}")
    value = float(_construct(at.node))
    if not low <= value <= high:
        raise at.error(f"{at.node.value} is out of range {low:g}..{high:g}")
    return value


def boolean(at: At) -> bool:
    """``true`` or ``false``."""
    if not isinstance(at.node, yaml.ScalarNode) or at.node.tag != _TAG + "bool":
        raise at.error(f"expected true or false, got {describe(at.node)}")
    return bool(_construct(at.node))


def choice(at: At, allowed: Collection[str]) -> str:
    """One of a fixed set of strings."""
    value = text(at)
    if value not in allowed:
        raise at.error(f"{value!r} is not one of: {', '.join(allowed)}")
    return value


def given(found: Mapping[str, At], key: str) -> bool:
    """The key is present with a non-null value (null means "not set")."""
    return key in found and not found[key].is_null


def read_given(f: dict[str, At], readers: dict[str, Callable[[At], object]]) -> dict[str, object]:
    """Each given key read by its reader; absent or null keys keep the dataclass default."""
    return {key: read(f[key]) for key, read in readers.items() if given(f, key)}


def check_name(at: At, name: str) -> None:
    """A mapping key used as a host or link name must be a valid name."""
    if not NAME.fullmatch(name):
        raise at.error(f"{name!r} is not {NAME_WHAT}")


def tags(at: At | None) -> tuple[str, ...]:
    """An optional list of tags."""
    if at is None or at.is_null:
        return ()
    return tuple(matching(item, NAME, f"a valid tag {NAME_CHARS}") for item in sequence(at))


def file_path(at: At, base: Path) -> str:
    """A file path: ``~`` expanded, a relative one taken from ``base``."""
    value = text(at)
    if not value:
        raise at.error("expected a file path, got an empty string")
    return os.path.normpath(base / os.path.expanduser(value))


def known(names: Collection[str], what: str = "hosts") -> str:
    """``hosts: a, b, c`` for "no such host" messages (long lists cut short)."""
    listed = sorted(names)
    shown = ", ".join(listed[:12]) + (", ..." if len(listed) > 12 else "")
    return f"{what}: {shown or 'none'}"


def _construct(node: yaml.ScalarNode) -> Any:
    # A fresh constructor per scalar: it keeps no state we rely on, and the
    # SafeConstructor knows YAML 1.1's integer and boolean spellings.
    return yaml.constructor.SafeConstructor().construct_object(node)


def _key_name(at: At, key_node: yaml.Node) -> str:
    # YAML 1.1 reads the keys ``on:`` and ``off:`` (a host's power actions) as
    # booleans; as a key the text written is what is meant.
    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in (*_TEXTUAL, _TAG + "bool"):
        where = At(at.file, line_of(key_node), at.path, key_node)
        raise where.error(f"keys must be strings, got {describe(key_node)}")
    return str(key_node.value)


def _merge_sources(
    at: At, key_node: yaml.Node, value_node: yaml.Node, merging: tuple[yaml.Node, ...]
) -> dict[str, At]:
    """The entries a ``<<`` key brings in: one mapping or a list of them."""
    where = At(at.file, line_of(key_node), at.path, value_node)
    sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
    result: dict[str, At] = {}
    for source in sources:
        if not isinstance(source, yaml.MappingNode):
            raise where.error(f"'<<' must merge a mapping, got {describe(source)}")
        if any(source is m for m in merging):
            raise where.error("'<<' merges a mapping that contains this one")
        for name, child in _entries(At(at.file, where.line, at.path, source), merging).items():
            result.setdefault(name, child)
    return result


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean 'X'? `` for the known name closest to ``name``; "" when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _unknown_key(name: str, allowed: Collection[str]) -> str:
    options = sorted(allowed)
    return f"unknown key {name!r} ({did_you_mean(name, options)}allowed: {', '.join(options)})"
