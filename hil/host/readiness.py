"""Readiness of a host's ports and of a pair: can a run on them be trusted?

Each check gives a :class:`Finding`: its name, the host, a status, what was
seen, what was expected and how to fix it.  ``fail`` means a run would be
untrustworthy (wrong device, driver or firmware, a link slower than the
inventory's, MTUs that differ between the ends, iwpmd missing where the
provider needs it, a module parameter that differs between the hosts);
``warn`` is worth a look but a run stays sound; ``info`` is recorded.

Doctor (``hil host doctor``) runs these before a run and changes nothing:
what pair setup will set (the inventory's MTU, a siw fallback device, pinned
module and devlink parameters) is reported as ``info``.  Pair setup runs them again once
the ports are configured (``phase="setup"``) and refuses the pair on a
``fail``.  The per-port checks live in :mod:`hil.host.portchecks`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hil.host.findings import Finding, Phase
from hil.host.portchecks import PortView, check_port

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair


@dataclass(frozen=True)
class Readiness:
    """The findings for a host or a pair (``target``)."""

    target: str
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True when no finding fails."""
        return not self.failures

    @property
    def failures(self) -> tuple[Finding, ...]:
        """The findings that make a run untrustworthy."""
        return tuple(f for f in self.findings if f.status == "fail")

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for ``hil host doctor --json``."""
        return {
            "target": self.target,
            "ok": self.ok,
            "findings": [asdict(f) for f in self.findings],
        }

    def refusal(self) -> str:
        """Why a pair is refused: each failing finding with its fix, one per line."""
        lines = "\n".join(f"  {f.line()}" for f in self.failures)
        return f"{self.target} is not ready ({len(self.failures)} failing checks):\n{lines}"


def host_readiness(hosts: Hosts, name: str) -> Readiness:
    """Every RNIC port of host ``name``, checked as doctor does (nothing changed)."""
    host = hosts.host(name)
    agent = hosts.agent(name)
    findings: list[Finding] = []
    for rnic in host.rnics:
        found, _ = check_port(agent, host, rnic, "doctor")
        findings += found
    return Readiness(name, tuple(findings))


def pair_readiness(
    hosts: Hosts,
    pair: Pair,
    phase: Phase = "doctor",
    rdma: bool = True,
) -> Readiness:
    """Both ends of ``pair`` and what must agree between them.

    ``rdma=False`` checks the network part only (pair setup without RDMA).
    """
    sides = ((pair.host_a, pair.rnic_a), (pair.host_b, pair.rnic_b))
    findings: list[Finding] = []
    views: list[PortView] = []
    for host, rnic in sides:
        found, view = check_port(hosts.agent(host.name), host, rnic, phase, rdma)
        findings += found
        views.append(view)
    a, b = views
    findings.append(_mtu_ends(pair.name, a, b))
    findings += _params_agree(pair, a, b, phase)
    findings += _devlink_agree(pair, a, b)
    return Readiness(pair.name, tuple(_mode_pinned(pair, findings)))


def _mode_pinned(pair: Pair, findings: list[Finding]) -> list[Finding]:
    """An irdma end not in iWARP mode is ``info`` when the link pins ``enable_iwarp true``:
    pair setup switches it after these checks (:mod:`hil.host.devlinkparams`), and the
    provider read then refuses a device that still is not iWARP (``roce_refusal``)."""
    if pair.devlink_params.get("enable_iwarp") != "true":
        return findings
    return [
        dataclasses.replace(
            f,
            status="info",
            fix="pair setup sets it (devlink_params of the link pin enable_iwarp true)",
        )
        if f.check == "rdma-mode" and f.status == "fail" and f.seen.startswith("not iWARP")
        else f
        for f in findings
    ]


def _mtu_ends(name: str, a: PortView, b: PortView) -> Finding:
    """The MTU each end will run with (the inventory's, which setup sets, else the current)."""
    ends = f"{a.host} {a.mtu}, {b.host} {b.mtu}"
    if a.mtu is None or b.mtu is None:
        return Finding("mtu-ends", name, "warn", f"not known on both ends ({ends})")
    if a.mtu != b.mtu:
        return Finding(
            "mtu-ends",
            name,
            "fail",
            f"the ends differ: {ends}",
            "the same MTU on both ends",
            "give both ports the same mtu in the inventory (pair setup sets it)",
        )
    return Finding("mtu-ends", name, "ok", f"{a.mtu} on both ends")


def _params_agree(pair: Pair, a: PortView, b: PortView, phase: Phase) -> list[Finding]:
    """Module parameters: equal on both hosts unless pinned; pinned ones as setup will set them."""
    if a.driver != b.driver or a.params is None or b.params is None:
        return []  # a mixed pair's drivers have different parameters; unread ones are findings
    if not a.params and not b.params:
        return [
            Finding("module-params", pair.name, "info", f"{a.driver} has no parameters hil knows")
        ]
    pinned = pair.module_params.get(a.driver or "", {})
    findings: list[Finding] = []
    for name in sorted(set(a.params) | set(b.params)):
        va, vb = a.params.get(name), b.params.get(name)
        if name in pinned:
            if phase == "doctor" and (va, vb) != (pinned[name], pinned[name]):
                findings.append(
                    Finding(
                        "module-param",
                        pair.name,
                        "info",
                        f"{a.driver}.{name}: {a.host} {va}, {b.host} {vb}",
                        f"{pinned[name]} (pinned)",
                        "pair setup sets it (module_params of the link)",
                    )
                )
            continue
        if va != vb:
            path = f"/sys/module/{a.driver}/parameters/{name}"
            findings.append(
                Finding(
                    "module-param",
                    pair.name,
                    "fail",
                    f"{a.driver}.{name} differs: {a.host} {va}, {b.host} {vb}",
                    "the same value on both hosts",
                    f"pin it in the link (module_params: {{{a.driver}: {{{name}: V}}}}) "
                    f"or write the same value to {path} on both hosts",
                )
            )
    if not findings:
        findings.append(
            Finding(
                "module-params",
                pair.name,
                "ok",
                f"{a.driver}: {len(a.params)} parameters alike on both hosts"
                + (f" ({len(pinned)} pinned)" if pinned else ""),
            )
        )
    return findings


def _devlink_agree(pair: Pair, a: PortView, b: PortView) -> list[Finding]:
    """An irdma pair's devlink parameters (ice's, on each end's PCI function): alike on both.

    One that differs and that the link does not pin (``devlink_params``: pair
    setup sets those alike) makes the two ends different machines (6.12's
    ``local_forwarding``, ``tx_scheduling_layers``; ``enable_iwarp`` fails the
    end's ``rdma-mode`` too).
    """
    if a.devlink is None or b.devlink is None:
        return []
    name, pinned = pair.name, pair.devlink_params
    va, vb = a.devlink.values, b.devlink.values
    differ = sorted(n for n in set(va) | set(vb) if va.get(n) != vb.get(n) and n not in pinned)
    if not differ:
        also = f" ({len(pinned)} pinned)" if pinned else ""
        return [Finding("devlink-params", name, "ok", f"{len(va)} alike on both hosts{also}")]
    return [
        Finding(
            "devlink-param",
            name,
            "fail",
            f"{n} differs: {a.host} {va.get(n, 'absent')}, {b.host} {vb.get(n, 'absent')}",
            "the same value on both hosts",
            f"set it alike: devlink dev param set {a.devlink.handle} name {n} value V "
            f"cmode CMODE on {a.host} (and {b.devlink.handle} on {b.host}), or pin a "
            f"runtime one in the link (devlink_params: {{{n}: V}})",
        )
        for n in differ
    ]
