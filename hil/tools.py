"""Every external command hil runs, where it runs it, and which package provides it.

This table is the one place that names them: call sites build their argv
with ``argv("ip", ...)`` (or take the name with ``name("initdb")``), which
refuses a command the table does not list, so a new command cannot slip in
without its package.  ``tests/test_tools.py`` checks, for each entry, that
the package really provides the command (``dpkg -S``) and that ``ci/install``
installs it; ``docs/host-control.md`` lists what lab hosts and the
controller need.

``where`` says where the command runs:

- ``controller``: the machine that runs pytest and the ``hil`` CLI;
- ``host``: a lab host, over SSH or through the agent (the netns test lab's
  hosts are namespaces of the controller, so they use its packages);
- ``guest``: a virtual-lab QEMU guest, whose root filesystem is the
  controller's (virtme-ng shares it), so these too come from the controller.

Not listed, because the user supplies them: the inventory's ``command``
pulls and ``command`` capture points (``hil/inventory/links.py``) and
``hil host exec``.  The agent keeps
its own short list (``hil/agent/remote/tools.py``; the zipapp cannot import
this module), which the test checks against this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Where = Literal["controller", "host", "guest"]
Source = Literal["debian", "pypi", "npm"]


@dataclass(frozen=True)
class Tool:
    """One external command: its name, its package, where it runs and what for."""

    command: str
    # The Debian package to install for it (the one that owns the file, or a
    # package depending on that one directly, e.g. python3 -> python3-minimal);
    # for source "pypi"/"npm" the PyPI or npm package.
    package: str
    where: tuple[Where, ...]
    purpose: str
    source: Source = "debian"
    # Where hil runs it from when not looked up on PATH: an absolute path, a
    # glob (PostgreSQL's versioned bindir), or, for npm, a path in the repository.
    path: str | None = None
    # Why hil works without it, for commands only some systems have.
    optional: str | None = None


_C: tuple[Where, ...] = ("controller",)
_H: tuple[Where, ...] = ("host",)
_G: tuple[Where, ...] = ("guest",)
_HG: tuple[Where, ...] = ("host", "guest")
_CG: tuple[Where, ...] = ("controller", "guest")
_ALL: tuple[Where, ...] = ("controller", "host", "guest")

TOOLS: tuple[Tool, ...] = (
    # -- lab hosts: what the SSH layer, the agent and host control run -----------------
    Tool(
        "python3",
        "python3",
        ("controller", "host"),
        "runs the agent zipapp (Host.python, >= 3.9) and its CM workers; the controller's venv",
    ),
    Tool(
        "sh",
        "dash",
        _ALL,
        "wraps a started process to report its process group (hil/ssh/session.py); "
        "the netns lab's and the guests' boot",
    ),
    Tool("timeout", "coreutils", _H, "bounds every SSH command on the host (hil/ssh/session.py)"),
    Tool("sudo", "sudo", _H, "root for the agent and tcpdump where the inventory says ssh.sudo"),
    Tool("kill", "procps", _H, "signals a started process's group (agent, tcpdump; bench)"),
    Tool("rm", "coreutils", _H, "removes a fetched packet capture (hil/wire/capture.py)"),
    Tool(
        "cat",
        "coreutils",
        _HG,
        "reads sysfs: an RDMA device's node_desc, link speed, module parameters; /proc/uptime "
        "for the crash watch's liveness probe; guest boot",
    ),
    Tool(
        "readlink", "coreutils", _H, "an RDMA device's parent driver in sysfs (hil/host/rdmadev.py)"
    ),
    Tool("grep", "grep", _H, "whether the kernel has a function (hil/run/provider.py)"),
    Tool("stat", "coreutils", _H, "whether a kernel module is loaded (hil/host/modparams.py)"),
    Tool("tee", "coreutils", _H, "sets a module parameter in sysfs (hil/host/modparams.py)"),
    Tool("true", "coreutils", _HG, "the SSH health check of lab readiness (hil/lab/readiness.py)"),
    Tool("uname", "coreutils", _H, "the kernel release in environment.properties"),
    Tool(
        "dpkg-query",
        "dpkg",
        ("controller", "host"),
        "rdma-core's version on a host (report); linux-source's version (lab kernel)",
    ),
    Tool(
        "rpm",
        "rpm",
        _H,
        "rdma-core's version on RPM distributions (report)",
        optional="tried only when dpkg-query has no rdma-core, i.e. on RPM distributions",
    ),
    Tool(
        "ping",
        "iputils-ping",
        _H,
        "the pair's data path at pair setup (hil/host/pairsetup.py); an impairment's proof "
        "(hil/host/impair.py)",
    ),
    Tool("nft", "nftables", _H, "the blackhole link pull (hil/host/linkctl.py)"),
    Tool("ss", "iproute2", _H, "a listener's accept queue (hil/cm/regressions/held.py)"),
    Tool(
        "tc",
        "iproute2",
        _H,
        "netem: a race's egress hold (hil/host/netdelay.py), impairments (hil/host/impair.py)",
    ),
    Tool("tcpdump", "tcpdump", _H, "captures a link at its capture points (hil/wire/capture.py)"),
    Tool(
        "ethtool",
        "ethtool",
        _HG,
        "a port's NIC counters (ethtool -S) before and after a test (hil/host/hwevidence.py); "
        "a middlebox's offloads turned off (hil/host/impair.py; the lab's at its boot)",
    ),
    Tool(
        "devlink",
        "iproute2",
        _H,
        "an E810's RDMA mode (enable_iwarp) and NVM versions (hil/host/irdmachecks.py)",
    ),
    Tool(
        "rdma",
        "iproute2",
        _HG,
        "RDMA devices, links, resources and siw devices (the agent); guests create siw at boot",
    ),
    Tool(
        "sftp-server",
        "openssh-sftp-server",
        _HG,
        "sshd's sftp subsystem: agent uploads and packet-capture downloads",
        path="/usr/lib/openssh/sftp-server",
    ),
    Tool(
        "sshd",
        "openssh-server",
        ("controller", "guest"),
        "the netns test lab's hosts and the virtual-lab guests",
        path="/usr/sbin/sshd",
    ),
    Tool(
        "cmtime",
        "rdmacm-utils",
        _H,
        "RDMA CM connection rate (bench/cm_rate.py); traffic for the wire judge's lab test; "
        "a tool peer against hil's listener (hil/cm/toolpeers.py)",
    ),
    Tool(
        "ucmatose",
        "rdmacm-utils",
        _H,
        "rdma-core's CM example with SENDs each way: a tool peer of hil (hil/cm/toolpeers.py)",
    ),
    Tool("rping", "rdmacm-utils", _H, "rdma-core's own traffic for the wire judge's lab test"),
    Tool(
        "ib_send_bw",
        "perftest",
        _H,
        "perftest's SEND bandwidth test, its QPs over rdma_cm (-R): a tool peer of hil "
        "(hil/cm/toolpeers.py)",
    ),
    Tool("pgrep", "procps", _H, "is iwpmd running (readiness); bench's cmtime server"),
    Tool("pkill", "procps", _H, "ends an admin pull's async event watch (hil/cm/asyncwatch.py)"),
    Tool("ls", "coreutils", _H, "whether the async event watch holds the device open"),
    Tool(
        "stdbuf",
        "coreutils",
        _H,
        "line-buffers the async event watch's output and a tool peer's (hil/cm/toolpeers.py)",
    ),
    Tool(
        "ibv_asyncwatch",
        "ibverbs-utils",
        _H,
        "the port error an admin link pull raises (hil/cm/asyncwatch.py)",
    ),
    # -- the controller -------------------------------------------------------------------
    Tool(
        "ip",
        "iproute2",
        _ALL,
        "the netns test lab's namespaces and veths (tests/netnslab/); guest NICs at boot; "
        "a peer host's route to its DUT (hil/host/peerroute.py)",
    ),
    Tool("unshare", "util-linux", _C, "a private /root for the netns lab's sshd"),
    Tool("mount", "mount", _CG, "the private /root of the netns lab's sshd and of guests"),
    Tool("ssh-keygen", "openssh-client", _C, "keys of the netns lab and the virtual lab"),
    Tool("runuser", "util-linux", _C, "PostgreSQL as postgres when root (the tests' cluster)"),
    Tool(
        "initdb",
        "postgresql",
        _C,
        "a private PostgreSQL cluster for the store's tests",
        path="/usr/lib/postgresql/*/bin/initdb",
    ),
    Tool(
        "pg_ctl",
        "postgresql",
        _C,
        "starts and stops that cluster",
        path="/usr/lib/postgresql/*/bin/pg_ctl",
    ),
    Tool("vng", "virtme-ng", _C, "boots the virtual-lab guests", source="pypi"),
    Tool("virtme-configkernel", "virtme-ng", _C, "configures the lab kernel", source="pypi"),
    Tool("qemu-system-x86_64", "qemu-system-x86", _C, "the guests' machine, run by vng"),
    Tool("tar", "tar", _C, "extracts linux-source for the lab kernel"),
    Tool("make", "build-essential", _C, "builds the lab kernel"),
    Tool("gcc", "build-essential", _C, "compiles the lab kernel (run by make)"),
    Tool("bc", "bc", _C, "lab kernel build (run by make)"),
    Tool("flex", "flex", _C, "lab kernel build (run by make)"),
    Tool("bison", "bison", _C, "lab kernel build (run by make)"),
    Tool("cpio", "cpio", _C, "lab kernel build (run by make)"),
    Tool("xz", "xz-utils", _C, "lab kernel build: unpacks linux-source's .tar.xz (run by tar)"),
    Tool("pahole", "dwarves", _C, "lab kernel build: BTF (run by make)"),
    Tool("ccache", "ccache", _C, "lab kernel build: keeps compiles between rebuilds"),
    Tool("patch", "patch", _C, "applies a mutant's diff to a copy of the lab kernel tree"),
    Tool(
        "allure",
        "allure-commandline",
        _C,
        "generates the Allure report (hil/report/pipeline.py)",
        source="npm",
        path=".tools/node_modules/.bin/allure",
    ),
    Tool("node", "nodejs", _C, "runs the allure command"),
    Tool("java", "default-jre-headless", _C, "the Allure 2 generator, run by allure"),
    Tool(
        "tshark",
        "tshark",
        _C,
        "decodes packet captures with Wireshark's iWARP dissectors (hil/wire/tshark.py)",
    ),
    # -- only inside virtual-lab guests (hil/lab/guest_boot.sh) ----------------------------
    Tool("mkdir", "coreutils", _G, "guest boot"),
    Tool("chmod", "coreutils", _G, "guest boot"),
    Tool("cp", "coreutils", _G, "guest boot"),
    Tool("tr", "coreutils", _G, "guest boot"),
    Tool("sed", "sed", _G, "guest boot: unlocks root in the guest's /etc/shadow"),
    Tool("hostname", "hostname", _G, "guest boot"),
)

_BY_COMMAND = {t.command: t for t in TOOLS}
# The kernel build's prerequisites that hil checks before starting it.
KERNEL_BUILD = ("make", "gcc", "ccache", "bc", "flex", "bison", "cpio", "xz", "pahole")


def tool(command: str) -> Tool:
    """The table's entry for ``command``; KeyError saying what to do when it has none."""
    try:
        return _BY_COMMAND[command]
    except KeyError:
        raise KeyError(
            f"hil runs {command!r} but hil/tools.py does not list it: add a Tool with its "
            "Debian package, and the package to ci/install"
        ) from None


def name(command: str) -> str:
    """``command``'s name, checked against the table (for argv built around a path)."""
    return tool(command).command


def executable(command: str) -> str:
    """What to execute for ``command``: its fixed absolute path, else its name (PATH)."""
    t = tool(command)
    if t.path and t.path.startswith("/") and "*" not in t.path:
        return t.path
    return t.command


def argv(command: str, *args: str) -> list[str]:
    """``[command, *args]`` for a command the table lists (its path where it has one)."""
    return [executable(command), *args]


def packages(where: Where, source: Source = "debian") -> list[str]:
    """The sorted packages of the non-optional commands that run ``where``."""
    return sorted(
        {t.package for t in TOOLS if where in t.where and t.source == source and t.optional is None}
    )
