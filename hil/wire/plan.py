"""Which capture points a pair's link has, and whether they see the provider's packets.

The inventory says where a link can be captured (``capture:``, see
docs/inventory.md); whether that place sees the iWARP traffic depends on
the provider the run found.  tcpdump on a host's netdev sees a connection
only when the host's kernel runs its TCP: siw does, an offloading RNIC
(iw_cxgb4) sends its iWARP traffic past the host's stack.  So the default,
tcpdump on each end, captures at the ends whose provider runs TCP in the
host kernel, and a pair with none of them has no usable capture point.
A capture host (mirror port, tap) or a vendor's tool sees the cable
whatever the provider.  :func:`capture_plan` is the one place that decides;
a plan without points carries the reason, which the wire rules skip with.
"""

from __future__ import annotations

from dataclasses import dataclass

from hil.inventory.model import HOST_TCP_DRIVERS, CaptureMode, CaptureSpec, Pair


@dataclass(frozen=True)
class TcpdumpPoint:
    """tcpdump on ``netdev`` of inventory host ``host``; ``name`` is the capture point."""

    name: str
    host: str
    netdev: str
    # A capture host on a mirror port or tap sees frames addressed to other
    # MACs, which only promiscuous mode keeps.
    promiscuous: bool = False


@dataclass(frozen=True)
class CommandPoint:
    """A vendor's capture tool, run by ``spec``'s templates on its ``controller`` host."""

    name: str
    link: str
    spec: CaptureSpec

    @property
    def host(self) -> str:
        """The inventory host the commands run on (whose clock stamps the packets)."""
        assert self.spec.controller is not None  # the inventory requires it for mode command
        return self.spec.controller


CapturePoint = TcpdumpPoint | CommandPoint


@dataclass(frozen=True)
class CapturePlan:
    """Where a link is captured for a provider: its points, or why there is none usable."""

    link: str
    mode: CaptureMode
    points: tuple[CapturePoint, ...]
    reason: str = ""  # why there is no point (set exactly when ``points`` is empty)

    @property
    def usable(self) -> bool:
        """True when at least one point will see the link's iWARP packets."""
        return bool(self.points)


def capture_plan(pair: Pair, provider: str) -> CapturePlan:
    """The capture plan of ``pair``'s link for ``provider`` (``Provider.driver``:
    ``siw``, ``iw_cxgb4``, or ``siw+iw_cxgb4`` for a mixed pair, end A first)."""
    link = pair.link
    capture = link.capture
    if capture.mode == "none":
        return CapturePlan(
            link.name,
            "none",
            (),
            f"link {link.name} has no capture point (inventory: capture: none)",
        )
    if capture.mode == "host":
        assert capture.host is not None and capture.netdev is not None  # the inventory checked
        point = TcpdumpPoint(capture.host, capture.host, capture.netdev, promiscuous=True)
        return CapturePlan(link.name, "host", (point,))
    if capture.mode == "command":
        assert capture.controller is not None
        return CapturePlan(
            link.name, "command", (CommandPoint(capture.controller, link.name, capture),)
        )
    drivers = provider.split("+")
    if len(drivers) == 1:
        drivers = drivers * 2
    ends = [
        TcpdumpPoint(host.name, host.name, rnic.netdev)
        for host, rnic, driver in zip(pair.hosts, (pair.rnic_a, pair.rnic_b), drivers, strict=True)
        if driver in HOST_TCP_DRIVERS
    ]
    if ends:
        return CapturePlan(link.name, "ends", tuple(ends))
    return CapturePlan(
        link.name,
        "ends",
        (),
        f"link {link.name}: {provider} runs its TCP on the RNIC, not in the host kernel "
        f"(only {', '.join(HOST_TCP_DRIVERS)} does), so tcpdump on the ends' "
        f"netdevs sees none of its iWARP packets; give the link a capture point in the "
        f"inventory (capture: host or command, docs/inventory.md)",
    )
