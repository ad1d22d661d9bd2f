"""Arguments several ``hil`` commands share: a command group, pair choice, --wait, --lease, --json.

Each helper adds the option the same way everywhere it is used; the help
text is the caller's where the commands say it differently.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeAlias

from hil.timeouts import DEFAULTS, seconds

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
WAIT_HELP = "queue up to S seconds for a busy pair (default 0: exit 2 at once)"


def command_group(
    subparsers: Subparsers,
    name: str,
    help: str,
    description: str | None = None,
) -> Subparsers:
    """Add ``hil NAME`` with required subcommands (``NAME_COMMAND``); their subparsers."""
    group = subparsers.add_parser(
        name,
        help=help,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds: Subparsers = group.add_subparsers(
        dest=f"{name}_command", metavar=f"{name.upper()}_COMMAND", parser_class=type(group)
    )
    cmds.required = True
    return cmds


def pair_choice(
    p: argparse.ArgumentParser, require_help: str, lease_help: str | None = None
) -> None:
    """``--pair NAME`` or ``--require K=V`` (repeatable), or (with ``lease_help``) ``--lease``."""
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pair", metavar="NAME", help="this pair (a link name of the inventory)")
    which.add_argument("--require", action="append", default=[], metavar="K=V", help=require_help)
    if lease_help is not None:
        which.add_argument("--lease", metavar="LEASE", help=lease_help)


def wait_option(
    p: argparse.ArgumentParser, type: Callable[[str], float] = float, help: str = WAIT_HELP
) -> None:
    """``--wait S``: how long to queue for a busy pair (default 0)."""
    p.add_argument("--wait", type=type, default=0.0, metavar="S", help=help)


def lease_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--lease LEASE``: act under this live lease."""
    p.add_argument("--lease", metavar="LEASE", help=help)


def json_option(p: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    """``--json``: print JSON instead of text."""
    p.add_argument("--json", action="store_true", help=help)


def module_param_option(p: argparse.ArgumentParser) -> None:
    """``--module-param DRIVER.NAME=VALUE`` (repeatable): override the link's module_params."""
    p.add_argument(
        "--module-param",
        action="append",
        default=[],
        metavar="DRIVER.NAME=VALUE",
        help="pin this kernel module parameter for the run, over the link's module_params "
        "(e.g. iw_cxgb4.ep_timeout_secs=10; repeatable); restored afterwards",
    )


def timeout_options(p: argparse.ArgumentParser) -> None:
    """``--timeout-agent S`` and ``--timeout-step-slack S``: the agent call and step
    layers' bounds for this command (:mod:`hil.timeouts`, docs/reliability.md)."""

    p.add_argument(
        "--timeout-agent",
        type=seconds,
        metavar="S",
        help=f"bound of an agent call that names none (default {DEFAULTS.agent_call_s:g})",
    )
    p.add_argument(
        "--timeout-step-slack",
        type=seconds,
        metavar="S",
        help="how much longer than its profile's bound a CM step waits "
        f"(default {DEFAULTS.step_slack_s:g})",
    )
