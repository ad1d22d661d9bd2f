"""Provider detection over a fake agent boundary: sysfs and sysctls as a host would answer.

The real thing (siw guests, a siw fallback for an inventory that claims
iw_cxgb4) is tests/run/test_pairrun_lab.py; these cover what the virtual lab
cannot show: a Chelsio RNIC, a mixed pair, a driver with no profile.  The
recorded T6 pair (tests/data/t6) is in test_provider_t6.py.
"""

from __future__ import annotations

import ipaddress

import pytest

from hil.agent.types import CommandResult
from hil.errors import InputError, RemoteError
from hil.host.pairsetup import PairState, PortState
from hil.inventory.model import Host, Link, LinkEnd, Pair, Rnic, SshConfig
from hil.judge.profiles import SIW, PairProfile, cxgb4_profile, siw_profile
from hil.judge.provenance import propose_s
from hil.judge.siwprofile import SIW_LOCAL_CLOSE_KASAN
from hil.run.provider import detect

SIW_DESC = "Software iWARP stack"
CXGB4_DESC = "cxgb4 Chelsio Communications"
EP_TIMEOUT = "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"


class SysfsAgent:
    """A host's agent that knows a few files, sysctls and the kernel's functions
    (``/proc/kallsyms``; None: it cannot be read)."""

    def __init__(
        self,
        files: dict[str, str],
        sysctls: dict[str, str] | None = None,
        functions: frozenset[str] | None = frozenset({"siw_netdev_down"}),
    ) -> None:
        self.files = files
        self.sysctls = sysctls or {}
        self.functions = functions

    def run(self, argv: list[str], timeout: float = 60.0) -> CommandResult:
        path = argv[-1]
        if argv[0].endswith("grep") and path == "/proc/kallsyms":
            if self.functions is None:
                return CommandResult(tuple(argv), 2, "", "grep: /proc/kallsyms: Permission denied")
            asked = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-e"]
            listed = [name for name in asked if name in self.functions]
            out = "".join(f"{name}\n" for name in listed)
            return CommandResult(tuple(argv), 0 if listed else 1, out, "")
        if argv[0] == "readlink":
            found = self.files.get(path)
            return CommandResult(tuple(argv), 0 if found else 1, found or "", "")
        if path in self.files:
            return CommandResult(tuple(argv), 0, self.files[path] + "\n", "")
        return CommandResult(tuple(argv), 1, "", f"cat: {path}: No such file or directory")

    def sysctl(self, name: str) -> str:
        return self.sysctls[name]


class Hosts:
    def __init__(self, agents: dict[str, SysfsAgent]) -> None:
        self.agents = agents

    def agent(self, name: str) -> SysfsAgent:
        return self.agents[name]


def _pair(device: str = "cxgb4_0") -> Pair:
    rnics = [
        Rnic(
            "p0",
            "eth1",
            "iw_cxgb4",
            rdma_device=device,
            fallback="siw",
            address=ipaddress.ip_interface(f"198.18.0.{i}/24"),
        )
        for i in (1, 2)
    ]
    hosts = [
        Host(n, SshConfig(host="127.0.0.1"), rnics=(r,)) for n, r in zip("ab", rnics, strict=True)
    ]
    return Pair(Link("a-b", LinkEnd("a", "p0"), LinkEnd("b", "p0")), hosts[0], hosts[1])


def _state(dev_a: str, dev_b: str) -> PairState:
    return PairState(
        "a-b",
        PortState("a", "p0", "eth1", None, 1500, dev_a, False),
        PortState("b", "p0", "eth1", None, 1500, dev_b, False),
        True,
    )


def _siw(
    retries2: str,
    syn_retries: str = "6",
    functions: frozenset[str] | None = frozenset({"siw_netdev_down"}),
) -> SysfsAgent:
    return SysfsAgent(
        {"/sys/class/infiniband/siw_eth1/node_desc": SIW_DESC},
        {"net.ipv4.tcp_retries2": retries2, "net.ipv4.tcp_syn_retries": syn_retries},
        functions,
    )


def _cxgb4(ep_timeout: str, desc: str = CXGB4_DESC) -> SysfsAgent:
    return SysfsAgent(
        {
            "/sys/class/infiniband/cxgb4_0/node_desc": desc,
            EP_TIMEOUT: ep_timeout,
            "/sys/class/infiniband/cxgb4_0/device/driver": "/sys/bus/pci/drivers/cxgb4",
        }
    )


