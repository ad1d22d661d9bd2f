"""What a lab guest runs: vng's command line, QEMU's options and vng's environment.

Each guest is ``vng --run BZIMAGE --exec "sh guest_boot.sh CONF"``, QEMU
with a pidfile, a QMP socket, a management NIC (SSH forwarded from
127.0.0.1 only) and one NIC per cable (a UDP socket pair on 127.0.0.1).
:mod:`hil.lab.guests` starts it.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.lab.bootfiles import BOOT_SCRIPT, guest_conf_dir
from hil.lab.network import Cable, data_nics, mgmt_nic

# The guests' root is the host's, read-only over 9p; vng mounts it without a
# cache (virtme/commands/run.py, virtme-ng 1.42), so each lookup, stat and read
# is a round trip the TCG guest emulates: ``python3 -c pass`` took 0.48 s.
# The kernel takes the last ``rootflags=`` (init/do_mounts.c, root_data_setup,
# 6.1): vng's options plus ``cache=loose``, which keeps what a guest read
# (fs/9p/vfs_super.c, v9fs_cached_dentry_operations) and never revalidates it
# against the host, except that no negative entry is kept
# (fs/9p/vfs_dentry.c, v9fs_cached_dentry_delete), so a file new on the host
# is seen.  Safe here because nothing a guest reads from the host changes
# during a boot but the system's packages: the boot script and its config dir
# are read once at boot (a restart remounts), and the agent runs from its
# content-addressed copy in the guest's tmpfs /root (hil/agent/deploy.py,
# zipmain.py).  Restart the lab after upgrading the host's packages.
ROOTFLAGS = "rootflags=version=9p2000.L,trans=virtio,access=any,msize=524288,cache=loose"


@dataclass(frozen=True)
class GuestSpec:
    """What to boot for one guest."""

    name: str
    index: int
    ssh_port: int
    memory: str
    accel: str  # "kvm" or "tcg"


def vng_binary() -> str:
    """The vng of hil's venv (often not on PATH), else the one on PATH."""
    name = tools.name("vng")
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise LabError("vng not found: pip install virtme-ng into hil's venv (run ci/install)")
    return found


def qemu_options(lab_dir: Path, spec: GuestSpec, lab_cables: list[Cable]) -> list[str]:
    """The QEMU options for a guest's pidfile, QMP socket and NICs."""
    mgmt = mgmt_nic(spec.index)
    opts = [
        "-pidfile",
        str(lab_dir / f"{spec.name}.pid"),
        "-qmp",
        f"unix:{lab_dir / spec.name}.qmp,server=on,wait=off",
        "-netdev",
        f"user,id={mgmt.netdev},restrict=on,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
        "-device",
        f"virtio-net-pci,netdev={mgmt.netdev},mac={mgmt.mac}",
    ]
    for cable, nic in data_nics(spec.index, lab_cables):
        mine, peer = (cable.a, cable.b) if cable.a.guest == spec.index else (cable.b, cable.a)
        opts += [
            "-netdev",
            f"socket,id={nic.netdev},udp=127.0.0.1:{peer.port},localaddr=127.0.0.1:{mine.port}",
            "-device",
            f"virtio-net-pci,netdev={nic.netdev},mac={nic.mac}",
        ]
    return opts


def vng_argv(kernel: Path, lab_dir: Path, spec: GuestSpec, lab_cables: list[Cable]) -> list[str]:
    """The full vng command line of a guest."""
    argv = [
        vng_binary(),
        "--run",
        str(kernel),
        "--name",
        spec.name,
        "--cpus",
        "1",
        "--memory",
        spec.memory,
        "--cwd",
        "/",
        "--disable-microvm",
        "--verbose",
        # CONFIG_DUMMY=y would add a stray dummy0 to every guest.
        "--append",
        "dummy.numdummies=0",
        "--append",
        ROOTFLAGS,
    ]
    if spec.accel == "tcg":
        argv.append("--disable-kvm")
    argv += ["--exec", f"sh {BOOT_SCRIPT} {guest_conf_dir(lab_dir, spec.name)}"]
    # vng hands these to a shell unquoted: every part is free of shell syntax
    # (paths are checked by state.check_dir, the rest is ours).
    argv.append("--qemu-opts=" + " ".join(qemu_options(lab_dir, spec, lab_cables)))
    return argv


def vng_env() -> dict[str, str]:
    """The environment for vng: it runs virtme-run through PATH, so the venv's bin goes first."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env
