"""Link pulls: take a cable of the inventory down and back up, in its modes.

``LinkControl(hosts, journal)`` offers ``pull``, ``restore`` and ``state``
for every mode a link offers:

- ``admin``: the end's netdev is set down through the agent; the restore sets
  it up again and waits for carrier;
- ``blackhole``: every frame on the end's netdev is dropped both ways while
  carrier stays up: an nftables ``netdev`` table with an ingress and an egress
  chain of policy drop, created in one transaction; the restore deletes that
  table and nothing else;
- ``command``: the pull's ``down`` / ``up`` argument templates, ``{name}``
  fields filled from its ``vars``, run over SSH on its ``controller`` host;
- ``carrier``: QEMU QMP ``set_link`` on the guest NIC (virtual lab).

Each pull is journaled *before* it happens, keyed by the link's end host (or
its ``a`` host when the pull names no end) and tagged with the link, so a run
killed in the middle of a pull is restored by the next reservation of the
pair, and ``restore`` from another process (``hil link restore``) finds it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.agent.client import AgentCallError
from hil.errors import HilError, InputError, RemoteError
from hil.host.extensions import ExtensionRegistry
from hil.host.journal import UndoReport, agent_undo, ssh_undo
from hil.host.rdmadev import rdma_ports
from hil.host.undo import nft_table_name, nft_table_undo
from hil.inventory import templates
from hil.inventory.model import PULL_MODES, Inventory, Link, LinkEnd, Pull

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.host.journal import Journal
    from hil.reservation.model import JournalEntry

log = logging.getLogger(__name__)

# ``change(undo)`` journals an undo entry before the pull makes its change.
Change = Callable[[dict[str, Any]], None]
# ``pull(control, link, pull, change)`` takes the link down in its mode.
PullFn = Callable[["LinkControl", Link, Pull, Change], None]
_pull_modes = ExtensionRegistry[PullFn]("link pull registered for mode", "provides it")

CARRIER_TIMEOUT = 10.0  # a restored link must see carrier again within this
STEP_TIMEOUT = 15.0  # one command or call of a pull


@dataclass(frozen=True)
class EndState:
    """One end of a link as its host sees it now."""

    host: str
    port: str
    netdev: str
    up: bool
    carrier: bool
    operstate: str
    blackholed: bool
    # The state of the RDMA port on the netdev (``rdma link``: ib_query_port), "" when
    # the host has none or RDMA is unavailable.
    port_state: str = ""


@dataclass(frozen=True)
class LinkState:
    """A link now: both ends, and the pulls the journal holds for it."""

    link: str
    a: EndState
    b: EndState
    pulled: tuple[str, ...]  # the modes of journaled pulls ("" when none)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for ``hil link state --json`` and reports."""
        return {
            "link": self.link,
            "pulled": list(self.pulled),
            "ends": [vars(self.a), vars(self.b)],
        }


def blackhole_table(netdev: str) -> str:
    """The nftables ``netdev`` table that blackholes ``netdev``."""
    return nft_table_name("blackhole", netdev)


def _blackhole_script(netdev: str) -> str:
    table = blackhole_table(netdev)
    dev = netdev.replace('"', "")
    return (
        f"table netdev {table} {{\n"
        f'  chain in {{ type filter hook ingress device "{dev}" priority -500; policy drop; }}\n'
        f'  chain out {{ type filter hook egress device "{dev}" priority -500; policy drop; }}\n'
        "}\n"
    )


def find_link(inventory: Inventory, name: str) -> Link:
    """The link ``name`` of ``inventory``; ``InputError`` naming the known links."""
    return inventory.link(name)


