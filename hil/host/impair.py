"""Impair one direction of a link's path, journaled like a pull, and prove it took.

``ImpairControl(hosts, journal).impaired(link, "a>b", [loss(10)])`` is a ``with``
block in which every frame end ``a`` sends to end ``b`` meets the impairments, at
the link's impairment point (its inventory ``impair:``, docs/impairment.md):

- ``netem``: a netem root qdisc on the sender's own port (siw: its TCP is the host's);
- ``middlebox``: the same on the middlebox's netdev toward the receiver, once the
  middlebox's GRO, GSO, TSO and LRO are off on both its netdevs (so that it forwards
  the segments as they came, never re-segmented: ethtool(8) -K);
- ``command``: the inventory's ``apply`` on its controller, ``clear`` to undo.

An MSS clamp (kind ``mss``) is a middlebox's alone: an nftables ``netdev`` table on its
netdev toward the receiver rewrites the MSS option of the SYNs the receiver sends, so
the sender's segments are at most that long (:func:`mss_script`).  A one-shot drop of
the sender's first MPA request (kind ``drop-mpa-request``) is an nftables ``netdev``
table too, at the ingress of the receiver's own port (or of a middlebox's netdev toward
the sender): :func:`mpa_drop_script`.

Every change is journaled *before* it is made (the fenced journal refuses it once the
run lost its lease), tagged ``impair`` (the link) and ``direction``: the block's end
undoes it, and a killed run's entries are undone by the next reservation's replay.
Before the block's body runs, ping probes from the sender to the receiver measure each
impairment on the path (:mod:`hil.host.impairkinds`); one the path does not show
fails "impairment not effective".  Flapping takes the port toward the receiver down
for ``down_s`` every ``every_s`` in a thread, each down fenced, and is shown by the
downs its hosts reported.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hil import tools
from hil.errors import HilError, InputError, RemoteError
from hil.host.impairkinds import (
    DROP_MPA_REQUEST,
    PROBE_INTERVAL_S,
    PROBE_WAIT_S,
    Impairment,
    Probe,
    check,
    kind,
    netem_words,
    parse_ping,
)
from hil.host.journal import UndoReport, agent_undo, ssh_undo
from hil.host.netdelay import DEFAULT_HANDLE, TC_TIMEOUT, root_qdisc
from hil.host.undo import nft_table_name, nft_table_undo
from hil.inventory import templates

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal
    from hil.inventory.model import Link, LinkEnd
    from hil.reservation.model import JournalEntry

log = logging.getLogger(__name__)

Direction = Literal["a>b", "b>a"]
DIRECTIONS: tuple[Direction, ...] = ("a>b", "b>a")
# ethtool(8) -k's names of the offloads a middlebox turns off, by -K's short names.
OFFLOADS = {
    "gro": "generic-receive-offload",
    "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload",
    "lro": "large-receive-offload",
}
STEP_TIMEOUT = 15.0
# A neighbour entry in use that nothing confirms is probed from DELAY_PROBE_TIME (5 s) on,
# RETRANS_TIME (1 s) apart, and fails after UCAST_PROBES (3) unanswered (net/ipv4/arp.c
# arp_tbl, net/core/neighbour.c neigh_timer_handler, Linux 6.1.192); TCP's confirmations
# and the replies both cross the delayed direction, so a path holding frames back a
# RETRANS_TIME or more lets the ends' entries fail mid-test (and rdma_resolve_addr then
# waits past its 2 s for a reply held back longer).  Such a delay pins them first.
NEIGH_RETRANS_MS = 1000.0


def offloads_on(features: str) -> list[str]:
    """The short names of ``OFFLOADS`` that ``ethtool -k`` printed as ``on`` (not fixed)."""
    state = dict(line.strip().partition(": ")[::2] for line in features.splitlines())
    return [short for short, name in OFFLOADS.items() if state.get(name) == "on"]


class ImpairmentNotEffective(HilError):
    """The path did not show an impairment hil applied: a test on it would judge nothing."""


@dataclass(frozen=True)
class Point:
    """Where a direction is impaired: netem on ``netdev`` of ``host``, or (``command``)
    the controller ``host``'s tool."""

    host: str
    netdev: str = ""


