"""``hil wire judge``: judge a capture from anywhere against the wire rules.

``hil wire judge CAPTURE [CAPTURE ...]`` decodes the files with tshark's
iWARP dissectors (each file is one capture point, named after the file),
prints the connections it found and the wire verdict of the rules that can
be judged without a CM timeline, for the profile of ``--profile``.  A
mirror port's capture, a capture attached to an old report, rping or
cmtime traffic: any pcap or pcapng.  ``--port`` keeps the connections to
or from that TCP port (the test's listener) and leaves the rest out.

``--timeline RUN.json`` (``hil cm run --json`` output, or a timeline's own
JSON as a report attaches it) judges the capture against that run's CM
timeline too, so the rules that need one (private data, orderly and
abortive close, no listener, ...) are judged as in the test; without the
capture host's clock samples the packets are not placed on the timeline,
and the rules that need times say so.

Exit 0 when the rules hold, 4 when one is violated, 1 for bad input: a
file that is missing or not a capture, no TCP connection in it, or nothing
any rule could judge (every rule skipped or not applicable).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from hil.cli.options import command_group, json_option
from hil.errors import EXIT_OK, EXIT_VIOLATION, InputError
from hil.judge.profiles import PROVIDERS, profile_for
from hil.judge.timeline import Timeline
from hil.wire.model import Exchange

DECODE_TIMEOUT = 120.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil wire`` and its subcommands."""
    cmds = command_group(subparsers, "wire", "judge packet captures against the wire rules")
    p = cmds.add_parser(
        "judge",
        help="decode captures and print their connections and wire verdict",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("captures", nargs="+", type=Path, metavar="CAPTURE", help="a pcap or pcapng")
    p.add_argument(
        "--profile",
        choices=sorted(PROVIDERS.names()),
        default="siw",
        help="the provider whose profile judges (default siw)",
    )
    p.add_argument(
        "--port",
        type=_port,
        action="append",
        default=[],
        metavar="N",
        help="judge only the connections to or from TCP port N (repeatable)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DECODE_TIMEOUT,
        metavar="S",
        help=f"seconds tshark may take per file (default {DECODE_TIMEOUT:g})",
    )
    p.add_argument(
        "--timeline",
        type=Path,
        action="append",
        default=[],
        metavar="RUN.json",
        help="a CM run's JSON (hil cm run --json) or a timeline's, to judge against (repeatable)",
    )
    json_option(p, help='print one JSON object: {"captures", "exchange", "verdict"}')
    p.set_defaults(func=_judge)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1..65535)")
    return port


def point_names(paths: list[Path]) -> dict[str, Path]:
    """Each file under a capture point name: its file name without suffix (the path as
    given when two files share one)."""
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return dict(zip(stems, paths, strict=True))
    if len(set(paths)) != len(paths):
        raise InputError("the same capture is given twice")
    return {str(p): p for p in paths}


def only_ports(exchange: Exchange, ports: list[int]) -> Exchange:
    """``exchange`` with only the connections that have an end on one of ``ports``."""
    if not ports:
        return exchange
    kept = tuple(c for c in exchange.connections if {c.active[1], c.passive[1]} & set(ports))
    return replace(exchange, connections=kept)


def load_timeline(path: Path) -> Timeline:
    """A timeline from ``hil cm run --json`` output (its ``timeline``) or its own JSON."""
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise InputError(f"cannot read the timeline {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"{path} is not JSON: {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("timeline"), dict):
        doc = doc["timeline"]
    if not isinstance(doc, dict):
        raise InputError(f"{path} holds no timeline")
    try:
        return Timeline.from_dict(doc)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def _judge(args: argparse.Namespace) -> int:
    from hil.wire.decode import decode
    from hil.wire.judge import judge
    from hil.wire.render import exchange_text

    captures = point_names(args.captures)
    profile = profile_for(args.profile)
    exchange = only_ports(decode(captures, timeout=args.timeout), args.port)
    if not exchange.connections:
        where = f" to or from port {', '.join(map(str, args.port))}" if args.port else ""
        raise InputError(f"no TCP connection{where} in {', '.join(map(str, args.captures))}")
    timelines = [load_timeline(path) for path in args.timeline]
    verdict = judge(exchange, timelines, profile, timeline_known=bool(timelines))
    if args.json:
        doc = {
            "captures": {name: str(path) for name, path in captures.items()},
            "exchange": exchange.to_json(),
            "verdict": verdict.to_dict(),
        }
        print(json.dumps(doc))
    else:
        print(exchange_text(exchange))
        print(verdict.to_text())
    if not verdict.ok:
        return EXIT_VIOLATION
    if not verdict.count("pass"):
        raise InputError(
            "nothing judged: every wire rule was skipped or not applicable to "
            "this capture (most rules need the test's CM timeline)"
        )
    print(f"hil: wire rules hold ({verdict.count('pass')} passed)", file=sys.stderr)
    return EXIT_OK
