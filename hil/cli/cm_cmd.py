"""``hil cm run|list``: one RDMA CM sequence on a reserved pair, for one-off use.

``hil cm run SEQUENCE`` reserves a pair (``--pair``, ``--require``, or the
first free one; ``--lease`` adopts a lease already held), replays what dead
runs left in its journal, sets the pair up, runs the sequence, restores the
pair and releases the lease it took.  It prints the timeline (both hosts'
events and the controller's actions on the controller's clock) and the
contract verdict.  Exit 0 when the contract holds, 4 when it is violated.
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
from hil.errors import EXIT_OK, EXIT_VIOLATION, InputError
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
    module_param_option(p)
    wait_option(p)
    timeout_options(p)
    json_option(p, help='print one JSON object: {"lease", "setup", "timeline", "verdict"}')
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
    from hil.inventory import load_from_args
    from hil.judge.contract import check
    from hil.reservation import open_store
    from hil.run import PairRequest, PairRun
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
    bounds = configured(agent_call_s=args.timeout_agent, step_slack_s=args.timeout_step_slack)
    with bounds, open_store(args.store) as store:
        if args.lease and not any(le.id == args.lease for le in store.leases()):
            raise InputError(f"lease {args.lease} is not live (hil status lists leases)")
        with PairRun(
            inv, store, request, progress=lambda t: print(f"hil: {t}", file=sys.stderr)
        ) as run:
            timeline = run.session(args.direction).run(args.sequence, **params)
            verdict = check(timeline, run.profile)
            doc = {
                "lease": run.lease.to_json(),
                "setup": run.state.to_json(),
                "provider": _provider_json(run),
                "timeline": timeline.to_dict(),
                "verdict": verdict.to_dict(),
            }
    if args.json:
        print(json.dumps(doc))
    else:
        _print(doc, verdict.to_text())
    return EXIT_OK if doc["verdict"]["ok"] else EXIT_VIOLATION


def _provider_json(run: Any) -> dict[str, Any]:
    """The provider both hosts run, and each host's device, driver and settings."""
    p = run.provider
    return {
        "driver": p.driver,
        "profile": run.profile.name,
        "hosts": [dataclasses.asdict(h) for h in p.hosts],
    }


def _print(doc: dict[str, Any], verdict_text: str) -> None:
    from hil.judge.timeline import Timeline

    tl = Timeline.from_dict(doc["timeline"])
    print(
        f"{tl.scenario} on pair {doc['lease']['pair']} ({tl.pair[0]}, {tl.pair[1]}), "
        f"profile {tl.provider}"
    )
    for o in tl.offsets:
        print(f"  clock {o.host}: offset {o.offset_us} us +/- {o.uncertainty_us} us")
    t0 = min((x.t_us for x in tl.merged()), default=0)
    for x in tl.merged():
        print(f"  {(x.t_us - t0) / 1000:10.3f} ms  {x.brief()}")
    for name, value in sorted(tl.metrics.items()):
        print(f"  metric {name} = {value:g}")
    for r in tl.resources:
        if r.after != r.before:
            print(f"  resources {r.host} {r.kind}: {r.before} before, {r.after} after")
    print(verdict_text)