class ImpairControl:
    """Impair and restore the directions of the inventory's links; all journaled."""

    def __init__(self, hosts: Hosts, journal: Journal) -> None:
        self.hosts = hosts
        self.journal = journal

    # -- the interface ------------------------------------------------------

    @contextmanager
    def impaired(
        self, link: Link, direction: Direction, impairments: Sequence[Impairment]
    ) -> Iterator[list[Probe]]:
        """Impair ``direction`` of ``link`` inside the block; yields the proving probes.

        The impairment is undone when the block ends, however it ends.
        """
        self.apply(link, direction, impairments)
        flapper = None
        try:
            probes = self.prove(link, direction, impairments)
            flaps = [i for i in impairments if i.kind == "flap"]
            if flaps:
                flapper = _Flapper(self, link, direction, flaps[0])
                flapper.start()
            yield probes
            if flapper is not None:
                flapper.finish()
        finally:
            if flapper is not None:
                flapper.stop()
            self.restore(link, direction).check(f"restoring {link.name} {direction}")

    def apply(self, link: Link, direction: Direction, impairments: Sequence[Impairment]) -> None:
        """Put ``impairments`` on ``direction`` of ``link``, each change journaled first."""
        if direction not in DIRECTIONS:
            raise InputError(f"direction is one of {', '.join(DIRECTIONS)}, not {direction!r}")
        for imp in impairments:
            check(imp)
        if len({i.kind for i in impairments}) != len(impairments):
            raise InputError("one impairment of each kind a direction, not two")
        if self.entries(link, direction):
            raise InputError(
                f"link {link.name} {direction} is impaired already; restore it first "
                f"(`hil host restore`)"
            )
        mode = link.impair.mode
        if mode == "none":
            raise InputError(
                f"link {link.name} has no impairment point (inventory impair: none): give it "
                "a middlebox or a command (docs/impairment.md)"
            )
        clamps = [i for i in impairments if i.kind == "mss"]
        if clamps and mode != "middlebox":
            raise InputError(
                f"link {link.name}: an MSS clamp needs a middlebox (impair: {{mode: middlebox}}), "
                f"not {mode}: it rewrites the SYN's MSS option on the path, which netem does not "
                "do, and a host's own route advmss would only make that end announce less, "
                "re-segmenting nothing on the path (docs/impairment.md)"
            )
        drops = any(i.kind == DROP_MPA_REQUEST for i in impairments)
        if drops and mode == "command":
            raise InputError(
                f"link {link.name}: dropping the MPA request needs nftables on a host of the "
                "path (impair: netem or middlebox), not a command: its {netem} has no words "
                "for a match on the segment's payload (docs/impairment.md)"
            )
        if held_ms(impairments) >= NEIGH_RETRANS_MS:
            self._pin_neighbours(link, direction)
        if drops:
            self._drop_mpa_request(link, direction)
        words = [w for i in impairments for w in netem_words(i)]
        if not words and not clamps:
            return  # flapping or the MPA drop alone: each journaled its own undo
        if mode == "command":
            self._apply_command(link, direction, words)
            return
        point = self.point(link, direction)
        if mode == "middlebox":
            self._offloads_off(link, point.host)
        if clamps:
            self._clamp_mss(link, direction, point, clamps[0].mss)
        if words:
            self._apply_netem(link, direction, point, words)

    def restore(self, link: Link, direction: Direction | None = None) -> UndoReport:
        """Undo the journaled impairments of ``link`` (of one ``direction`` when given)."""
        return self.journal.undo(
            [e for e in self.entries(link) if direction in (None, e.entry.get("direction"))]
        )

    def entries(self, link: Link, direction: Direction | None = None) -> list[JournalEntry]:
        """The journal entries of ``link``'s impairments still in place (any run's)."""
        hosts = {link.a.host, link.b.host, link.impair.host or link.a.host}
        if link.impair.controller:
            hosts.add(link.impair.controller)
        found = self.journal.find(hosts, impair=link.name)
        return [e for e in found if direction in (None, e.entry.get("direction"))]

    def ends(self, link: Link, direction: Direction) -> tuple[LinkEnd, LinkEnd]:
        """The sending and the receiving end of ``direction``."""
        return (link.a, link.b) if direction == "a>b" else (link.b, link.a)

    def point(self, link: Link, direction: Direction) -> Point:
        """Where netem impairs ``direction``: the sender's port, or the middlebox's netdev
        toward the receiver."""
        sender, receiver = self.ends(link, direction)
        if link.impair.mode == "middlebox" and link.impair.host is not None:
            return Point(link.impair.host, link.impair.netdev_toward(receiver))
        return Point(sender.host, self.hosts.host(sender.host).rnic(sender.port).netdev)

    # -- proving ------------------------------------------------------------

    def prove(
        self, link: Link, direction: Direction, impairments: Sequence[Impairment]
    ) -> list[Probe]:
        """Probe ``direction`` once per impairment ping can show; ImpairmentNotEffective
        naming each one the path did not show."""
        sender, receiver = self.ends(link, direction)
        rnic = self.hosts.host(receiver.host).rnic(receiver.port)
        if rnic.address is None:
            raise InputError(f"{receiver} has no address to probe {link.name} {direction} with")
        probes: list[Probe] = []
        failures: list[str] = []
        # A reply held back longer than ping waits would count as lost (ping(8) -W).
        held_s = held_ms(impairments) / 1000
        for imp in impairments:
            plan = kind(imp).probes
            if plan is None:
                continue
            count, size = plan(imp)
            probe = self.ping(sender.host, str(rnic.address.ip), count, size, held_s)
            probes.append(probe)
            why = kind(imp).proof(imp, probe)
            log.info("%s %s %s: %s", link.name, direction, imp, probe.to_text())
            if why is not None:
                failures.append(f"{imp}: {why} ({probe.to_text()})")
        if failures:
            raise ImpairmentNotEffective(
                f"impairment not effective on {link.name} {direction} "
                f"({link.impair.mode}): {'; '.join(failures)}"
            )
        return probes

    def ping(self, host: str, address: str, count: int, size: int, held_s: float = 0.0) -> Probe:
        """``count`` ping probes of ``size`` bytes from ``host`` to ``address``, each
        waiting for its reply ``held_s`` (the path's delay) more than usual."""
        wait = PROBE_WAIT_S + math.ceil(held_s)
        argv = tools.argv(
            "ping", "-n", "-c", str(count), "-i", str(PROBE_INTERVAL_S),
            "-W", str(wait), "-s", str(size), address,
        )  # fmt: skip
        timeout = count * PROBE_INTERVAL_S + wait + STEP_TIMEOUT
        got = self.hosts.agent(host).run(argv, timeout)
        return parse_ping(got.stdout, size)

    # -- the modes ------------------------------------------------------------

    def _pin_neighbours(self, link: Link, direction: Direction) -> None:
        """Pin each end's neighbour entry of the other end's addresses to its MAC (``ip
        neigh replace ... nud permanent``), the entry's removal journaled first."""
        for end, peer in ((link.a, link.b), (link.b, link.a)):
            netdev = self.hosts.host(end.host).rnic(end.port).netdev
            far = self.hosts.host(peer.host).rnic(peer.port)
            mac = self.hosts.agent(peer.host).link(far.netdev).mac
            if mac is None:
                raise InputError(f"{peer}: {far.netdev} has no MAC to pin {end}'s neighbour to")
            agent = self.hosts.agent(end.host)
            for address in (far.address_of(f) for f in far.families):
                ip = str(address.ip) if address is not None else ""
                drop = tools.argv("ip", "neigh", "del", ip, "dev", netdev)
                undo = agent_undo("run", f"unpin neighbour {ip} on {netdev}", argv=drop)
                undo.update(timeout=TC_TIMEOUT, missing_ok=True)
                self._change(end.host, link, direction, undo)
                pin = ("neigh", "replace", ip, "lladdr", mac, "dev", netdev, "nud", "permanent")
                agent.run(tools.argv("ip", *pin), TC_TIMEOUT, check=True)

    def _change(self, host: str, link: Link, direction: Direction, undo: dict[str, Any]) -> int:
        undo.update(impair=link.name, direction=direction)
        return self.journal.change(host, undo)

    def _apply_netem(
        self, link: Link, direction: Direction, point: Point, words: list[str]
    ) -> None:
        agent = self.hosts.agent(point.host)
        qdisc, handle = root_qdisc(agent, point.host, point.netdev)
        if handle != DEFAULT_HANDLE:
            raise InputError(
                f"{point.host}: {point.netdev} has a configured root qdisc ({qdisc} {handle}); "
                "hil impairs only a netdev with the kernel's default qdisc, so as not to lose "
                f"that configuration: remove it (tc qdisc del dev {point.netdev} root)"
            )
        delete = tools.argv("tc", "qdisc", "del", "dev", point.netdev, "root")
        undo = agent_undo("run", f"remove the impairment of {point.netdev}", argv=delete)
        undo.update(timeout=TC_TIMEOUT, missing_ok=True)
        entry = self._change(point.host, link, direction, undo)
        add = ("qdisc", "add", "dev", point.netdev, "root", "netem", *words)
        got = agent.run(tools.argv("tc", *add), TC_TIMEOUT)
        if got.status != 0:
            self.journal.forget(entry)  # nothing was added: its undo would delete the default
            raise RemoteError(
                point.host,
                f"cannot impair {point.netdev} (tc {' '.join(add)}: {got.why()}); the kernel "
                "needs CONFIG_NET_SCH_NETEM (the lab's has it)",
            )
        log.info("%s: %s impaired: netem %s", point.host, point.netdev, " ".join(words))

    def _clamp_mss(self, link: Link, direction: Direction, point: Point, mss: int) -> None:
        """Clamp the MSS of the SYNs entering the middlebox at ``point`` (from the
        receiver) to ``mss``: the table's removal journaled first."""
        what = f"the MSS clamp of {point.netdev}"
        self._load_table(link, direction, point, mss_table(point.netdev), what,
                         mss_script(point.netdev, mss))  # fmt: skip
        log.info("%s: SYNs entering %s clamped to MSS %d", point.host, point.netdev, mss)

    def _drop_mpa_request(self, link: Link, direction: Direction) -> None:
        """Drop the first MPA request entering the receiver's own port, or the middlebox's
        netdev toward the sender: the table's removal journaled first."""
        sender, receiver = self.ends(link, direction)
        if link.impair.mode == "middlebox" and link.impair.host is not None:
            point = Point(link.impair.host, link.impair.netdev_toward(sender))
        else:
            point = Point(receiver.host, self.hosts.host(receiver.host).rnic(receiver.port).netdev)
        what = f"the MPA request drop of {point.netdev}"
        table = mpa_drop_table(point.netdev)
        self._load_table(link, direction, point, table, what, mpa_drop_script(point.netdev))
        log.info("%s: the first MPA request entering %s dropped", point.host, point.netdev)

    def _load_table(
        self, link: Link, direction: Direction, point: Point, table: str, what: str, script: str
    ) -> None:
        """Load ``script``, the nftables netdev ``table``, on ``point``'s host, its
        deletion journaled first; a table of that name hil did not journal is refused."""
        agent = self.hosts.agent(point.host)
        listed = agent.run(tools.argv("nft", "list", "table", "netdev", table), STEP_TIMEOUT)
        if listed.status == 0:
            raise InputError(
                f"{point.host}: {point.netdev} has an nftables table {table} hil did not "
                f"journal; delete it by hand: nft delete table netdev {table}"
            )
        undo = nft_table_undo(table, f"remove {what}", STEP_TIMEOUT)
        self._change(point.host, link, direction, undo)
        agent.run(tools.argv("nft", "-f", "-"), STEP_TIMEOUT, input=script, check=True)

    def _offloads_off(self, link: Link, host: str) -> None:
        """Turn off a middlebox's segmentation offloads that are on, once a run (journaled)."""
        if self.journal.find([host], offloads=link.name):
            return
        agent = self.hosts.agent(host)
        for _, netdev in link.impair.toward:
            got = agent.run(tools.argv("ethtool", "-k", netdev), STEP_TIMEOUT, check=True)
            on = offloads_on(got.stdout)
            if not on:
                continue
            back = tools.argv("ethtool", "-K", netdev, *[w for s in on for w in (s, "on")])
            undo = agent_undo("run", f"turn {', '.join(on)} back on on {netdev}", argv=back)
            undo.update(timeout=STEP_TIMEOUT, offloads=link.name)
            self.journal.change(host, undo)
            off = tools.argv("ethtool", "-K", netdev, *[w for s in on for w in (s, "off")])
            agent.run(off, STEP_TIMEOUT, check=True)

    def _apply_command(self, link: Link, direction: Direction, words: list[str]) -> None:
        spec = link.impair
        if spec.controller is None:
            raise InputError(f"link {link.name}: the command impairment names no controller")
        sender, receiver = self.ends(link, direction)
        fields = dict(spec.vars) | {
            "link": link.name,
            "direction": f"{sender}>{receiver}",
            "netem": " ".join(words),
        }
        what = f"link {link.name}: impair command template"
        apply = templates.fill(spec.apply, fields, what)
        clear = templates.fill(spec.clear, fields, what)
        undo = ssh_undo(spec.controller, clear, f"clear the impairment of {link.name} {direction}")
        self._change(spec.controller, link, direction, undo)
        self.hosts.session(spec.controller).run(apply, timeout=STEP_TIMEOUT, check=True)

    # -- flapping -------------------------------------------------------------

    def flap_point(self, link: Link, direction: Direction) -> Point:
        """Which port a flap takes down: the netem point's (the sender's own port, or the
        middlebox's toward the receiver); a command link cannot flap."""
        if link.impair.mode == "command":
            raise InputError(
                f"link {link.name}: flapping needs a port hil can take down; its impairment "
                "point is a command (pull it with a command pull instead)"
            )
        return self.point(link, direction)


