"""Judge a peer scenario's run against the DUT's provider's expected reaction.

The reaction (:class:`hil.judge.peerexpect.PeerExpect`, for the DUT's provider and
the scenario's ``expectation`` class) is held against what the run saw:

- the TERMINATE: the first TERMINATE the peer received (its ``layer``, ``etype``,
  ``ecode``), or none;
- the close: the first ``fin``/``rst`` the peer received, or ``none``;
- the DUT's MPA frame (the first MPA request or reply the peer received): the fields
  the expectation's ``dut_mpa`` names (Rev, C, M, R, IRD/ORD, P2P, RTR);
- the DUT's CM events, lowercase without ``RDMA_CM_EVENT_`` (peerexpect's names): the
  expected ones appear in that order (others may sit between them, an id's events
  after the scenario's end, DISCONNECTED after the peer closed, among them); an
  expectation of none means the application saw none of peerexpect's kinds;
- the bound: where the provider's timer matters (``bound_s``), the close comes at
  most that long (plus :data:`BOUND_SLACK_S`) after the peer's last frame;
- the private data: every DUT cm event's is the start of what an MPA frame of the peer
  carried (RFC 5044 7.1: it is the peer's), in every scenario; more, or other bytes, is
  kernel memory handed to the application (only ever a provider's known finding,
  ``unsent_private_data``);
- the scenario's own steps (an expectation not met, a step that could not run, a DUT
  action that failed): they are written for the RFC, so they count only for a
  provider whose expectation holds no finding; a known departure stops them by nature.

Each failure cites the expectation's sources (driver file:line at the kernel
version, the RFC sections of the class), so a report says why the DUT was wrong.
A run that holds the expectation and whose expectation is a finding is a known
finding (:attr:`PeerVerdict.known_finding`): the suite records it apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hil.agent.protocol.mpa import HEADER
from hil.judge.peerexpect import RFC, Close, PeerExpect, Scenario, Term
from hil.judge.peerproviders import expect
from hil.judge.terminate import decode

# TCG guests: a timer's close reaches the peer within this of its bound (lab policy,
# docs/peer.md "Running scenarios against a DUT": siw's 5 s MPA timer was seen at
# 5.0-5.3 s on the lab's 6.1 guests).
BOUND_SLACK_S = 1.0
# The cm events peerexpect speaks of (its module docstring).
CM_KINDS = (
    "connect_request",
    "established",
    "rejected",
    "unreachable",
    "connect_error",
    "disconnected",
)


@dataclass(frozen=True)
class Failure:
    """One way the run departs from the expectation, and the sources that say so."""

    what: str
    sources: tuple[str, ...]

    def text(self) -> str:
        """The failure and its sources on one line."""
        return f"{self.what} [{'; '.join(self.sources)}]"


@dataclass(frozen=True)
class Observed:
    """What a run showed: the peer's record, the DUT's cm events (peerexpect's names,
    in order), and the scenario's own troubles (unmet step, peer error, DUT actions)."""

    record: tuple[Mapping[str, Any], ...]
    cm_events: tuple[str, ...]
    troubles: tuple[str, ...] = ()
    # The DUT's cm events that carried private data: (the event, its bytes in hex).
    private_data: tuple[tuple[str, str], ...] = ()

    def unsent(self) -> list[tuple[str, str]]:
        """Each DUT event whose private data is not the start of an MPA frame's private
        data the peer sent: (the event, a line with its length and what the peer sent).
        The frame's private data is its application's, or all the bytes after its header
        (``raw``): a DUT that does not see Linux's enhanced flag (0x10 of Res, siw's
        ``MPA_RR_FLAG_ENHANCED``, hil.agent.protocol.mpa) takes the IRD/ORD words for
        private data too."""
        frames = [
            e
            for e in self.record
            if e["dir"] == "tx" and e["frame"] in ("mpa_request", "mpa_reply")
        ]
        sent = [str(e.get("fields", {}).get("private_data", "")) for e in frames]
        on_wire = [str(e.get("raw", ""))[2 * HEADER :] for e in frames]
        return [
            (
                event,
                f"{event}: {len(data) // 2} bytes, the peer sent "
                f"{' or '.join(str(len(s) // 2) for s in sent) or 'no MPA frame'}",
            )
            for event, data in self.private_data
            if not any(s.startswith(data) for s in sent + on_wire)
        ]

    def unsent_private_data(self) -> list[str]:
        """The lines of :meth:`unsent`."""
        return [line for _, line in self.unsent()]

    @property
    def terminate(self) -> Term | None:
        """The first TERMINATE the peer received, as (layer, etype, ecode)."""
        for entry in self.record:
            fields = entry.get("fields", {})
            if entry["dir"] == "rx" and fields.get("opcode") == "terminate":
                # A value the codec could not read as an int (a fuzzed frame) is -1.
                got = [fields.get(k) for k in ("layer", "etype", "ecode")]
                layer, etype, ecode = (v if isinstance(v, int) else -1 for v in got)
                return (layer, etype, ecode)
        return None

    @property
    def close(self) -> Close:
        """The DUT's close as the peer saw it first: ``fin``, ``rst``, or ``none``."""
        for entry in self.record:
            if entry["dir"] == "rx" and entry["frame"] in ("fin", "rst"):
                return "fin" if entry["frame"] == "fin" else "rst"
        return "none"

    @property
    def dut_mpa(self) -> tuple[str, Mapping[str, Any]] | None:
        """The first MPA request or reply the peer received: its kind and fields."""
        for entry in self.record:
            if entry["dir"] == "rx" and entry["frame"] in ("mpa_request", "mpa_reply"):
                return str(entry["frame"]), entry.get("fields", {})
        return None

    def close_after_s(self) -> float | None:
        """Seconds from the peer's last frame before the DUT's close to that close."""
        last_tx = None
        for entry in self.record:
            if entry["dir"] == "tx":
                last_tx = entry["t_ns"]
            elif entry["frame"] in ("fin", "rst"):
                return None if last_tx is None else (entry["t_ns"] - last_tx) / 1e9
        return None


