"""The command line a guest boots with: NICs, cables, sockets, no shell syntax."""

from __future__ import annotations

import re
from pathlib import Path

from hil.lab import guestcmd, network
from hil.lab.bootfiles import BOOT_SCRIPT

LAB = Path("/tmp/hil-test-lab")
ID = network.lab_id(LAB)
FIRST = network.guest_name(ID, 0)


def options(index: int, n: int = 3) -> list[str]:
    cables = network.cables(ID, n, tuple(41000 + c for c in range(2 * (n - 1))))
    spec = guestcmd.GuestSpec(network.guest_name(ID, index), index, 40000 + index, "768M", "tcg")
    return guestcmd.qemu_options(LAB, spec, cables)


def test_the_middle_guest_binds_its_end_of_each_cable_and_sends_to_the_other() -> None:
    # Cable c's ends bind 41000 + 2c (guest c) and 41000 + 2c + 1 (guest c + 1).
    opts = options(1)
    assert "socket,id=data0,udp=127.0.0.1:41000,localaddr=127.0.0.1:41001" in opts
    assert "socket,id=data1,udp=127.0.0.1:41003,localaddr=127.0.0.1:41002" in opts
    assert "virtio-net-pci,netdev=data1,mac=52:54:00:01:01:01" in opts


def test_management_nic_forwards_ssh_from_loopback_only_and_cannot_reach_out() -> None:
    opts = options(0)
    assert "user,id=mgmt0,restrict=on,hostfwd=tcp:127.0.0.1:40000-:22" in opts
    assert f"unix:{LAB}/{FIRST}.qmp,server=on,wait=off" in opts
    assert str(LAB / f"{FIRST}.pid") in opts


def test_vng_gets_no_shell_syntax_and_tcg_when_asked() -> None:
    spec = guestcmd.GuestSpec(FIRST, 0, 40000, "768M", "tcg")
    argv = guestcmd.vng_argv(Path("/k/bzImage"), LAB, spec, network.cables(ID, 2, (41000, 41001)))
    assert "--disable-kvm" in argv
    assert argv[argv.index("--name") + 1] == FIRST  # vng makes it the guest's hostname
    assert argv[argv.index("--exec") + 1] == f"sh {BOOT_SCRIPT} {LAB}/{FIRST}.d"
    qemu_opts = next(a for a in argv if a.startswith("--qemu-opts="))
    # vng passes these through a shell: only characters with no meaning there.
    assert re.fullmatch(r"[A-Za-z0-9 ._/:,=+-]+", qemu_opts.removeprefix("--qemu-opts="))
    kvm = guestcmd.vng_argv(
        Path("/k/bzImage"),
        LAB,
        guestcmd.GuestSpec(FIRST, 0, 1, "1G", "kvm"),
        network.cables(ID, 2, (41000, 41001)),
    )
    assert "--disable-kvm" not in kvm


def test_the_root_is_mounted_with_vngs_9p_options_plus_a_cache() -> None:
    spec = guestcmd.GuestSpec(FIRST, 0, 40000, "768M", "tcg")
    argv = guestcmd.vng_argv(Path("/k/bzImage"), LAB, spec, network.cables(ID, 2, (41000, 41001)))
    appended = [argv[i + 1] for i, a in enumerate(argv) if a == "--append"]
    # vng puts --append after its own rootflags=...msize=524288 (virtme-ng
    # 1.42), and the kernel keeps the last: ours must repeat vng's options.
    (rootflags,) = [a for a in appended if a.startswith("rootflags=")]
    assert rootflags.split("=", 1)[1].split(",") == [
        "version=9p2000.L",
        "trans=virtio",
        "access=any",
        "msize=524288",
        "cache=loose",
    ]