def mss_table(netdev: str) -> str:
    """The nftables ``netdev`` table that clamps the MSS of SYNs entering ``netdev``."""
    return nft_table_name("mss", netdev)


def mss_script(netdev: str, mss: int) -> str:
    """``nft -f`` input: a SYN entering ``netdev`` whose MSS option is above ``mss`` leaves
    with ``mss`` (nft(8), TCP OPTIONS: ``tcp option maxseg size set``).

    The ingress hook runs before the bridge takes the frame (``nf_ingress`` at
    net/core/dev.c:5506, the bridge's ``rx_handler`` at 5532, Linux 6.1.192), so the
    bridged SYN leaves rewritten, its TCP checksum fixed (nft_exthdr.c:287
    ``inet_proto_csum_replace2``; nft_exthdr is built into nf_tables,
    net/netfilter/Makefile:88).  The guests' kernel has no ``NF_TABLES_BRIDGE`` but
    ``NF_TABLES_NETDEV`` (hil/lab/siw.config), which this needs, as the blackhole pull.
    [host, 2026-12-05: a veth peer behind this table got TCP_MAXSEG 524, 536 less
    12 bytes of timestamps; its peer kept 1448]
    """
    dev = netdev.replace('"', "")
    return (
        f"table netdev {mss_table(netdev)} {{\n"
        f'  chain in {{ type filter hook ingress device "{dev}" priority -450;\n'
        f"    tcp flags & syn == syn tcp option maxseg size > {mss} "
        f"tcp option maxseg size set {mss}; }}\n"
        "}\n"
    )