@dataclass(frozen=True)
class PeerVerdict:
    """A scenario's run judged against ``provider``'s expectation."""

    scenario: str
    provider: str
    expectation: PeerExpect
    failures: tuple[Failure, ...]

    @property
    def ok(self) -> bool:
        """The DUT reacted as its provider's expectation says."""
        return not self.failures

    @property
    def known_finding(self) -> str:
        """The expectation's departure from the RFC when the run held it ("" otherwise)."""
        return self.expectation.finding if self.ok else ""

    def to_text(self) -> str:
        """The verdict in a few lines, each failure with its sources."""
        head = f"peer scenario {self.scenario} against {self.provider}: "
        if not self.ok:
            return head + "FAILED\n" + "\n".join(f"  - {f.text()}" for f in self.failures)
        if self.known_finding:
            return head + f"as expected, a known finding: {self.known_finding}"
        return head + "as expected"


def judge(scenario: str, expectation: str, provider: str, seen: Observed) -> PeerVerdict:
    """``seen`` against ``provider``'s expected reaction to class ``expectation``;
    InputError when peerexpect holds none for them."""
    exp = expect(provider, expectation)
    sources = (*exp.sources, *RFC[Scenario(expectation)].sources)
    failures = [
        *_terminate(exp, seen, sources),
        *_close(exp, seen, sources),
        *_dut_mpa(exp, seen, sources),
        *_events(exp, seen, sources),
        *_bound(exp, seen),
        *_private_data(exp, seen, sources),
    ]
    if not exp.finding:
        failures += [Failure(t, (f"the scenario {scenario}'s steps",)) for t in seen.troubles]
    return PeerVerdict(scenario, provider, exp, tuple(failures))


