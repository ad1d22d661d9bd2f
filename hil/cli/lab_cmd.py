"""``hil lab``: the virtual lab of QEMU soft-iWARP guests (see docs/virtual-lab.md)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hil.cli.options import command_group, json_option
from hil.errors import EXIT_INFRA, EXIT_OK, InputError
from hil.lab import control, kernel, kernel_source, network
from hil.lab.accel import ACCELS
from hil.lab.state import default_dir

# Two TCG guests of the debug kernel (KASAN, lockdep, kmemleak) took 209 s to SSH-ready
# at load 5-7, against 20-40 s for the plain kernel.
DEBUG_BOOT_TIMEOUT = 900.0
# The pair's ends as the lab's inventory names them: guest 0 is host A, guest 1 host B.
_PAIR_ENDS = {"a": 0, "b": 1}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``hil lab`` and its subcommands."""
    cmds = command_group(sub, "lab", "the virtual lab of QEMU soft-iWARP guests")

    p = cmds.add_parser("kernel", help="build (or find cached) the guest kernel with siw")
    p.add_argument("--rebuild", action="store_true", help="build even when a cached kernel exists")
    p.add_argument(
        "--source",
        metavar="SOURCE",
        help=f"the Debian kernel source: a package (linux-source-6.12), its version (6.12) or "
        f"a linux-source-X.Y.tar.xz (default {kernel_source.DEFAULT_SOURCE}); each is cached "
        "side by side",
    )
    _debug_option(p, "build the debug flavour")
    p.set_defaults(func=_kernel)

    p = cmds.add_parser("up", help="boot the lab's guests (reuses a running lab)")
    _dir_option(p)
    p.add_argument(
        "--hosts", type=int, default=2, help="number of guests, cabled as a chain (default 2)"
    )
    p.add_argument("--memory", default="1G", help="memory per guest, as for QEMU -m (default 1G)")
    p.add_argument(
        "--accel",
        choices=ACCELS,
        default="auto",
        help="kvm, tcg, or auto: KVM only if a probe boot works (default auto)",
    )
    p.add_argument(
        "--boot-timeout",
        type=float,
        help=f"seconds for all guests to become SSH-ready (default {control.BOOT_TIMEOUT:g}; "
        f"with --debug {DEBUG_BOOT_TIMEOUT:g})",
    )
    p.add_argument(
        "--kernel",
        metavar="SERIES|BZIMAGE",
        help="boot the lab kernel of another source (6.12, built first if not cached), or "
        "this bzImage (e.g. a fault kernel from tests/siw_faults.py) instead of the default",
    )
    for end, index in _PAIR_ENDS.items():
        p.add_argument(
            f"--kernel-{end}",
            metavar="SERIES|BZIMAGE",
            help=f"guest {index}, the pair's host {end.upper()}, boots this kernel instead "
            "(a mixed pair: --kernel-a 6.1 --kernel-b 6.12); as --kernel",
        )
    _debug_option(p, "boot the debug flavour of the lab kernel (built first if not cached)")
    p.add_argument(
        "--middlebox",
        action="store_true",
        help="a third guest on the cable between A and B, bridging it, the link's "
        "impairment point (inventory impair: middlebox; docs/impairment.md)",
    )
    p.set_defaults(func=_up)

    p = cmds.add_parser(
        "status",
        help="show the lab's guests, pids, ports, uptime and health "
        "(exit 3 when no healthy lab runs)",
    )
    _dir_option(p)
    json_option(p, help="print JSON instead of a table")
    p.set_defaults(func=_status)

    p = cmds.add_parser("down", help="stop the lab's guests and remove its files")
    _dir_option(p)
    p.set_defaults(func=_down)

    p = cmds.add_parser("inventory", help="print the running lab's inventory path")
    _dir_option(p)
    p.set_defaults(func=_inventory)


def _dir_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        type=Path,
        default=default_dir(),
        help=f"the lab directory (default {default_dir()})",
    )


def _debug_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--debug",
        action="store_true",
        help=f"{what}: KASAN, kmemleak, lockdep, debug objects (hil/lab/debug.config)",
    )


def _kernel(args: argparse.Namespace) -> int:
    source = kernel_source.find_source(spec=args.source)
    print(kernel.ensure_kernel(rebuild=args.rebuild, source=source, debug=args.debug))
    return 0


def _up(args: argparse.Namespace) -> int:
    guest_images = _guest_images(args)  # before the lab's kernel, which may take a build
    control.up(
        args.dir,
        hosts=args.hosts,
        memory=args.memory,
        accel_mode=args.accel,
        boot_timeout=args.boot_timeout
        or (DEBUG_BOOT_TIMEOUT if args.debug else control.BOOT_TIMEOUT),
        image=_image(args.kernel, args.debug),
        guest_images=guest_images,
        middlebox=args.middlebox,
    )
    print(control.inventory_path(args.dir))
    return 0