def mpa_drop_table(netdev: str) -> str:
    """The nftables ``netdev`` table that drops the first MPA request entering ``netdev``."""
    return nft_table_name("mpadrop", netdev)


# The MPA request's key, "MPA ID Req Frame" (RFC 5044 section 7.1), as one 128-bit number.
MPA_REQUEST_KEY = "0x" + b"MPA ID Req Frame".hex()


def mpa_drop_script(netdev: str) -> str:
    """``nft -f`` input: the first TCP segment entering ``netdev`` whose payload begins
    with the MPA request's key is dropped, no later one.

    ``@ih`` is the payload past the TCP header (nft(8), RAW PAYLOAD EXPRESSION; the
    kernel finds it past the data offset, nft_payload.c ``__nft_payload_inner_offset``,
    Linux 6.1).  The first match adds its protocol to the set ``dropped`` and is
    dropped; every later one finds it there and passes.  A set, not ``limit`` or
    ``quota``: the lab's guests have neither (CONFIG_NFT_LIMIT and CONFIG_NFT_QUOTA
    unset; the kernel refused ``limit`` with ENOENT [lab, 2026-12-05]), while set
    lookups and updates are nf_tables' own (net/netfilter/Makefile ``nf_tables-objs``:
    nft_lookup.o, nft_dynset.o, 6.1).  The ``counter`` counts the drops.
    [host, 2026-12-05, nft 1.0.6, Linux 6.18, veth pair: of two connections each
    sending the key, the first one's segment was dropped once (counter 1) and
    retransmitted 205 ms later at the same sequence number and length; the second's
    passed]
    """
    dev = netdev.replace('"', "")
    match = f"meta l4proto tcp @ih,0,128 {MPA_REQUEST_KEY}"
    return (
        f"table netdev {mpa_drop_table(netdev)} {{\n"
        "  set dropped { type inet_proto; flags dynamic; }\n"
        f'  chain in {{ type filter hook ingress device "{dev}" priority -450;\n'
        f"    {match} meta l4proto @dropped accept;\n"
        f"    {match} add @dropped {{ meta l4proto }} counter drop; }}\n"
        "}\n"
    )


