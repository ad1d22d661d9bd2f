"""A fake of the agent boundary for host-control unit tests.

``FakeHosts`` stands where ``hil.host.hosts.Hosts`` stands; each host gets a
``FakeAgent`` holding a small model of its state (links, addresses, sysctls,
RDMA devices) that the agent's calls read and change, and a log of the calls.
Real sshd and netlink are used by the netns tests; this is for what the host
kernel here cannot do (RDMA) and for failure paths.

``RecordedAgent`` (``FakeAgent.recorded``) is a host recorded under
``tests/data/t6/<host>/`` (see its README): a copy of its file tree served
by ``cat``/``readlink -f``/``stat -c %a``/``tee``, its recorded commands
(``devlink dev param set`` changes the recorded ``devlink -j dev param show``), and
``driver_info``/``rdma_links`` parsed from its recorded ``ethtool -i`` and
``rdma -j link show``; a test changes the copy (``write``, ``record``) to
plant a fault.  ``t6_hosts`` builds the recorded T6 pair with its inventory,
``e810_hosts`` the recorded E810 pair (``tests/data/e810``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import posixpath
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hil.agent.client import AgentCallError
from hil.agent.protocol import ErrorKind
from hil.agent.types import AddressInfo, CommandResult, DriverInfo, LinkInfo, RdmaLink
from hil.errors import InputError
from hil.inventory import load
from hil.inventory.model import (
    FirmwarePolicy,
    Host,
    Inventory,
    Link,
    LinkEnd,
    PinnedDevlink,
    PinnedParam,
    Pull,
    Rnic,
    SshConfig,
)
from hil.inventory.modparams import MODULE_PARAMS

T6_DATA = Path(__file__).resolve().parent / "data" / "t6"
E810_DATA = T6_DATA.parent / "e810"
SIW_DESC = "Software iWARP stack"  # siw_main.c SIW_NODE_DESC_COMMON
# The one read of siw's kallsyms settings (hil/run/provider.py); it prints the names found.
KALLSYMS_GREP = "grep -o -w -F -e siw_netdev_down -e kasan_report /proc/kallsyms"
CXGB4_DESC = "cxgb4 Chelsio Communications"  # iw_cxgb4.h C4IW_NODE_DESC


@dataclass
class FakeLink:
    mtu: int = 1500
    up: bool = False
    addresses: set[str] = field(default_factory=set)
    mac: str | None = None


class FakeAgent:
    """One host's agent: ``state`` changed by calls, ``calls`` logged, ``fail`` injected."""

    @classmethod
    def recorded(cls, host: str, path: Path, workdir: Path) -> RecordedAgent:
        """The host recorded in ``path`` (``tests/data/t6/t6a``), copied to ``workdir``."""
        return RecordedAgent(host, path, workdir)

    def __init__(self, host: str, links: dict[str, FakeLink], rdma: bool = True) -> None:
        self.host = host
        self.links = links
        self.rdma = rdma
        self.rdma_devices: dict[str, str] = {}  # device -> netdev
        self.sysctls: dict[str, str] = {}
        self.files: dict[str, str] = {}  # host files beyond those the model implies
        self.iwpmd = True  # iwpmd runs (``pgrep -x iwpmd`` finds it)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, ErrorKind] = {}  # method -> error kind to raise

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> Any:
        self.calls.append((method, params))
        if method in self.fail:
            raise AgentCallError(self.host, method, self.fail[method], "injected", {})
        return getattr(self, f"_op_{method}")(**params)

    # -- operations, as the remote agent answers them ---------------------------

    def _link(self, netdev: str) -> FakeLink:
        if netdev not in self.links:
            raise AgentCallError(self.host, "link", "not_found", f"no {netdev}", {})
        return self.links[netdev]

    def _op_link(self, netdev: str) -> dict[str, Any]:
        link = self._link(netdev)
        return {
            "name": netdev,
            "index": 2,
            "mtu": link.mtu,
            "operstate": "UP" if link.up else "DOWN",
            "carrier": link.up,
            "up": link.up,
            "mac": link.mac,
            "kind": None,
        }

    def _op_set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> Any:
        before = self._op_link(netdev)
        link = self._link(netdev)
        link.mtu = link.mtu if mtu is None else mtu
        link.up = link.up if up is None else up
        return before

    def _op_wait_link(self, netdev: str, **_: Any) -> Any:
        return self._op_link(netdev)

    def _op_addresses(self, netdev: str) -> list[dict[str, Any]]:
        return [{"netdev": netdev, "address": a, "scope": 0} for a in self._link(netdev).addresses]

    def _op_add_address(self, netdev: str, address: str) -> None:
        self._link(netdev).addresses.add(address)

    def _op_delete_address(self, netdev: str, address: str) -> None:
        if address not in self._link(netdev).addresses:
            raise AgentCallError(
                self.host, "delete_address", "netlink", "gone", {"errname": "EADDRNOTAVAIL"}
            )
        self._link(netdev).addresses.discard(address)

    def _op_sysctl_get(self, name: str) -> str:
        return self.sysctls.setdefault(name, "0")

    def _op_sysctl_set(self, name: str, value: str) -> str:
        old = self._op_sysctl_get(name)
        self.sysctls[name] = value
        return old

    def host_files(self) -> dict[str, str]:
        """The files ``cat`` serves: each RDMA device's node_desc (siw for ``siw*``
        names, else a Chelsio one), iw_cxgb4's parameters at their defaults, ``files``."""
        found = {
            f"/sys/class/infiniband/{d}/node_desc": SIW_DESC if d.startswith("siw") else CXGB4_DESC
            for d in self.rdma_devices
        }
        found |= {p.path: p.default for p in MODULE_PARAMS["iw_cxgb4"].values()}
        return found | self.files

    def _op_run(self, argv: list[str], input: str | None = None) -> dict[str, Any]:
        files = self.host_files()
        match argv:
            case ["cat", *paths]:
                absent = [p for p in paths if p not in files]
                if absent:
                    return {"status": 1, "stdout": "", "stderr": f"cat: {absent[0]}: No such file"}
                return {
                    "status": 0,
                    "stdout": "".join(f"{files[p]}\n" for p in paths),
                    "stderr": "",
                }
            case ["pgrep", "-x", "iwpmd"]:
                return {
                    "status": 0 if self.iwpmd else 1,
                    "stdout": "100\n" * self.iwpmd,
                    "stderr": "",
                }
        return {"status": 0, "stdout": "", "stderr": ""}

    def _op_rdma_links(self) -> list[dict[str, Any]]:
        if not self.rdma:
            raise AgentCallError(self.host, "rdma_links", "rdma_unavailable", "no RDMA netlink", {})
        return [
            {"device": d, "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": n}
            for d, n in self.rdma_devices.items()
        ]

    def _op_rdma_add_siw(self, name: str, netdev: str) -> None:
        self._op_rdma_links()
        self.rdma_devices[name] = netdev

    def _op_rdma_delete_link(self, name: str) -> None:
        if self.rdma_devices.pop(name, None) is None:
            raise AgentCallError(self.host, "rdma_delete_link", "not_found", name, {})

    # -- the typed facade hil.agent.Agent offers --------------------------------

    def link(self, netdev: str) -> LinkInfo:
        return LinkInfo.from_wire(self.call("link", netdev=netdev))

    def set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> LinkInfo:
        return LinkInfo.from_wire(self.call("set_link", netdev=netdev, up=up, mtu=mtu))

    def wait_link(
        self,
        netdev: str,
        operstate: str | None = None,
        carrier: bool | None = None,
        timeout: float = 10.0,
    ) -> LinkInfo:
        return LinkInfo.from_wire(self.call("wait_link", timeout=timeout, netdev=netdev))

    def addresses(self, netdev: str) -> list[AddressInfo]:
        return [AddressInfo.from_wire(d) for d in self.call("addresses", netdev=netdev)]

    def add_address(self, netdev: str, address: Any) -> None:
        self.call("add_address", netdev=netdev, address=str(address))

    def sysctl(self, name: str) -> str:
        return str(self.call("sysctl_get", name=name))

    def set_sysctl(self, name: str, value: Any) -> str:
        return str(self.call("sysctl_set", name=name, value=str(value)))

    def run(
        self, argv: list[str], timeout: float = 60.0, input: str | None = None, check: bool = False
    ) -> CommandResult:
        r = self.call("run", timeout=timeout, argv=list(argv), input=input)
        return CommandResult(tuple(argv), r["status"], r["stdout"], r["stderr"])

    def rdma_links(self, timeout: float = 30.0) -> list[RdmaLink]:
        return [RdmaLink(**d) for d in self.call("rdma_links", timeout=timeout)]

    def add_siw(self, name: str, netdev: str) -> None:
        self.call("rdma_add_siw", name=name, netdev=netdev)

    def driver_info(self, netdev: str) -> DriverInfo:
        return DriverInfo(**self.call("ethtool_drvinfo", netdev=netdev))

    def _op_ethtool_drvinfo(self, netdev: str) -> dict[str, str]:
        self._link(netdev)
        return {"netdev": netdev, "driver": "", "version": "", "firmware": "", "bus_info": ""}


