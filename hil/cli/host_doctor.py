"""``hil host doctor HOST|PAIR [--json]``: is a host or a pair ready for a run hil can trust?

Reads each readiness check (:mod:`hil.host.readiness`) and prints a table:
check, host, status, what was seen, and the fix.  Changes nothing: what
pair setup sets (the inventory's MTU, a siw fallback device, pinned module
parameters) shows as ``info``.  Exits 0 when no check fails, 5 when one does
(a run there would be untrustworthy), 1 for an unknown name.
"""

from __future__ import annotations

import argparse
import json
import textwrap

from hil.cli.options import Subparsers, json_option
from hil.errors import EXIT_NOT_READY, EXIT_OK, InputError
from hil.host.hosts import Hosts
from hil.host.readiness import Readiness, host_readiness, pair_readiness
from hil.inventory import load_from_args
from hil.inventory.model import Inventory

COLUMNS = ("CHECK", "HOST", "STATUS", "SEEN", "FIX")
SEEN_WIDTH = 60  # wrap SEEN and FIX: the table fits a terminal and reads at a glance
MARK = {"ok": "ok", "info": "info", "warn": "WARN", "fail": "FAIL"}


def register(cmds: Subparsers) -> None:
    """Add ``hil host doctor``."""
    p = cmds.add_parser(
        "doctor",
        help="check that a host or pair is ready for a trustworthy run (changes nothing)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="HOST|PAIR", help="a host, or a pair (link) of the inventory")
    json_option(p, help='print {"target", "ok", "findings": [...]}')
    p.set_defaults(func=_doctor)


def doctor(hosts: Hosts, name: str) -> Readiness:
    """The readiness of pair ``name``, else of host ``name``; InputError for neither."""
    inv = hosts.inventory
    if name in inv.links and name in inv.hosts:
        raise InputError(f"{name!r} is both a host and a pair of {inv.path}; rename one")
    if name in inv.links:
        return pair_readiness(hosts, inv.pair(name))
    if name in inv.hosts:
        return host_readiness(hosts, name)
    raise InputError(f"{inv.path}: no host or pair {name!r} ({_known(inv)})")


def _known(inv: Inventory) -> str:
    hosts = ", ".join(sorted(inv.hosts)) or "none"
    pairs = ", ".join(sorted(inv.links)) or "none"
    return f"hosts: {hosts}; pairs: {pairs}"


def table(r: Readiness, width: int = SEEN_WIDTH) -> str:
    """The findings as aligned columns (SEEN and FIX wrapped at ``width``), then a verdict.

    A fix shows where something is to be done: on ``warn`` and ``fail`` rows
    (``--json`` has every field of every finding).
    """
    rows = [COLUMNS] + [
        (
            f.check,
            f.where,
            MARK[f.status],
            f.seen + (f" (expected {f.expected})" if f.expected and f.status != "ok" else ""),
            f.fix if f.status in ("warn", "fail") else "",
        )
        for f in r.findings
    ]
    cells = [[textwrap.wrap(c, width, break_on_hyphens=False) or [""] for c in row] for row in rows]
    widths = [max(len(line) for row in cells for line in row[i]) for i in range(len(COLUMNS) - 1)]
    lines = []
    for row in cells:
        for n in range(max(len(c) for c in row)):
            parts = [c[n] if n < len(c) else "" for c in row]
            padded = [p.ljust(w) for p, w in zip(parts, widths, strict=False)]
            lines.append("  ".join([*padded, parts[-1]]).rstrip())
    return "\n".join([*lines, "", verdict(r)])


def verdict(r: Readiness) -> str:
    """``NAME: ready`` or ``NAME: NOT READY``, with the counts that matter."""
    warns = sum(f.status == "warn" for f in r.findings)
    if r.ok:
        return f"{r.target}: ready" + (f" ({warns} warnings)" if warns else "")
    return f"{r.target}: NOT READY: {len(r.failures)} failing checks (see FIX)"


def _doctor(args: argparse.Namespace) -> int:
    with Hosts(load_from_args(args.inventory)) as hosts:
        r = doctor(hosts, args.target)
    print(json.dumps(r.to_json()) if args.json else table(r))
    return EXIT_OK if r.ok else EXIT_NOT_READY