def held_ms(impairments: Sequence[Impairment]) -> float:
    """How long the longest of ``impairments`` holds a frame back (delay + jitter), ms."""
    return max((i.delay_ms + i.jitter_ms for i in impairments), default=0.0)


# A segment lost on the sender's egress is dropped before its capture tap (AF_PACKET sees
# egress after the qdisc) and shows only in TCP's resend, one retransmission timeout later:
# at least TCP_RTO_MIN, 200 ms (include/net/tcp.h), doubled on each loss in a row
# (tcp_retransmit_timer, net/ipv4/tcp_timer.c).  Three in a row: 200 + 400 + 800 ms.
# [lab, 2026-12-06: loss 10 %, the closer's FIN on the wire 209 ms after its DISCONNECTED]
RESENT_LATE_MS = 1400.0

# Corruption loses a frame for the capture too: netem flips the bit before the tap sees
# the frame (sch_netem.c netem_enqueue, 6.1), and a segment without payload (a FIN, a bare
# ACK) is all headers, so the flip can land in its addresses, ports, sequence number or
# flags, and tshark no longer reads it as that connection's segment; the receiver drops
# it and TCP resends it.  [CI, 2026-12-07: corrupt 20 %, the active host's FIN on the
# wire 213 ms after its DISCONNECTED, nothing of that connection before it]
RESENT_KINDS = frozenset({"loss", "corrupt"})