class RecordedAgent(FakeAgent):
    """A recorded host: files under ``fs/``, commands in ``commands.json`` (outputs in ``cmd/``).

    ``modes.json`` gives the modes ``stat -c %a`` answers (else 644 for a
    file, 755 for a directory), ``symlinks.json`` the symlinks ``readlink -f``
    follows (path -> absolute target).  Any other command answers status 127
    ``not recorded: ARGV`` so a test sees what is missing.
    """

    def __init__(self, host: str, path: Path, workdir: Path) -> None:
        self.root = workdir / host
        shutil.copytree(path, self.root)
        nets = self.root / "fs/sys/class/net"
        super().__init__(host, {n.name: FakeLink() for n in sorted(nets.iterdir())})

    def _json(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / name).read_text())
        return data

    def file(self, path: str) -> Path:
        """Where host path ``path`` lives in this fake's tree (to read or change it)."""
        return self.root / "fs" / path.lstrip("/")

    def write(self, path: str, text: str) -> None:
        """Set the content of host file ``path`` (created if absent)."""
        self.file(path).parent.mkdir(parents=True, exist_ok=True)
        self.file(path).write_text(text)

    def record(self, argv: str, stdout: str = "", status: int = 0, stderr: str = "") -> None:
        """Record (or replace) what command ``argv`` (joined by spaces) answers."""
        commands = self._json("commands.json")
        out = f"recorded-{len(commands)}.txt"
        (self.root / "cmd" / out).write_text(stdout)
        commands[argv] = {"status": status, "stdout": out, "stderr": stderr}
        (self.root / "commands.json").write_text(json.dumps(commands, indent=1))

    def forget(self, argv: str) -> None:
        """Drop command ``argv``: it answers 127 ``not recorded`` from now on."""
        commands = self._json("commands.json")
        del commands[argv]
        (self.root / "commands.json").write_text(json.dumps(commands, indent=1))

    def resolve(self, path: str) -> str | None:
        """``readlink -f path`` in this tree: symlinks followed; None when a parent is missing."""
        links: dict[str, str] = self._json("symlinks.json")
        done = "/"
        parts = [p for p in path.split("/") if p]
        for _hop in range(len(parts) + 40):
            if not parts:
                return done
            done = posixpath.join(done, parts.pop(0))
            if done in links:
                parts = [p for p in links[done].split("/") if p] + parts
                done = "/"
            elif not self.file(done).exists() and parts:
                return None
        raise AssertionError(f"symlink loop at {path}")

    def _result(self, status: int, stdout: str = "", stderr: str = "") -> dict[str, Any]:
        return {"status": status, "stdout": stdout, "stderr": stderr}

    def _cat(self, paths: list[str]) -> dict[str, Any]:
        out, errors = [], []
        for p in paths:
            real = self.file(self.resolve(p) or p)
            if real.is_file():
                out.append(real.read_text())
            else:
                why = "Is a directory" if real.is_dir() else "No such file or directory"
                errors.append(f"cat: {p}: {why}\n")
        return self._result(1 if errors else 0, "".join(out), "".join(errors))

    def _stat_mode(self, path: str) -> dict[str, Any]:
        real = self.file(self.resolve(path) or path)
        if not real.exists():
            return self._result(1, "", f"stat: cannot statx '{path}': No such file or directory\n")
        modes: dict[str, str] = self._json("modes.json")
        default = "755" if real.is_dir() else "644"
        return self._result(0, modes.get(self.resolve(path) or path, default) + "\n")

    def _tee(self, path: str, value: str) -> dict[str, Any]:
        real = self.file(self.resolve(path) or path)
        mode = self._json("modes.json").get(path, "644")
        if not real.is_file() or not int(mode[0]) & 2:
            why = "Permission denied" if real.is_file() else "No such file or directory"
            return self._result(1, "", f"tee: {path}: {why}\n")
        real.write_text(value)
        return self._result(0, value)

    def _devlink_set(self, handle: str, name: str, value: str, cmode: str) -> dict[str, Any]:
        """``devlink dev param set``: the recorded ``devlink -j dev param show`` changed.

        As ice answers it (ice_devlink.c, 6.1): ``ice_devlink_enable_iw_validate``
        refuses iWARP while RoCEv2 is on (and the reverse), with its extack
        message; switching the mode replugs the RDMA device in the other mode,
        whose ``node_type`` then says so (irdma ``irdma_init_iw_device``).
        """
        shown = (
            self.root / "cmd" / self._json("commands.json")["devlink -j dev param show"]["stdout"]
        )
        data = json.loads(shown.read_text())
        params = {p["name"]: p for p in data["param"].get(handle, [])}
        if name not in params or params[name]["values"][0]["cmode"] != cmode:
            return self._result(1, "", "Error: devlink: parameter not found.\n")
        other = {"enable_iwarp": "enable_roce", "enable_roce": "enable_iwarp"}.get(name)
        if value == "true" and other and params[other]["values"][0]["value"] is True:
            on = "iWARP" if other == "enable_iwarp" else "RoCEv2"
            return self._result(
                1,
                "",
                f"Error: ice: {on} is currently enabled. This device cannot enable iWARP and "
                "RoCEv2 simultaneously.\nkernel answer: Operation not supported\n",
            )
        old = params[name]["values"][0]["value"]
        params[name]["values"][0]["value"] = (
            value == "true"
            if isinstance(old, bool)
            else int(value)
            if isinstance(old, int)
            else value
        )
        shown.write_text(json.dumps(data))
        if other and value == "true":
            for device in self.file("/sys/class/infiniband").iterdir():
                node_type = "4: RNIC" if name == "enable_iwarp" else "1: CA"
                (device / "node_type").write_text(node_type + "\n")
        return self._result(0)

    def _op_run(self, argv: list[str], input: str | None = None) -> dict[str, Any]:
        match argv:
            case ["cat", *paths] if paths:
                return self._cat(paths)
            case ["readlink", "-f", path]:
                found = self.resolve(path)
                return self._result(0, found + "\n") if found else self._result(1)
            case ["stat", "-c", "%a", path]:
                return self._stat_mode(path)
            case ["tee", path] if input is not None:
                return self._tee(path, input)
            case [
                "devlink",
                "dev",
                "param",
                "set",
                handle,
                "name",
                name,
                "value",
                value,
                "cmode",
                c,
            ]:
                return self._devlink_set(handle, name, value, c)
        recorded = self._json("commands.json").get(" ".join(argv))
        if recorded is None:
            return self._result(127, "", f"not recorded: {shlex.join(argv)}\n")
        stdout = (self.root / "cmd" / recorded["stdout"]).read_text()
        return self._result(recorded["status"], stdout, recorded.get("stderr", ""))

    def _recorded(self, argv: str, method: str) -> str:
        r = self._op_run(argv.split())
        if r["status"] != 0:
            raise AgentCallError(self.host, method, "not_found", r["stderr"].strip(), {})
        out: str = r["stdout"]
        return out

    def _op_link(self, netdev: str) -> dict[str, Any]:
        self._link(netdev)
        base = f"/sys/class/net/{netdev}"
        up = self.file(f"{base}/operstate").read_text().strip() == "up"
        return {
            "name": netdev,
            "index": 4,
            "mtu": int(self.file(f"{base}/mtu").read_text()),
            "operstate": "UP" if up else "DOWN",
            "carrier": up,
            "up": up,
            "mac": self.file(f"{base}/address").read_text().strip(),
            "kind": None,
        }

    def _op_set_link(self, netdev: str, up: bool | None = None, mtu: int | None = None) -> Any:
        before = self._op_link(netdev)
        base = f"/sys/class/net/{netdev}"
        if mtu is not None:
            self.write(f"{base}/mtu", f"{mtu}\n")
        if up is not None:
            self.write(f"{base}/operstate", "up\n" if up else "down\n")
        return before

    def _op_ethtool_drvinfo(self, netdev: str) -> dict[str, str]:
        self._link(netdev)
        # ethtool -i's lines are "key: value"; the agent's ioctl gives the same fields
        lines = self._recorded(f"ethtool -i {netdev}", "ethtool_drvinfo").splitlines()
        info = dict(line.split(": ", 1) for line in lines if ": " in line)
        return {
            "netdev": netdev,
            "driver": info.get("driver", ""),
            "version": info.get("version", ""),
            "firmware": info.get("firmware-version", ""),
            "bus_info": info.get("bus-info", ""),
        }

    def _op_rdma_links(self) -> list[dict[str, Any]]:
        recorded = json.loads(self._recorded("rdma -j link show", "rdma_links"))
        return [
            {
                "device": d["ifname"],
                "port": d["port"],
                "state": d.get("state"),
                "physical_state": d.get("physical_state"),
                "netdev": d.get("netdev"),
            }
            for d in recorded
        ] + super()._op_rdma_links()