def _guest_images(args: argparse.Namespace) -> dict[int, Path]:
    """The kernels ``--kernel-a`` and ``--kernel-b`` give the pair's guests, by index."""
    images: dict[int, Path] = {}
    for end, index in _PAIR_ENDS.items():
        chosen = getattr(args, f"kernel_{end}")
        image = _image(chosen, args.debug) if chosen is not None else None
        if image is not None:
            images[index] = image
    return images


def _image(chosen: str | None, debug: bool) -> Path | None:
    """The bzImage ``up`` boots: a path as given, or the lab kernel of a series or flavour
    (built first when not cached); None for the default kernel."""
    if chosen is not None and not kernel_source.is_series(chosen):
        if debug:
            raise InputError("--debug picks a lab kernel: give it with --kernel SERIES, not a path")
        return Path(chosen)
    if chosen is None and not debug:
        return None
    return kernel.ensure_kernel(source=kernel_source.find_source(spec=chosen), debug=debug)


def _down(args: argparse.Namespace) -> int:
    if not control.down(args.dir):
        print(f"no lab in {args.dir}")
    return 0


def _inventory(args: argparse.Namespace) -> int:
    print(control.inventory_path(args.dir))
    return 0


def _status(args: argparse.Namespace) -> int:
    found = control.status(args.dir)
    if found is None:
        print(
            json.dumps({"dir": str(args.dir), "running": False})
            if args.json
            else f"no lab in {args.dir}"
        )
        return EXIT_INFRA
    state, health = found
    lab = network.lab_id(Path(state.dir))
    uptime = time.time() - state.started
    rows = [
        {
            "name": h.guest.name,
            "pid": h.guest.pid,
            "ssh_port": h.guest.ssh_port,
            "qmp": h.guest.qmp,
            "log": h.guest.log,
            "qemu_alive": h.qemu_alive,
            "switched_off": h.guest.off,
            "ssh_answering": h.ssh_answering,
            "kernel": state.kernel_of(h.guest),
        }
        for h in health
    ]
    healthy = all(h.qemu_alive and h.ssh_answering for h in health if not h.guest.off)
    default = control.default_kernel()
    is_default = default is not None and default.resolve() == Path(state.kernel).resolve()
    if args.json:
        print(
            json.dumps(
                {
                    "dir": state.dir,
                    "lab_id": lab,
                    "running": True,
                    "healthy": healthy,
                    "accel": state.accel,
                    "uptime_s": round(uptime, 1),
                    "kernel": state.kernel,
                    "kernel_default": is_default,
                    "cable_ports": list(state.cable_ports),
                    "middlebox": state.middlebox,
                    "guests": rows,
                },
                indent=2,
            )
        )
    else:
        print(
            f"lab {lab} in {state.dir}: {len(rows)} guests, {state.accel.upper()}, "
            f"up {uptime:.0f} s, {'healthy' if healthy else 'UNHEALTHY'}"
        )
        print(f"  kernel {state.kernel} ({'default' if is_default else 'not the default'})")
        if state.middlebox:
            print(f"  middlebox {state.guests[network.MIDDLEBOX].name} bridges the link")
        for g in state.guests:
            if state.kernel_of(g) != state.kernel:
                print(f"  kernel of {g.name}: {state.kernel_of(g)} (a mixed lab)")
        width = max(len("NAME"), *(len(h.guest.name) for h in health))
        print(f"  {'NAME':<{width}} {'PID':>8} {'SSH':>6}  QEMU  SSH")
        for r in rows:
            qemu = "off" if r["switched_off"] else "up" if r["qemu_alive"] else "DEAD"
            print(
                f"  {r['name']:<{width}} {r['pid']:>8} {r['ssh_port']:>6}  "
                f"{qemu:<4}  {'ok' if r['ssh_answering'] else 'no'}"
            )
        _print_dead(health, state.dir)
    return EXIT_OK if healthy else EXIT_INFRA


def _print_dead(health: list[control.GuestHealth], lab_dir: str) -> None:
    """A line for each dead guest: its console log, and how to start it again."""
    inventory = f'"$(hil lab inventory --dir {lab_dir})"'
    for h in health:
        if not (h.qemu_alive or h.guest.off):
            print(
                f"  {h.guest.name} is dead (its console: {h.guest.log}): "
                f"`hil --inventory {inventory} host recover {h.guest.name}` starts it again, "
                f"`hil lab down --dir {lab_dir}` stops the lab"
            )
