"""The inventory's links: a cable's two ends, the ways to pull it, where to capture and
where to impair it.

Frozen dataclasses built by :mod:`hil.inventory.links` from validated YAML,
and the module parameters a link's runs pin; :mod:`hil.inventory.model`
names them with the hosts and pairs.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

PullMode = Literal["admin", "blackhole", "carrier", "command"]
PULL_MODES: tuple[PullMode, ...] = ("admin", "blackhole", "carrier", "command")
# Drivers whose iWARP runs over the host kernel's TCP, where the host's
# filters (nftables) and tcpdump see it.  Every hardware iWARP RNIC (iw_cxgb4)
# runs TCP itself: its connections pass the host's stack by.
HOST_TCP_DRIVERS = ("siw",)
CaptureMode = Literal["ends", "host", "command", "none"]
CAPTURE_MODES: tuple[CaptureMode, ...] = ("ends", "host", "command", "none")
# The fields hil fills in a capture command's templates (besides its vars):
# ``id`` names one capture (the same in start, stop and fetch), ``link`` the
# link, and ``pcap`` (fetch only) the file on ``controller`` to write it to.
CAPTURE_FIELDS = ("id", "link")
CAPTURE_FETCH_FIELDS = ("id", "link", "pcap")
ImpairMode = Literal["netem", "middlebox", "command", "none"]
IMPAIR_MODES: tuple[ImpairMode, ...] = ("netem", "middlebox", "command", "none")
# The fields hil fills in a command impairment's templates (besides its vars):
# ``link``; ``direction``, the sending end then the receiving one (``HOST:PORT>HOST:PORT``);
# ``netem``, the impairment in tc-netem(8) words, one argument (``loss 5%``).
IMPAIR_FIELDS = ("link", "direction", "netem")


@dataclass(frozen=True)
class LinkEnd:
    """``host:port`` at one end of a cable."""

    host: str
    port: str

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Pull:
    """One way to pull a link, with what that way needs.

    - ``admin``: set ``end``'s netdev down through the agent.
    - ``blackhole``: drop all traffic on ``end``'s netdev both ways (tc),
      carrier stays up.
    - ``carrier``: QEMU QMP ``set_link`` on ``qmp`` (a unix socket path on the
      controller) for the guest NIC whose QEMU netdev id is ``qmp_netdev``.
    - ``command``: run ``down`` / ``up`` (argument lists; ``{name}`` fields
      filled from ``vars``) over SSH on the inventory host ``controller``.
    """

    mode: PullMode
    end: LinkEnd | None = None
    qmp: str | None = None
    qmp_netdev: str | None = None
    controller: str | None = None
    down: tuple[str, ...] = ()
    up: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CaptureSpec:
    """Where a link's packets can be captured: the link's ``capture:``.

    - ``ends`` (the default, ``capture:`` absent): tcpdump on each end's own
      netdev; it sees the iWARP traffic only where the provider's TCP runs in
      the host kernel (siw), see :func:`hil.wire.plan.capture_plan`.
    - ``host``: tcpdump on ``netdev`` of the inventory host ``host`` (a
      capture host on a mirror port or an inline tap), reached by SSH.
    - ``command``: a vendor's capture tool: ``start``, ``stop`` and ``fetch``
      argument lists run over SSH on the inventory host ``controller``;
      ``{name}`` fields come from ``vars`` and from hil (``CAPTURE_FIELDS``;
      ``fetch`` writes the capture to ``{pcap}``).
    - ``none``: the link has no usable capture point.
    """

    mode: CaptureMode = "ends"
    host: str | None = None
    netdev: str | None = None
    controller: str | None = None
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    fetch: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ImpairSpec:
    """Where a link's path can be impaired (loss, delay, ...): the link's ``impair:``.

    - ``netem``: tc netem on each sending end's own port (its egress); only where the
      provider's TCP runs in the host kernel (``HOST_TCP_DRIVERS``): an offloading RNIC
      sends its iWARP traffic past the host's qdiscs.  The default of a link whose two
      ends are such ports (``impair:`` absent).
    - ``middlebox``: the inventory host ``host`` bridges the link; ``toward`` names its
      netdev facing each end, whose egress carries the traffic sent to that end.
    - ``command``: ``apply`` and ``clear`` argument lists run over SSH on the inventory
      host ``controller`` (a switch or impairment appliance); ``{name}`` fields come
      from ``vars`` and from hil (``IMPAIR_FIELDS``).
    - ``none``: the link cannot be impaired (the default of any other link).
    """

    mode: ImpairMode = "none"
    host: str | None = None
    toward: tuple[tuple[LinkEnd, str], ...] = ()
    controller: str | None = None
    apply: tuple[str, ...] = ()
    clear: tuple[str, ...] = ()
    vars: tuple[tuple[str, str], ...] = ()

    def netdev_toward(self, end: LinkEnd) -> str:
        """A middlebox's netdev facing ``end``; KeyError when it names none."""
        return dict(self.toward)[end]


@dataclass(frozen=True)
class PeerSpec:
    """An inventory host that runs the reference peer (docs/peer.md) against the link's
    DUT: one entry of the link's ``peer:``.

    ``source`` (IPv4 or IPv6) and ``source6`` (IPv6, beside an IPv4 ``source``) are the
    addresses the peer connects and listens from; None lets the host's routes choose.
    An entry whose host is one of the link's ends is used only against the other end.
    """

    host: str
    source: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    source6: ipaddress.IPv6Address | None = None


@dataclass(frozen=True)
class PinnedParam:
    """A kernel module parameter a link's runs set (``module_params:``): ``driver.name=value``.

    ``value`` is as sysfs prints it (checked against
    :data:`hil.inventory.modparams.MODULE_PARAMS` when loaded).
    """

    driver: str
    name: str
    value: str

    def __str__(self) -> str:
        return f"{self.driver}.{self.name}={self.value}"


@dataclass(frozen=True)
class PinnedDevlink:
    """A devlink parameter a link's runs set on each irdma end's PCI function
    (``devlink_params:``): ``name=value``, ``value`` as devlink prints it (checked
    against :data:`hil.inventory.devlinkparams.DEVLINK_PARAMS` when loaded)."""

    name: str
    value: str

    def __str__(self) -> str:
        return f"devlink.{self.name}={self.value}"


@dataclass(frozen=True)
class Link:
    """A named cable between two host ports, the ways to pull it and where to capture it."""

    name: str
    a: LinkEnd
    b: LinkEnd
    pulls: tuple[Pull, ...] = ()
    tags: tuple[str, ...] = ()
    capture: CaptureSpec = CaptureSpec()
    impair: ImpairSpec = ImpairSpec()
    module_params: tuple[PinnedParam, ...] = ()
    devlink_params: tuple[PinnedDevlink, ...] = ()
    # Who runs the reference peer against each end; none: the pair's other host.
    peers: tuple[PeerSpec, ...] = ()

    def pull(self, mode: PullMode) -> Pull:
        """The pull of ``mode``; KeyError when the link does not offer it."""
        for p in self.pulls:
            if p.mode == mode:
                return p
        offered = ", ".join(p.mode for p in self.pulls) or "none"
        raise KeyError(f"link {self.name} offers no {mode!r} pull (offers: {offered})")


def params_by_driver(params: tuple[PinnedParam, ...]) -> dict[str, dict[str, str]]:
    """``params`` as driver -> {parameter: value}, in their order."""
    result: dict[str, dict[str, str]] = {}
    for p in params:
        result.setdefault(p.driver, {})[p.name] = p.value
    return result
