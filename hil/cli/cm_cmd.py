"""``hil cm run|list``: one RDMA CM sequence on a reserved pair, for one-off use.

``hil cm run SEQUENCE`` reserves a pair (``--pair``, ``--require``, or the
first free one; ``--lease`` adopts a lease already held), replays what dead
runs left in its journal, sets the pair up, runs the sequence, restores the
pair and releases the lease it took.  The sequence runs as one test
(:class:`hil.run.testrun.TestRun`), as in pytest: the link captured and
judged by the wire rules, the resources and kernel log checked after it
(kmemleak on a debug kernel), so it gives the same verdicts as the suites.
It prints the timeline (both hosts' events and the controller's actions on
the controller's clock), the contract verdict and each stage's verdict.
``--no-wire`` and ``--no-evidence`` leave those stages out.  Exit 0 when
every verdict holds, 4 when one is violated, 3 when a stage could not run.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
import typing
from collections.abc import Callable
from typing import Any

from hil.cli.options import (
    command_group,
    json_option,
    module_param_option,
    pair_choice,
    timeout_options,
    wait_option,
)
from hil.cm import registry
from hil.errors import EXIT_INFRA, EXIT_OK, EXIT_VIOLATION, InputError
from hil.host.evidence import SETTLE_S
from hil.inventory.model import FAMILIES
from hil.registry import Registry


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil cm`` and its subcommands."""
    cmds = command_group(subparsers, "cm", "run RDMA CM sequences on a pair", __doc__)

    p = cmds.add_parser("list", help="the sequences and their parameters")
    p.set_defaults(func=_list)

    p = cmds.add_parser(
        "run",
        help="run one sequence; print its timeline and verdict",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sequence", metavar="SEQUENCE", help="a sequence name (hil cm list)")
    pair_choice(
        p,
        require_help="any pair meeting this requirement (repeatable)",
        lease_help="run under this live lease (from 'hil reserve'); it is not released",
    )
    p.add_argument(
        "--direction",
        choices=("a-b", "b-a"),
        default="a-b",
        help="which host connects: a-b (default) or b-a",
    )
    p.add_argument(
        "--family",
        choices=FAMILIES,
        default=None,
        help="the data addresses to use: ipv4 or ipv6 (default: the first the pair offers, "
        "ipv4 when it has both; ipv6 needs both ports' address6 in the inventory)",
    )
    p.add_argument(
        "--mode", metavar="MODE", help="link pull mode (link_pull; default: the link's first)"
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="a sequence parameter, e.g. -p by=passive -p count=16 (repeatable)",
    )
    p.add_argument("--no-wire", action="store_true", help="capture nothing and judge no wire rule")
    p.add_argument(
        "--no-evidence",
        action="store_true",
        help="check neither resources nor the kernel log after the run (nor kmemleak)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        metavar="SECONDS",
        help=f"how long resources may take to come back after the run (default {SETTLE_S:g})",
    )
    module_param_option(p)
    wait_option(p)
    timeout_options(p)
    json_option(
        p,
        help='print one JSON object: {"lease", "setup", "provider", "timeline", "verdict", '
        '"evidence", "wire", "kmemleak", "outcome", "ok", "failures", "lab_errors"}',
    )
    p.set_defaults(func=_run)


def _sequences() -> Registry[registry.Sequence]:
    """Every registered sequence, the built-in ones among them."""
    from hil.cm import session  # noqa: F401 -- importing it registers the built-in ones

    return registry.SEQUENCES


def _list(args: argparse.Namespace) -> int:
    for name, fn in sorted(_sequences().items()):
        params = [
            f"{p.name}={p.default!r}" for p in list(inspect.signature(fn).parameters.values())[1:]
        ]
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        print(f"{name:<18} {' '.join(params) or '-':<44} {doc}")
    return EXIT_OK


def _value(text: str) -> Any:
    """A parameter whose type the sequence does not say: a bool, a number or text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# How a -p value becomes each type a sequence's parameters are annotated with,
# and what the refusal says it takes.
_PARSERS: dict[type, tuple[Callable[[str], Any], str]] = {
    bool: (lambda t: {"true": True, "false": False}[t], "true or false"),
    int: (int, "a whole number"),
    float: (float, "a number"),
    str: (str, "text"),
    bytes: (str.encode, "text"),
}
_BY_NAME = {k.__name__: k for k in _PARSERS}


def _kinds(param: inspect.Parameter) -> list[type]:
    """The types of ``param`` that a -p value can be (each member of ``int | None``)."""
    ann = param.annotation
    if isinstance(ann, str):  # ``from __future__ import annotations``: the source text
        return [_BY_NAME[n.strip()] for n in ann.split("|") if n.strip() in _BY_NAME]
    return [k for k in (typing.get_args(ann) or (ann,)) if k in _PARSERS]


def _typed(name: str, param: inspect.Parameter, text: str) -> Any:
    """``text`` as a value of ``param``'s type; InputError when it is none of its types."""
    kinds = _kinds(param)
    if not kinds:
        return _value(text)
    for kind in kinds:
        parse, _ = _PARSERS[kind]
        try:
            return parse(text)
        except (KeyError, ValueError):
            continue
    takes = " or ".join(_PARSERS[k][1] for k in kinds)
    raise InputError(f"sequence {name}: {param.name} takes {takes}, not {text!r}")


def sequence_params(name: str, pairs: list[str], mode: str | None) -> dict[str, Any]:
    """``-p K=V`` texts as the parameters of sequence ``name``, each of its annotated type,
    and ``--mode`` a registered pull mode; InputError when they do not fit."""
    _sequences()
    fn = registry.lookup(name)
    texts: dict[str, str] = {}
    for text in pairs:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise InputError(f"-p {text!r}: write KEY=VALUE")
        texts[key] = value
    if mode is not None:
        texts["mode"] = mode
    accepted = dict(list(inspect.signature(fn).parameters.items())[1:])
    unknown = sorted(set(texts) - set(accepted))
    if unknown:
        raise InputError(
            f"sequence {name} takes no {', '.join(unknown)} "
            f"(it takes: {', '.join(accepted) or 'nothing'})"
        )
    params = {k: _typed(name, accepted[k], v) for k, v in texts.items()}
    if isinstance(params.get("mode"), str):
        from hil.host.linkctl import pull_mode

        pull_mode(params["mode"])  # a mode no package registered: refused before any pair is held
    return params


def _run(args: argparse.Namespace) -> int:
    from hil.cli.cm_output import JsonOutput, TextOutput
    from hil.inventory import load_from_args
    from hil.reservation import open_store
    from hil.run import PairRequest, PairRun
    from hil.run.testparts import TestOptions
    from hil.timeouts import configured

    params = sequence_params(args.sequence, args.param, args.mode)
    inv = load_from_args(args.inventory)
    request = PairRequest(
        pair=args.pair,
        require=tuple(args.require),
        lease=args.lease,
        holder=f"hil cm run {args.sequence}",
        wait=args.wait,
        module_params=tuple(args.module_param),
    )
    options = TestOptions(
        wire=not args.no_wire, evidence=not args.no_evidence, settle_s=args.settle
    )
    output = JsonOutput() if args.json else TextOutput()
    bounds = configured(agent_call_s=args.timeout_agent, step_slack_s=args.timeout_step_slack)
    with bounds, open_store(args.store) as store:
        if args.lease and not any(le.id == args.lease for le in store.leases()):
            raise InputError(f"lease {args.lease} is not live (hil status lists leases)")
        with PairRun(inv, store, request, observers=[output], progress=_progress) as run:
            if isinstance(output, JsonOutput):
                output.doc.update(
                    lease=run.lease.to_json(),
                    setup=run.state.to_json(),
                    provider=_provider_json(run),
                )
            # Made first: a family the pair does not offer is bad input, not a failed test.
            session = run.session(args.direction, family=args.family)
            with run.test(f"hil cm run {args.sequence}", options) as t:
                session.run(args.sequence, **params)
    assert t.result is not None
    if isinstance(output, JsonOutput):
        print(json.dumps(output.doc))
    if t.result.lab_errors:
        return EXIT_INFRA
    return EXIT_OK if t.result.ok else EXIT_VIOLATION


def _progress(text: str) -> None:
    print(f"hil: {text}", file=sys.stderr)


def _provider_json(run: Any) -> dict[str, Any]:
    """The provider both hosts run, and each host's device, driver and settings."""
    p = run.provider
    return {
        "driver": p.driver,
        "profile": run.profile.name,
        "hosts": [dataclasses.asdict(h) for h in p.hosts],
    }
