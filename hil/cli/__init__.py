"""The ``hil`` command: one entry point, a module per subcommand group.

Each module in ``COMMANDS`` has ``register(subparsers)``, which adds its
subcommands and sets ``func`` on each parser: ``func(args) -> int``.
Errors from the library are ``HilError``s; they are printed as one line and
mapped to the exit codes below, never shown as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from hil.cli.interrupts import Interrupts
from hil.errors import EXIT_INFRA, EXIT_INPUT, EXIT_OK, HilError

EPILOG = """exit codes:
  0  ok
  1  bad input (inventory, arguments, unknown names)
  2  busy or timed out (pair held by someone else, --wait expired)
  3  infrastructure error (store, SSH, agent, lab)
  4  a rule was violated: the RDMA CM contract, a wire rule or the after-test
     checks (hil cm run), a wire rule (hil wire judge), a finding on the DUT
     (hil peer fuzz|replay), a drift past its fail threshold (hil nightly drift)
  5  hosts not ready: a readiness check failed (hil host doctor, pair setup),
     a host failed hil lab-check or is quarantined

environment:
  HIL_INVENTORY  default for --inventory
  HIL_STORE      default for --store (a SQLite path or a postgresql:// URL)
"""

COMMANDS: list[str] = [
    "hil.cli.lab_cmd",
    "hil.cli.lab_check",
    "hil.cli.inventory_cmd",
    "hil.cli.reserve_cmd",
    "hil.cli.host_cmd",
    "hil.cli.link_cmd",
    "hil.cli.cm_cmd",
    "hil.cli.wire_cmd",
    "hil.cli.peer_cmd",
    "hil.cli.nightly_cmd",
]


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad arguments; our contract says 1."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every command group registered."""
    parser = _Parser(
        prog="hil",
        description="Hardware-in-the-loop testing for iWARP RNICs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--inventory",
        default=os.environ.get("HIL_INVENTORY"),
        help="inventory YAML file (env HIL_INVENTORY)",
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("HIL_STORE"),
        help="reservation store: SQLite path or postgresql:// URL (env HIL_STORE; "
        "default ~/.local/state/hil/reservations.db)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    try:
        with Interrupts():
            return int(args.func(args) or 0)
    except HilError as e:
        print(f"hil: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("hil: interrupted", file=sys.stderr)
        return EXIT_INFRA
    except BrokenPipeError:
        # The reader went away (`hil ... | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
