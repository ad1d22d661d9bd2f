"""``hil host exec HOST -- CMD...``: run a command on a host over SSH, no shell.

Its stdout and stderr are streamed to ours and ``hil`` exits with its exit
status; past ``--timeout`` it is stopped and ``hil`` exits 2.
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from typing import Any

from hil.cli.options import Subparsers
from hil.errors import EXIT_INFRA, CommandTimeout, InputError
from hil.host.hosts import Hosts
from hil.inventory import load_from_args

EXEC_TIMEOUT = 300.0
_CHUNK = 65536


def register(cmds: Subparsers) -> None:
    """Add ``hil host exec`` to ``cmds``."""
    p = cmds.add_parser(
        "exec",
        help="run a command on a host; exits with its status",
        description="Run CMD on HOST over SSH (no shell), streaming its "
        "stdout and stderr; exit with its exit status.",
    )
    p.add_argument("host", metavar="HOST")
    p.add_argument(
        "--timeout",
        type=float,
        default=EXEC_TIMEOUT,
        metavar="S",
        help=f"stop the command after S seconds, exit 2 (default {EXEC_TIMEOUT:g})",
    )
    p.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- CMD...",
        help="the command and its arguments (options of exec go before HOST)",
    )
    p.set_defaults(func=_exec)


def _exec(args: argparse.Namespace) -> int:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise InputError(
            "hil host exec: give the command after --, e.g. hil host exec h1 -- uname -a"
        )
    if argv is args.argv and argv[0].startswith("-"):
        raise InputError(
            f"hil host exec: {argv[0]} after HOST: write hil host exec [--timeout S] HOST -- CMD..."
        )
    with Hosts(load_from_args(args.inventory)) as hosts:
        host = hosts.host(args.host)
        proc = hosts.session(args.host).open_process(list(argv), sudo=host.ssh.sudo)
        try:
            status = _stream(args.host, argv, proc.channel, args.timeout)
        finally:
            proc.close(timeout=1.0)  # it has exited, or overran and is stopped now
    if status < 0:
        print(
            f"hil: error: {args.host}: {argv[0]} ended without an exit status "
            "(killed, or the connection dropped)",
            file=sys.stderr,
        )
        return EXIT_INFRA
    return status


def _stream(host: str, argv: list[str], chan: Any, timeout: float) -> int:
    """Copy the channel's stdout and stderr to ours until it exits; its exit status."""
    chan.shutdown_write()  # the command gets EOF on stdin, as with ssh -n
    deadline = time.monotonic() + timeout
    while True:
        moved = False
        if chan.recv_ready():
            sys.stdout.buffer.write(chan.recv(_CHUNK))
            sys.stdout.flush()
            moved = True
        if chan.recv_stderr_ready():
            sys.stderr.buffer.write(chan.recv_stderr(_CHUNK))
            sys.stderr.flush()
            moved = True
        if moved:
            continue
        if chan.exit_status_ready() and (chan.eof_received or chan.closed):
            return int(chan.recv_exit_status())
        if time.monotonic() >= deadline:
            raise CommandTimeout(
                host,
                f"{' '.join(argv)} still ran after {timeout:g}s and was "
                "stopped; raise --timeout if it is just slow",
            )
        select.select([chan], [], [], 0.1)
