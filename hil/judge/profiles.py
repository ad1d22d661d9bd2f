"""Provider profiles: the registry of providers (how one is recognised on a host and how
its profile follows from the host's settings), and the names of the profile types.

siw's profile is :mod:`hil.judge.siwprofile`, iw_cxgb4's :mod:`hil.judge.cxgb4profile`,
irdma's :mod:`hil.judge.irdmaprofile`.
What a profile is, and how a pair whose hosts differ is judged (:class:`PairProfile`),
is :mod:`hil.judge.profile`; this module names those too, so that
``hil.judge.profiles`` gives all of it.  Each value's source is in docs/contract.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hil.errors import InputError
from hil.judge.cxgb4profile import IW_CXGB4, cxgb4_profile
from hil.judge.irdmaprofile import IRDMA, irdma_profile
from hil.judge.profile import (
    IrdOrdPromise,
    PairProfile,
    PdataLimits,
    PortPromise,
    Profile,
    Profiles,
    PullPromise,
    pair_profile,
)
from hil.judge.siwprofile import SIW, siw_profile
from hil.judge.tcpmodel import tcp_retries2_timeout_s
from hil.judge.wireexpect import WireExpect
from hil.registry import Registry


@dataclass(frozen=True)
class ProviderSpec:
    """How a provider is recognised on a host and how its profile follows from the host.

    ``node_desc`` starts the provider's ``/sys/class/infiniband/DEV/node_desc``;
    ``parent_drivers`` are the drivers of the device below its RDMA device
    (the PCI function of an RNIC).  ``settings`` names each host setting
    that shapes the profile and where it is read: ``sysctl:NAME``, an
    absolute sysfs path, or ``kallsyms:FUNCTION`` (1 when the running kernel has that
    function, as ``/proc/kallsyms`` lists it, else 0).  ``build(settings)`` makes the
    profile from those that were read on one host (each host of a pair gets its own).
    """

    driver: str
    node_desc: str
    settings: dict[str, str]
    build: Callable[[Mapping[str, int]], Profile]
    parent_drivers: tuple[str, ...] = ()


PROVIDERS = Registry[ProviderSpec](
    "contract profile for RDMA driver", name_of=lambda spec: spec.driver
)


def register_provider(spec: ProviderSpec) -> None:
    """Make a provider known to pair runs and to :func:`profile_for` (a new RNIC's profile)."""
    PROVIDERS.register(spec)


def provider_named(driver: str) -> ProviderSpec:
    """The provider of driver name ``driver`` (or of a parent driver such as ``cxgb4``)."""
    for spec in PROVIDERS:
        if driver in spec.parent_drivers:
            return spec
    return PROVIDERS[driver]


def profile_for(driver: str, **settings: int | None) -> Profile:
    """The profile for an RDMA driver, shaped by the host settings given.

    Settings are the provider's (``tcp_retries2`` for siw, ``ep_timeout_secs``
    for iw_cxgb4); one left out or None takes the kernel's default.
    """
    spec = provider_named(driver)
    unknown = set(settings) - set(spec.settings)
    if unknown:
        raise InputError(
            f"provider {spec.driver} takes no setting {', '.join(sorted(unknown))} "
            f"(it takes: {', '.join(sorted(spec.settings)) or 'none'})"
        )
    return spec.build({k: v for k, v in settings.items() if v is not None})


register_provider(
    ProviderSpec(
        "siw",
        node_desc="Software iWARP stack",  # siw_main.c SIW_NODE_DESC_COMMON
        settings={
            "tcp_retries2": "sysctl:net.ipv4.tcp_retries2",
            "tcp_syn_retries": "sysctl:net.ipv4.tcp_syn_retries",
            # Gone since 6.12 (60dc7fcafea8): whether an admin down ends connections.
            "netdev_down_walk": "kallsyms:siw_netdev_down",
            # A KASAN kernel (the debug lab's) closes slower: its own measured bound.
            "kasan": "kallsyms:kasan_report",
        },
        build=lambda s: siw_profile(**s) if s else SIW,
    )
)
register_provider(
    ProviderSpec(
        "iw_cxgb4",
        node_desc="cxgb4 Chelsio",  # cxgb4/iw_cxgb4.h C4IW_NODE_DESC
        settings={"ep_timeout_secs": "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"},
        build=lambda s: cxgb4_profile(s["ep_timeout_secs"]) if "ep_timeout_secs" in s else IW_CXGB4,
        parent_drivers=("cxgb4",),
    )
)
register_provider(
    ProviderSpec(
        "irdma",
        # irdma sets no node_desc (6.1.192: nothing in hw/irdma writes it, no modify_device
        # for sysfs to call, core/sysfs.c:1360): a NUL no description holds, so it is
        # found by its PCI function's driver.  No module parameters in 6.1.
        node_desc="\0",
        settings={},
        build=lambda _: IRDMA,
        parent_drivers=("ice", "i40e"),
    )
)


__all__ = [
    "IRDMA",
    "IW_CXGB4",
    "PROVIDERS",
    "SIW",
    "IrdOrdPromise",
    "PairProfile",
    "PdataLimits",
    "Profile",
    "Profiles",
    "ProviderSpec",
    "PortPromise",
    "PullPromise",
    "cxgb4_profile",
    "irdma_profile",
    "pair_profile",
    "profile_for",
    "provider_named",
    "register_provider",
    "siw_profile",
    "WireExpect",
    "tcp_retries2_timeout_s",
]