class LinkControl:
    """Pull and restore the inventory's links; every pull goes into ``journal``."""

    def __init__(self, hosts: Hosts, journal: Journal) -> None:
        self.hosts = hosts
        self.journal = journal

    # -- lookups ------------------------------------------------------------

    def link(self, name: str | Link) -> Link:
        """The inventory link ``name``; ``InputError`` naming the known links."""
        return name if isinstance(name, Link) else find_link(self.hosts.inventory, name)

    def _pull(self, link: Link, mode: str | None) -> Pull:
        if not link.pulls:
            raise InputError(f"link {link.name} offers no pulls in the inventory")
        if mode is None:
            return link.pulls[0]
        if mode not in PULL_MODES:
            raise InputError(f"unknown pull mode {mode!r} (modes: {', '.join(PULL_MODES)})")
        try:
            return link.pull(mode)
        except KeyError as e:
            raise InputError(str(e.args[0])) from None

    def netdev(self, end: LinkEnd) -> str:
        """The netdev of a link end's port."""
        return self.hosts.host(end.host).rnic(end.port).netdev

    def pulls(self, link: str | Link) -> list[JournalEntry]:
        """The journal entries of pulls of ``link`` still in place, oldest first."""
        link = self.link(link)
        return self.journal.find((link.a.host, link.b.host), link=link.name)

    # -- the interface ------------------------------------------------------

    def pull(self, link: str | Link, mode: str | None = None) -> Pull:
        """Pull ``link`` in ``mode`` (default: its first); returns the pull done.

        A link already pulled (by this run or a dead one) is an ``InputError``:
        restore it first.
        """
        link = self.link(link)
        pull = self._pull(link, mode)
        held = self.pulls(link)
        if held:
            modes = ", ".join(sorted({e.entry.get("pull", "?") for e in held}))
            raise InputError(
                f"link {link.name} is already pulled ({modes}, lease {held[0].lease_id}); "
                f"restore it first (`hil link restore {link.name}`)"
            )
        key = (pull.end or link.a).host
        recorded: list[int] = []

        def change(undo: dict[str, Any]) -> None:
            undo.update(link=link.name, pull=pull.mode)
            recorded.append(self.journal.change(key, undo))

        log.info("link %s: pulling (%s)", link.name, pull.mode)
        try:
            pull_mode(pull.mode)(self, link, pull, change)
        except HilError:
            # Half a pull is worse than none: put back what was journaled.
            entries = [e for e in self.pulls(link) if e.id in recorded]
            report = self.journal.undo(entries)
            for failure in report.failed:
                log.warning("link %s: undoing a failed pull: %s", link.name, failure)
            raise
        return pull

    def restore(self, link: str | Link, mode: str | None = None) -> UndoReport:
        """Undo the journaled pulls of ``link`` (only those of ``mode`` when given).

        A link that is not pulled restores nothing: the report's ``undone`` is
        empty.  Failures raise ``RemoteError`` after every undo was tried.
        """
        link = self.link(link)
        if mode is not None:
            self._pull(link, mode)
        entries = [e for e in self.pulls(link) if mode in (None, e.entry.get("pull"))]
        if not entries:
            log.info("link %s is not pulled: nothing to restore", link.name)
            return UndoReport()
        report = self.journal.undo(entries)
        report.check(f"restoring link {link.name}")
        return report

    def state(self, link: str | Link) -> LinkState:
        """Both ends of ``link`` as their hosts see them, and its journaled pulls."""
        link = self.link(link)
        pulled = tuple(sorted({str(e.entry.get("pull", "")) for e in self.pulls(link)}))
        return LinkState(link.name, self._end_state(link.a), self._end_state(link.b), pulled)

    def _end_state(self, end: LinkEnd) -> EndState:
        netdev = self.netdev(end)
        agent = self.hosts.agent(end.host)
        info = agent.link(netdev)
        holed = self._blackholed(end.host, netdev, need_nft=False)
        ports, _ = rdma_ports(agent)
        port = next((p.state or "" for p in ports if p.netdev == netdev), "")
        return EndState(
            end.host, end.port, netdev, info.up, info.carrier, info.operstate, holed, port
        )

    def _blackholed(self, host: str, netdev: str, need_nft: bool) -> bool:
        """Whether hil's blackhole table of ``netdev`` exists on ``host``."""
        argv = tools.argv("nft", "list", "table", "netdev", blackhole_table(netdev))
        try:
            return self.hosts.agent(host).run(argv, STEP_TIMEOUT).status == 0
        except AgentCallError as e:
            if e.kind != "os":  # "os": nft could not be started
                raise
            if not need_nft:
                return False  # no nft on the host: nothing there can be blackholed
            raise RemoteError(
                host, f"cannot run nft ({e}); blackhole pulls need nftables on the host"
            ) from None

    # -- the modes ------------------------------------------------------------

    def _pull_admin(self, link: Link, pull: Pull, change: Change) -> None:
        end = pull.end or link.a
        netdev = self.netdev(end)
        wait = agent_undo("wait_link", f"wait for carrier on {netdev}", netdev=netdev, carrier=True)
        wait["timeout"] = CARRIER_TIMEOUT
        undo = agent_undo("set_link", f"set {netdev} up (link {link.name})", netdev=netdev, up=True)
        undo["then"] = [wait]
        change(undo)
        self.hosts.agent(end.host).set_link(netdev, up=False)

    def _pull_blackhole(self, link: Link, pull: Pull, change: Change) -> None:
        end = pull.end or link.a
        netdev = self.netdev(end)
        agent = self.hosts.agent(end.host)
        table = blackhole_table(netdev)
        if self._blackholed(end.host, netdev, need_nft=True):
            raise InputError(
                f"{end.host}: {netdev} is already blackholed by a table hil did not journal; "
                f"delete it by hand: nft delete table netdev {table}"
            )
        change(
            nft_table_undo(
                table, f"remove the blackhole of {netdev} (link {link.name})", STEP_TIMEOUT
            )
        )
        agent.run(
            tools.argv("nft", "-f", "-"), STEP_TIMEOUT, input=_blackhole_script(netdev), check=True
        )

    def _pull_command(self, link: Link, pull: Pull, change: Change) -> None:
        if pull.controller is None:
            raise InputError(f"link {link.name}: the command pull names no controller")
        what = f"link {link.name}: command template"
        down = templates.fill(pull.down, dict(pull.vars), what)
        up = templates.fill(pull.up, dict(pull.vars), what)
        change(ssh_undo(pull.controller, up, f"run the up command of link {link.name}"))
        self.hosts.session(pull.controller).run(down, timeout=STEP_TIMEOUT, check=True)


def register_pull_mode(mode: str, pull: PullFn) -> None:
    """Let links be pulled in ``mode`` by ``pull`` (see :mod:`hil.host.extensions`)."""
    _pull_modes.register(pull, name=mode)


def pull_mode(mode: str) -> PullFn:
    """The pull of ``mode``; InputError when nothing registered it."""
    return _pull_modes[mode]


register_pull_mode("admin", LinkControl._pull_admin)
register_pull_mode("blackhole", LinkControl._pull_blackhole)
register_pull_mode("command", LinkControl._pull_command)
