"""``hil nightly drift``: each pair's newest night against the nights before it.

``hil nightly drift --history DIR`` reads the drift history the nightly keeps
(``REPORTS/drift``, or the reports directory itself: docs/drift.md) and prints, per
pair, what the newest night changed against the ``--nights`` before it (wire flags
and MPA values, event statuses, each bound's p99, storm and detection numbers) and
what changed in the pair's environment that night, judged by the same thresholds as
the nightly (``--threshold``, repeatable, as ``ci/nightly --drift-threshold``).

Exit 0 when no change passes its fail threshold, 4 when one does, 1 for bad input:
no such directory, no history in it, an unknown pair or kind, a bad threshold.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from hil.cli.options import command_group, json_option
from hil.errors import EXIT_OK, EXIT_VIOLATION, InputError
from hil.report import drift, drift_history
from hil.report.drift_kinds import Limits


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil nightly`` and its subcommands."""
    cmds = command_group(subparsers, "nightly", "what the nightly runs kept")
    p = cmds.add_parser(
        "drift",
        help="each pair's newest night against the nights before it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--history",
        type=Path,
        required=True,
        metavar="DIR",
        help="the nightly's reports directory, or its drift/ directory",
    )
    p.add_argument("--pair", action="append", default=[], help="only this pair (repeatable)")
    p.add_argument(
        "--nights",
        type=int,
        default=drift_history.DEFAULT_KEEP,
        metavar="N",
        help=f"compare with the N nights before the newest (default {drift_history.DEFAULT_KEEP})",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help="KIND=FLAG:FAIL (bound, detection, storm) or KIND=fail|flag (wire, status)",
    )
    json_option(p, help="print one JSON object per pair: {pair, nights, changes, stack}")
    p.set_defaults(func=_drift)


def history_dir(given: Path) -> Path:
    """The drift directory: ``given``, or its ``drift/``; InputError when neither is one."""
    for d in (given / drift_history.DIRECTORY, given):
        if d.is_dir() and any(p.is_dir() for p in d.iterdir()):
            return d
    if not given.is_dir():
        raise InputError(f"--history {given}: no such directory")
    raise InputError(
        f"--history {given}: no history yet (the nightly keeps one directory per pair in "
        f"REPORTS/{drift_history.DIRECTORY}/ from its first run on)"
    )


def pair_dirs(history: Path, pairs: list[str]) -> list[Path]:
    """The pairs' directories, all of them when ``pairs`` is empty."""
    known = sorted(p for p in history.iterdir() if p.is_dir())
    if not pairs:
        return known
    chosen = [drift_history.pair_dir(history, p) for p in pairs]
    for pair, d in zip(pairs, chosen, strict=True):
        if d not in known:
            names = ", ".join(k.name for k in known)
            raise InputError(f"--pair {pair}: no history in {history} (pairs: {names})")
    return chosen


def newest_drift(
    directory: Path, nights: int, limits: Mapping[str, Limits]
) -> tuple[drift.Drift, tuple[str, ...]]:
    """The newest night of one pair against the ``nights`` before it."""
    kept = drift_history.load(directory, nights + 1)
    if not kept.nights:
        return drift.Drift(directory.name, 0), kept.skipped
    *before, newest = kept.nights
    return drift.compare(newest, before, limits), kept.skipped


def _drift(args: argparse.Namespace) -> int:
    if args.nights < 1:
        raise InputError(f"--nights must be at least 1, not {args.nights}")
    limits = drift.limits_of(args.threshold)
    dirs = pair_dirs(history_dir(args.history), args.pair)
    found = [newest_drift(d, args.nights, limits) for d in dirs]
    for d, skipped in found:
        if args.json:
            print(json.dumps({**asdict(d), "skipped": list(skipped)}, sort_keys=True))
        else:
            print("\n".join([*drift.summary_lines(d), *drift_history.skipped_lines(skipped)]))
    return EXIT_VIOLATION if any(d.fails for d, _ in found) else EXIT_OK