class FakeHosts:
    """``Hosts`` with a ``FakeAgent`` per host of ``inventory``."""

    def __init__(
        self,
        inventory: Inventory,
        store: Any = None,
        agents: dict[str, FakeAgent] | None = None,
    ) -> None:
        self.inventory = inventory
        self.store = store
        self.agents = agents or {
            name: FakeAgent(name, {r.netdev: FakeLink() for r in h.rnics})
            for name, h in inventory.hosts.items()
        }

    def __enter__(self) -> FakeHosts:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def recorded(self, name: str) -> RecordedAgent:
        """Host ``name``'s agent, a recorded one (``t6_hosts``)."""
        agent = self.agent(name)
        assert isinstance(agent, RecordedAgent), f"{name} is not a recorded host"
        return agent

    def host(self, name: str) -> Host:
        if name not in self.inventory.hosts:
            raise InputError(f"no host {name!r}")
        return self.inventory.hosts[name]

    def agent(self, name: str) -> FakeAgent:
        self.host(name)
        return self.agents[name]

    def call(self, name: str, method: str, /, timeout: float | None = None, **params: Any) -> Any:
        return self.agent(name).call(method, timeout=timeout or 30.0, **params)


def two_host_inventory(
    rdma_device: str | None = "cxgb4_0",
    fallback: str | None = None,
    sysctls: tuple[tuple[str, str], ...] = (),
) -> Inventory:
    """Hosts ``a`` and ``b``, port ``p0`` on netdev ``eth1``, link ``ab`` with an admin pull."""

    def host(name: str, ip: str) -> Host:
        rnic = Rnic(
            "p0",
            "eth1",
            "iw_cxgb4",
            rdma_device=rdma_device,
            address=ipaddress.ip_interface(ip),
            mtu=9000,
            fallback=fallback,  # type: ignore[arg-type]
        )
        return Host(name, SshConfig(host=name), rnics=(rnic,), sysctls=sysctls)

    link = Link("ab", LinkEnd("a", "p0"), LinkEnd("b", "p0"), pulls=(Pull("admin"),))
    return Inventory(
        Path("test.yaml"),
        hosts={"a": host("a", "198.18.0.1/24"), "b": host("b", "198.18.0.2/24")},
        links={"ab": link},
    )


