"""``hil lab``: the virtual lab of QEMU soft-iWARP guests."""

from __future__ import annotations

import argparse

from hil.lab import kernel


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``hil lab`` and its subcommands."""
    lab = sub.add_parser("lab", help="the virtual lab of QEMU soft-iWARP guests")
    cmds = lab.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", parser_class=type(lab))
    cmds.required = True
    p = cmds.add_parser("kernel", help="build (or find cached) the guest kernel with siw")
    p.add_argument("--rebuild", action="store_true", help="build even when a cached kernel exists")
    p.set_defaults(func=_kernel)


def _kernel(args: argparse.Namespace) -> int:
    print(kernel.ensure_kernel(rebuild=args.rebuild))
    return 0