def _terminate(exp: PeerExpect, seen: Observed, sources: tuple[str, ...]) -> list[Failure]:
    got = seen.terminate
    if got == exp.terminate:
        return []
    want = "no TERMINATE" if exp.terminate is None else f"TERMINATE {decode(*exp.terminate)}"
    have = "none" if got is None else decode(*got)
    return [Failure(f"expected {want}, got {have}", sources)]


def _close(exp: PeerExpect, seen: Observed, sources: tuple[str, ...]) -> list[Failure]:
    if seen.close == exp.close:
        return []
    return [Failure(f"expected close {exp.close!r}, the peer saw {seen.close!r}", sources)]


def _dut_mpa(exp: PeerExpect, seen: Observed, sources: tuple[str, ...]) -> list[Failure]:
    if not exp.dut_mpa:
        return []
    want = " ".join(f"{k}={v}" for k, v in exp.dut_mpa.items())
    frame = seen.dut_mpa
    if frame is None:
        return [Failure(f"expected the DUT's MPA frame with {want}, the peer got none", sources)]
    kind, fields = frame
    wrong = {k: fields.get(k) for k, v in exp.dut_mpa.items() if fields.get(k) != v}
    if not wrong:
        return []
    got = " ".join(f"{k}={v}" for k, v in wrong.items())
    return [Failure(f"expected the DUT's {kind} with {want}, it had {got}", sources)]


def _events(exp: PeerExpect, seen: Observed, sources: tuple[str, ...]) -> list[Failure]:
    events = [e for e in seen.cm_events if e in CM_KINDS]
    if _in_order(exp.cm_events, events) and (exp.cm_events or not events):
        return []
    want = ", ".join(exp.cm_events) or "none"
    return [Failure(f"expected cm events {want} in order, the DUT saw {events or 'none'}", sources)]


def _private_data(exp: PeerExpect, seen: Observed, sources: tuple[str, ...]) -> list[Failure]:
    unsent = seen.unsent_private_data()
    if bool(unsent) == exp.unsent_private_data:
        return []
    if unsent:
        what = "the DUT's application got private data the peer never sent (kernel memory?)"
        return [Failure(f"{what}: {'; '.join(unsent)}", sources)]
    return [
        Failure("expected private data the peer never sent (a known finding), got none", sources)
    ]


def _in_order(wanted: Sequence[str], events: Sequence[str]) -> bool:
    rest = iter(events)
    return all(any(e == w for e in rest) for w in wanted)


def _bound(exp: PeerExpect, seen: Observed) -> list[Failure]:
    took = seen.close_after_s()
    if exp.bound_s is None or took is None or took <= exp.bound_s + BOUND_SLACK_S:
        return []
    what = f"closed {took:.2f} s after the peer's last frame, bound {exp.bound_s:g} s"
    return [Failure(f"{what} + {BOUND_SLACK_S:g} s", exp.sources)]


def record_text(record: Sequence[Mapping[str, Any]]) -> str:
    """The peer's record, one frame a line: ms since its first, direction, kind and the
    fields that tell frames apart (opcode, a TERMINATE's codes, MPA flags)."""
    if not record:
        return "  (the peer recorded no frame)"
    t0 = record[0]["t_ns"]
    lines = []
    for entry in record:
        fields = entry.get("fields", {})
        shown = {k: fields[k] for k in _SHOWN if k in fields}
        brief = " ".join(f"{k}={v}" for k, v in shown.items())
        ms = (entry["t_ns"] - t0) / 1e6
        lines.append(f"  {ms:9.1f} ms {entry['dir']} {entry['frame']} {brief}".rstrip())
    return "\n".join(lines)


_SHOWN = (
    *("opcode", "layer", "etype", "ecode", "rev", "m", "c", "r", "crc_ok", "stag", "msn"),
    *("ird", "ord", "p2p", "rtr"),
)