T6_NETDEV = "enp129s0f4"
T6_FIRMWARE = "1.27.4.0"  # what tests/data/t6 records (ethtool -i, fw_ver)


def t6_inventory(
    firmware: str | None = T6_FIRMWARE,
    policy: FirmwarePolicy = "exact",
    speed: int | None = 100000,
    mtu: int | None = 9000,
    module_params: tuple[PinnedParam, ...] = (),
) -> Inventory:
    """The recorded T6 pair's inventory (``tests/data/t6/inventory.yaml``: hosts t6a/t6b,
    port p0 = cxgb4_0 on enp129s0f4, link t6), with these values on both ports."""
    inv = load(T6_DATA / "inventory.yaml")

    def host(h: Host) -> Host:
        port = dataclasses.replace(h.rnics[0], firmware=firmware, speed=speed, mtu=mtu)
        return dataclasses.replace(h, rnics=(port,), firmware_policy=policy)

    link = dataclasses.replace(inv.links["t6"], module_params=module_params)
    return dataclasses.replace(
        inv, hosts={n: host(h) for n, h in inv.hosts.items()}, links={"t6": link}
    )


def t6_hosts(workdir: Path, inventory: Inventory | None = None) -> FakeHosts:
    """``FakeHosts`` for the recorded T6 pair (``t6_inventory`` unless given) in ``workdir``."""
    inventory = inventory or t6_inventory()
    agents: dict[str, FakeAgent] = {
        name: FakeAgent.recorded(name, T6_DATA / name, workdir) for name in ("t6a", "t6b")
    }
    return FakeHosts(inventory, agents=agents)


E810_NETDEV = "ens1f0"
E810_FIRMWARE = "4.40"  # the NVM version tests/data/e810 records (ethtool -i, devlink fw.psid.api)


def e810_inventory(
    module_params: tuple[PinnedParam, ...] = (), devlink_params: tuple[PinnedDevlink, ...] = ()
) -> Inventory:
    """The recorded E810 pair's inventory (``tests/data/e810/inventory.yaml``: hosts
    e810a/e810b, port p0 = irdma0 on ens1f0, link e810), with these pins on the link."""
    inv = load(E810_DATA / "inventory.yaml")
    link = dataclasses.replace(
        inv.links["e810"], module_params=module_params, devlink_params=devlink_params
    )
    return dataclasses.replace(inv, links={"e810": link})


def e810_hosts(workdir: Path, inventory: Inventory | None = None) -> FakeHosts:
    """``FakeHosts`` for the recorded E810 pair (``e810_inventory`` unless given) in ``workdir``."""
    inventory = inventory or e810_inventory()
    agents: dict[str, FakeAgent] = {
        name: FakeAgent.recorded(name, E810_DATA / name, workdir) for name in ("e810a", "e810b")
    }
    return FakeHosts(inventory, agents=agents)
