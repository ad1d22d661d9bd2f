"""A lab of network namespaces with real sshd, for hil's own tests and benches.

``NetnsLab(hosts=N)`` builds N hosts as network namespaces named
``hil-<pid>-<n>``.  Each runs its own ``/usr/sbin/sshd`` on all of its
addresses, reached from the test process over a management veth pair
(root side ``198.19.X.1/30``, namespace side ``198.19.X.2/30`` on ``mgmt0``;
X is picked free, so parallel labs do not collide).  Data cables form a
chain: cable k joins host k and host k+1 on ``198.18.k.0/24`` (host k is
``.1``, host k+1 is ``.2``).  A host's data netdevs are ``data0``,
``data1``... (ports ``p0``, ``p1``...) in cable order, so with two hosts
``data0`` 198.18.0.1/24 is cabled to ``data0`` 198.18.0.2/24.

sshd also listens on port 2222 (``ALT_SSH_PORT``; known_hosts lists port 22
only).  A client key, per-host host keys, a known_hosts file and an inventory YAML
are made for the run in a temp directory.  Everything is undone on exit,
also when building fails or is interrupted; ``cleanup_stale()`` removes what
labs of dead processes left behind.
"""

from __future__ import annotations

import fcntl
import ipaddress
import itertools
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.inventory.model import Inventory
from netnslab import files

log = logging.getLogger("netnslab.lab")

SSHD = tools.executable("sshd")
ALT_SSH_PORT = files.ALT_SSH_PORT
MGMT_NET = ipaddress.IPv4Network("198.19.0.0/16")
_PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without it
_ALLOC_LOCK = Path("/run/lock/hil-netnslab.lock")
_NETNS_RE = re.compile(r"^hil-(\d+)-\d+$")
_TMP_PREFIX = "hil-netnslab-"
# sshd runs in its own mount namespace with an empty tmpfs on /root, like a
# fresh host: the machine's own dotfiles (a slow ~/.bashrc, keys) stay out of
# the lab, and whatever tests leave in the home vanishes with the sshd.
_PRIVATE_HOME = [
    *tools.argv("unshare", "--mount", "--propagation", "private"),
    *tools.argv("sh", "-c"),
    f'{tools.name("mount")} -t tmpfs -o mode=0700 hil-netnslab-home /root && exec "$@"',
    "hil-netnslab",
]
_COMMAND_TIMEOUT = 30.0
_SSHD_START_TIMEOUT = 10.0
_ids = itertools.count()


@dataclass(frozen=True)
class LabPort:
    """A data port: ``data<i>`` in the namespace, cabled to a peer host's port."""

    name: str
    netdev: str
    address: ipaddress.IPv4Interface
    peer_host: int
    peer_port: str


@dataclass(frozen=True)
class LabHost:
    """One namespace host of the lab."""

    index: int
    name: str  # inventory host name
    netns: str
    mgmt_address: ipaddress.IPv4Interface  # namespace side, where sshd is reached
    root_veth: str  # root-namespace end of the management veth
    ports: tuple[LabPort, ...]

    def port(self, name: str) -> LabPort:
        return next(p for p in self.ports if p.name == name)


@dataclass(frozen=True)
class Cable:
    """A data veth pair between ports of two hosts: an inventory link."""

    name: str
    a: tuple[int, str]  # (host index, port name)
    b: tuple[int, str]


def chain(size: int) -> tuple[list[tuple[LabPort, ...]], tuple[Cable, ...]]:
    """Ports per host and the cables of a chain of ``size`` hosts."""
    ports: list[list[LabPort]] = [[] for _ in range(size)]
    cables = []
    for k in range(size - 1):
        a, b = k, k + 1
        pa, pb = f"p{len(ports[a])}", f"p{len(ports[b])}"
        ports[a].append(LabPort(pa, f"data{pa[1:]}", _data_address(k, 1), b, pb))
        ports[b].append(LabPort(pb, f"data{pb[1:]}", _data_address(k, 2), a, pa))
        cables.append(Cable(f"ns{a}-ns{b}", (a, pa), (b, pb)))
    return [tuple(p) for p in ports], tuple(cables)


def _data_address(cable: int, host: int) -> ipaddress.IPv4Interface:
    return ipaddress.IPv4Interface(f"198.18.{cable}.{host}/24")