def test_a_siw_fallback_is_seen_and_each_hosts_tcp_retries2_shapes_its_profile() -> None:
    provider = detect(
        Hosts({"a": _siw("5"), "b": _siw("8")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "siw_eth1"),
    )
    assert provider.driver == "siw"
    assert [h.fallback for h in provider.hosts] == [True, True]
    assert provider.profile == PairProfile((("a", siw_profile(5)), ("b", siw_profile(8))))
    assert provider.profile.name == "siw"
    assert provider.describe("a-b") == (
        "pair a-b runs siw on both hosts (siw fallback: the inventory says iw_cxgb4)"
    )


def test_each_hosts_tcp_syn_retries_bounds_its_unreachable_connect() -> None:
    provider = detect(
        Hosts({"a": _siw("5", syn_retries="3"), "b": _siw("5")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "siw_eth1"),
    )
    a, b = provider.profile.of("a"), provider.profile.of("b")
    assert (a.unreachable_bound_s, b.unreachable_bound_s) == (15.0 + 3.0, 127.0 + 3.0)
    assert a.unreachable_connect_error == "ETIMEDOUT"


def test_a_siw_without_its_netdev_down_walk_promises_an_admin_pull_what_a_carrier_pull_does() -> (
    None
):
    """6.12 (60dc7fcafea8) has no siw_netdev_down: an admin down ends nothing by itself."""
    provider = detect(
        Hosts({"a": _siw("5", functions=frozenset()), "b": _siw("5")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "siw_eth1"),
    )
    a, b = provider.profile.of("a"), provider.profile.of("b")
    assert a.admin_down_bound_s is None and b.admin_down_bound_s == SIW.admin_down_bound_s
    assert a.link_pull_bound_s("admin", False) == a.link_pull_bound_s("carrier", False)
    assert a.flap_bound_s("admin", 2.0) is None  # a short flap lives on, as a carrier's


def test_a_host_whose_kallsyms_cannot_be_read_is_named() -> None:
    with pytest.raises(RemoteError, match="a: reading /proc/kallsyms failed: grep: /proc/kall"):
        detect(
            Hosts({"a": _siw("5", functions=None), "b": _siw("5")}),  # type: ignore[arg-type]
            _pair(),
            _state("siw_eth1", "siw_eth1"),
        )


def test_two_hosts_with_the_same_settings_share_one_plain_profile() -> None:
    provider = detect(
        Hosts({"a": _siw("5"), "b": _siw("5")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "siw_eth1"),
    )
    assert provider.profile == siw_profile(5)


def test_chelsio_by_node_desc_with_both_hosts_ep_timeout() -> None:
    provider = detect(
        Hosts({"a": _cxgb4("20"), "b": _cxgb4("7")}),  # type: ignore[arg-type]
        _pair(),
        _state("cxgb4_0", "cxgb4_0"),
    )
    assert provider.driver == "iw_cxgb4"
    assert [h.settings for h in provider.hosts] == [
        {"ep_timeout_secs": "20"},
        {"ep_timeout_secs": "7"},
    ]
    assert provider.profile == PairProfile((("a", cxgb4_profile(20)), ("b", cxgb4_profile(7))))
    assert provider.profile.of("b").local_close_bound_s == 7 + 5
    assert not any(h.fallback for h in provider.hosts)
    assert provider.describe("a-b") == "pair a-b runs iw_cxgb4 on both hosts"


def test_chelsio_by_its_pci_driver_when_node_desc_says_nothing_known() -> None:
    hosts = Hosts({"a": _cxgb4("60", desc="renamed"), "b": _cxgb4("60")})
    provider = detect(hosts, _pair(), _state("cxgb4_0", "cxgb4_0"))  # type: ignore[arg-type]
    assert provider.driver == "iw_cxgb4"


def test_a_mixed_pair_is_judged_by_each_hosts_own_profile() -> None:
    provider = detect(
        Hosts({"a": _siw("5"), "b": _cxgb4("60")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "cxgb4_0"),
    )
    assert provider.driver == "siw+iw_cxgb4"
    assert provider.profile == PairProfile((("a", siw_profile(5)), ("b", cxgb4_profile(60))))
    assert provider.profile.name == "siw+iw_cxgb4"
    assert provider.describe("a-b") == (
        "pair a-b runs siw on a and iw_cxgb4 on b (siw fallback on a: the inventory says iw_cxgb4)"
    )


def test_a_driver_without_a_profile_is_named() -> None:
    rxe = SysfsAgent(
        {
            "/sys/class/infiniband/cxgb4_0/node_desc": "rxe",
            "/sys/class/infiniband/cxgb4_0/device/driver": "/sys/bus/x/drivers/rdma_rxe",
        }
    )
    provider = detect(
        Hosts({"a": rxe, "b": rxe}),  # type: ignore[arg-type]
        _pair(),
        _state("cxgb4_0", "cxgb4_0"),
    )
    with pytest.raises(InputError, match="no contract profile for RDMA driver 'rdma_rxe'"):
        _ = provider.profile


def test_a_setting_that_is_no_number_names_the_host() -> None:
    provider = detect(
        Hosts({"a": _cxgb4("sixty"), "b": _cxgb4("60")}),  # type: ignore[arg-type]
        _pair(),
        _state("cxgb4_0", "cxgb4_0"),
    )
    with pytest.raises(RemoteError, match="a: ep_timeout_secs is not a number: 'sixty'"):
        _ = provider.profile


def test_an_unreadable_setting_names_host_and_file() -> None:
    broken = SysfsAgent({"/sys/class/infiniband/cxgb4_0/node_desc": CXGB4_DESC})
    with pytest.raises(RemoteError, match=f"a: cannot read {EP_TIMEOUT}"):
        detect(
            Hosts({"a": broken, "b": _cxgb4("60")}),  # type: ignore[arg-type]
            _pair(),
            _state("cxgb4_0", "cxgb4_0"),
        )


def test_a_kasan_kernel_gets_the_close_bound_measured_on_the_debug_lab() -> None:
    """kasan_report in kallsyms: the debug lab's kernel, whose closes are slower."""
    debug = frozenset({"siw_netdev_down", "kasan_report"})
    provider = detect(
        Hosts({"a": _siw("5", functions=debug), "b": _siw("5")}),  # type: ignore[arg-type]
        _pair(),
        _state("siw_eth1", "siw_eth1"),
    )
    a, b = provider.profile.of("a"), provider.profile.of("b")
    assert a.local_close_bound_s == propose_s(SIW_LOCAL_CLOSE_KASAN.p99_s or 0.0)
    assert b.local_close_bound_s == SIW.local_close_bound_s < a.local_close_bound_s
    assert dict(a.provenance)["local_close_bound_s"] is SIW_LOCAL_CLOSE_KASAN
    assert a.admin_down_bound_s == b.admin_down_bound_s  # only the close bound differs
