"""Load and validate an inventory file into the dataclasses of ``model``.

The file is composed (not constructed) with PyYAML so that every node keeps
its line; each check raises ``InventoryError`` located as
``file:line: yaml.path: message``.  The first problem found is reported.
See docs/inventory.md for the format.  Each section has its module: the
hosts :mod:`hil.inventory.hosts` (their RNIC ports :mod:`hil.inventory.rnics`),
the links :mod:`hil.inventory.links`, the thresholds
:mod:`hil.inventory.thresholds`.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from hil.errors import InputError, InventoryError
from hil.inventory.hosts import check_jump, parse_host
from hil.inventory.links import parse_links
from hil.inventory.model import Host, Inventory, Link
from hil.inventory.nodes import At, entries, fields, given, integer
from hil.inventory.power import check_controller
from hil.inventory.thresholds import parse_section

SUPPORTED_VERSION = 1
TOP_KEYS = ("version", "hosts", "links", "thresholds")


def load(path: str | os.PathLike[str]) -> Inventory:
    """Read, validate and return the inventory at ``path``.

    Raises ``InputError`` when the file cannot be read and ``InventoryError``
    (located ``file:line: yaml.path: message``) when it is not valid.
    """
    file = os.fspath(path)
    root = _compose(file, _read(file))
    return _Loader(file).inventory(root)


def inventory_path(path: str | os.PathLike[str] | None) -> str:
    """The file a ``--inventory`` option names, else ``$HIL_INVENTORY``; InputError if neither."""
    chosen = os.fspath(path) if path else os.environ.get("HIL_INVENTORY")
    if not chosen:
        raise InputError("no inventory: pass --inventory FILE or set HIL_INVENTORY")
    return chosen


def load_from_args(path: str | os.PathLike[str] | None) -> Inventory:
    """Load the inventory named by a ``--inventory`` option, else by ``$HIL_INVENTORY``."""
    return load(inventory_path(path))


def _read(file: str) -> str:
    try:
        with open(file, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{file}: cannot read inventory: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{file}: inventory is not UTF-8 text ({e.reason})") from None


def _compose(file: str, source: str) -> At:
    try:
        node = yaml.compose(source, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        context = ""
        if e.context:
            started = f" started at line {e.context_mark.line + 1}" if e.context_mark else ""
            context = f" ({e.context}{started})"
        raise InventoryError(file, line, "", f"invalid YAML: {e.problem}{context}") from None
    except yaml.YAMLError as e:
        raise InventoryError(file, None, "", f"invalid YAML: {e}") from None
    if node is None:
        raise InventoryError(file, 1, "", "the file is empty (expected hosts: and links:)")
    return At(file, node.start_mark.line + 1, "", node)


class _Loader:
    """Builds an ``Inventory`` from one file's root node."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.base = Path(os.path.abspath(file)).parent
        self.hosts: dict[str, Host] = {}

    def inventory(self, root: At) -> Inventory:
        top = fields(root, TOP_KEYS, required=("hosts",))
        if "version" in top:
            version = integer(top["version"], 0, 2**31)
            if version != SUPPORTED_VERSION:
                raise top["version"].error(
                    f"unsupported version {version} (this hil reads version {SUPPORTED_VERSION})"
                )
        checked = {
            name: parse_host(name, at, self.base) for name, at in entries(top["hosts"]).items()
        }
        self.hosts = {name: c.host for name, c in checked.items()}
        for c in checked.values():
            check_jump(c, self.hosts)
            if c.power is not None and c.host.power is not None:
                check_controller(c.power, c.host.name, c.host.power, self.hosts)
        links: dict[str, Link] = {}
        if given(top, "links"):
            links = parse_links(top["links"], self.hosts, self.base)
        thresholds = parse_section(top["thresholds"]) if given(top, "thresholds") else ()
        return Inventory(path=Path(self.file), hosts=self.hosts, links=links, thresholds=thresholds)