class NetnsLab:
    """Build with ``with NetnsLab(hosts=2) as lab:``; see the module docstring."""

    def __init__(self, hosts: int = 2) -> None:
        if hosts < 1:
            raise ValueError("a lab has at least one host")
        self.size = hosts
        self.hosts: tuple[LabHost, ...] = ()
        self.cables: tuple[Cable, ...] = ()
        self.tmpdir = Path()
        self._undo: list[tuple[str, Callable[[], object]]] = []
        self._sshd: list[subprocess.Popen[bytes]] = []

    # -- paths of the files made for the run --------------------------------

    @property
    def client_key(self) -> Path:
        return self.tmpdir / "client_key"

    @property
    def known_hosts(self) -> Path:
        return self.tmpdir / "known_hosts"

    @property
    def inventory_path(self) -> Path:
        return self.tmpdir / "inventory.yaml"

    def host_key(self, index: int) -> Path:
        """The private host key file of host ``index`` (``.pub`` beside it)."""
        return self.tmpdir / f"host{index}" / "ssh_host_ed25519_key"

    def sshd_log(self, index: int) -> Path:
        return self.tmpdir / f"host{index}" / "sshd.log"

    def inventory(self) -> Inventory:
        """The lab's inventory file, loaded and validated by hil.inventory."""
        from hil.inventory import load

        return load(self.inventory_path)

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> NetnsLab:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(quiet=exc_type is not None)

    def close(self, quiet: bool = False) -> None:
        """Undo everything, newest first; each failing step is reported, the rest still run."""
        failures = []
        interrupted: BaseException | None = None
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except KeyboardInterrupt as e:
                interrupted = e  # a second Ctrl-C must not leave half a lab behind
            except Exception as e:  # noqa: BLE001 - keep tearing down, report below
                failures.append(f"{what}: {e}")
        if interrupted is not None:
            raise interrupted
        if failures and not quiet:
            raise LabError("netns lab teardown: " + "; ".join(failures))
        for f in failures:
            log.error("netns lab teardown: %s", f)

    def exec(
        self,
        index: int,
        argv: list[str],
        *,
        timeout: float = _COMMAND_TIMEOUT,
        check: bool = True,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside host ``index``'s namespace (``ip netns exec``)."""
        return _run(
            tools.argv("ip", "netns", "exec", self.hosts[index].netns, *argv),
            timeout=timeout,
            check=check,
            input=input,
        )

    def sshd_pid(self, index: int) -> int:
        return self._sshd[index].pid

    # -- building -------------------------------------------------------------

    def _defer(self, what: str, undo: Callable[[], object]) -> None:
        self._undo.append((what, undo))

    def _build(self) -> None:
        self.tmpdir = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
        self._defer(f"remove {self.tmpdir}", lambda: shutil.rmtree(self.tmpdir))
        files.make_key(self.client_key, "hil-netnslab-client")
        shutil.copy(self.client_key.with_suffix(".pub"), self.tmpdir / "authorized_keys")
        ports, self.cables = chain(self.size)
        with _allocation_lock():
            nets = _free_mgmt_nets(self.size)
            self.hosts = tuple(self._add_host(i, nets[i], ports[i]) for i in range(self.size))
        for cable in self.cables:
            self._add_cable(cable)
        _PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        for host in self.hosts:
            self._start_sshd(host)
        for host in self.hosts:
            self._wait_sshd(host)
        files.write_known_hosts(self)
        files.write_inventory(self)

    def _add_host(
        self, index: int, net: ipaddress.IPv4Network, ports: tuple[LabPort, ...]
    ) -> LabHost:
        n = next(_ids)
        netns = f"hil-{os.getpid()}-{n}"
        root_veth = f"hil{os.getpid()}m{n}"
        _run(tools.argv("ip", "netns", "add", netns))
        self._defer(f"delete namespace {netns}", lambda: _delete_netns(netns))
        _run(tools.argv("ip", "-n", netns, "link", "set", "lo", "up"))
        _run(
            tools.argv(
                "ip",
                "link",
                "add",
                root_veth,
                "type",
                "veth",
                "peer",
                "name",
                "mgmt0",
                "netns",
                netns,
            )
        )
        self._defer(f"delete {root_veth}", lambda: _delete_link(root_veth))
        root_side, ns_side = (ipaddress.IPv4Interface(f"{a}/{net.prefixlen}") for a in net.hosts())
        _run(tools.argv("ip", "addr", "add", str(root_side), "dev", root_veth))
        _run(tools.argv("ip", "link", "set", root_veth, "up"))
        _run(tools.argv("ip", "-n", netns, "addr", "add", str(ns_side), "dev", "mgmt0"))
        _run(tools.argv("ip", "-n", netns, "link", "set", "mgmt0", "up"))
        return LabHost(index, f"ns{index}", netns, ns_side, root_veth, ports)

    def _add_cable(self, cable: Cable) -> None:
        """The veth pair of a cable, straight into both namespaces, addressed and up."""
        ends = [(self.hosts[i], self.hosts[i].port(name)) for i, name in (cable.a, cable.b)]
        (ha, pa), (hb, pb) = ends
        _run(
            tools.argv(
                "ip",
                "link",
                "add",
                "name",
                pa.netdev,
                "netns",
                ha.netns,
                "type",
                "veth",
                "peer",
                "name",
                pb.netdev,
                "netns",
                hb.netns,
            )
        )
        for host, port in ends:
            _run(
                tools.argv(
                    "ip", "-n", host.netns, "addr", "add", str(port.address), "dev", port.netdev
                )
            )
            _run(tools.argv("ip", "-n", host.netns, "link", "set", port.netdev, "up"))

    def _start_sshd(self, host: LabHost) -> None:
        config = files.write_sshd_config(self, host)
        with open(self.sshd_log(host.index), "wb") as out:
            proc = subprocess.Popen(
                tools.argv(
                    "ip",
                    "netns",
                    "exec",
                    host.netns,
                    *_PRIVATE_HOME,
                    SSHD,
                    "-D",
                    "-e",
                    "-f",
                    str(config),
                ),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._sshd.append(proc)
        self._defer(f"stop sshd of {host.name}", lambda: _stop(proc))

    def _wait_sshd(self, host: LabHost) -> None:
        """Until sshd accepts TCP on the management address; its log in the error."""
        proc = self._sshd[host.index]
        deadline = time.monotonic() + _SSHD_START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                socket.create_connection((str(host.mgmt_address.ip), 22), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        tail = self.sshd_log(host.index).read_text(errors="replace")[-800:]
        raise LabError(f"sshd of {host.name} ({host.netns}) did not start: {tail.strip()}")


def cleanup_stale() -> list[str]:
    """Remove namespaces and temp dirs of labs whose process is gone; returns what went."""
    removed = []
    listing = _run(tools.argv("ip", "netns", "list")).stdout
    for name in (line.split()[0] for line in listing.splitlines() if line.strip()):
        m = _NETNS_RE.match(name)
        if m and not _alive(int(m.group(1))):
            _delete_netns(name)
            removed.append(name)
    for path in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*"):
        pid = path.name[len(_TMP_PREFIX) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run(
    argv: list[str],
    *,
    timeout: float = _COMMAND_TIMEOUT,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, input=input, check=False
        )
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(argv)} did not finish within {timeout:g}s") from None
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def _delete_netns(netns: str) -> None:
    """Kill whatever still runs in the namespace, then delete it (its veths go too)."""
    pids = _run(tools.argv("ip", "netns", "pids", netns), check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    _run(tools.argv("ip", "netns", "del", netns))


def _delete_link(name: str) -> None:
    if Path(f"/sys/class/net/{name}").exists():
        _run(tools.argv("ip", "link", "del", name))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class _allocation_lock:
    """A host-wide lock while a lab picks and claims management subnets."""

    def __enter__(self) -> None:
        _ALLOC_LOCK.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(_ALLOC_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)


def _free_mgmt_nets(count: int) -> list[ipaddress.IPv4Network]:
    """``count`` /30 subnets of MGMT_NET that no root-namespace address uses."""
    used = set()
    for link in json.loads(_run(tools.argv("ip", "-j", "-4", "addr", "show")).stdout or "[]"):
        for a in link.get("addr_info", []):
            used.add(ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}").network)
    free = []
    for net in MGMT_NET.subnets(new_prefix=30):
        if not any(net.overlaps(u) for u in used):
            free.append(net)
            if len(free) == count:
                return free
    raise LabError(f"no free /30 left in {MGMT_NET} for the lab's management links")