def wire_hold_ms(impairments: Sequence[Impairment]) -> float:
    """How much later than sent a capture may see the sender's frames under
    ``impairments``: the longest delay, plus TCP's resends when frames are lost or
    corrupted (:data:`RESENT_KINDS`)."""
    resent = any(i.kind in RESENT_KINDS for i in impairments)
    return held_ms(impairments) + (RESENT_LATE_MS if resent else 0.0)


class _Flapper:
    """Take a port down for ``down_s`` every ``every_s`` until stopped; counts its downs."""

    def __init__(
        self, control: ImpairControl, link: Link, direction: Direction, imp: Impairment
    ) -> None:
        self.control = control
        self.imp = imp
        self.point = control.flap_point(link, direction)
        self.agent = control.hosts.agent(self.point.host)
        self.stopped = threading.Event()
        self.downs = 0
        self.error: HilError | None = None
        netdev = self.point.netdev
        undo = agent_undo(
            "set_link", f"set {netdev} up (flapping {link.name})", netdev=netdev, up=True
        )
        control._change(self.point.host, link, direction, undo)
        self.thread = threading.Thread(target=self._run, name=f"flap-{link.name}", daemon=True)

    def start(self) -> None:
        """Begin flapping."""
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self.imp.every_s - self.imp.down_s):
                self.control.journal.fence()  # never take a port down on a pair we lost
                self.agent.set_link(self.point.netdev, up=False)
                if not self.agent.link(self.point.netdev).up:
                    self.downs += 1  # counted as the host reports it, not as asked
                self.stopped.wait(self.imp.down_s)
                self.agent.set_link(self.point.netdev, up=True)
        except HilError as e:
            self.error = e

    def stop(self) -> None:
        """Stop flapping (the journal's undo sets the port up)."""
        self.stopped.set()
        self.thread.join(timeout=self.imp.down_s + STEP_TIMEOUT)

    def finish(self) -> None:
        """Stop, then fail unless the port really went down: the flap's proof."""
        self.stop()
        if self.error is not None:
            raise self.error
        if self.downs == 0:
            raise ImpairmentNotEffective(
                f"impairment not effective: {self.imp} took {self.point.netdev} on "
                f"{self.point.host} down 0 times (the block ended within {self.imp.every_s:g} s)"
            )
