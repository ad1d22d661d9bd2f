"""The kinds of impairment hil puts on a link's path, and how each proves itself.

An :class:`Impairment` is one kind with its values; the registry ``IMPAIR_KINDS``
turns it into tc-netem(8) words (where netem does it) and judges a
:class:`Probe`, ping's record of the impaired direction, against what was asked:
an impairment the path does not show is "impairment not effective", never a pass.

A new kind: register an :class:`ImpairKind` with its netem words and its proof.
Flapping (down for ``down_s`` every ``every_s``) is no netem: :mod:`hil.host.impair`
takes the port toward the receiver down and up itself and counts the downs.  Nor is
an MSS clamp (``mss``): a middlebox rewrites the MSS option of the SYNs coming from the
receiver, and the wire proves it (:mod:`hil.wire.mss_rules`); nor the one-shot drop of
the sender's first MPA request (``drop-mpa-request``), which the wire proves by its
retransmission (:mod:`hil.wire.mpadrop_rules`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from hil.errors import InputError
from hil.registry import Registry

# ping(8) on the sender toward the receiver: the request crosses the impaired direction,
# the reply the other one.  Probes are spaced PROBE_INTERVAL_S (root may go below 0.2 s,
# ping(8) -i) and each waits up to PROBE_WAIT_S for its reply.
PROBE_INTERVAL_S = 0.01
PROBE_WAIT_S = 2
MIN_PROBES = 50
MAX_PROBES = 1000
# A random impairment of p % is shown when the probes see at least a fifth of the
# expected count; the probe count makes that expectation EXPECTED_HITS, so that a real
# p % misses the bar (4 of an expected 20) with probability 3e-6 (Poisson tail
# P(X <= 3), mean 20; the binomial's is thinner), for some ten probes a suites run.
EXPECTED_HITS = 20
SHOWN_FRACTION = 1 / 5
ICMP_OVERHEAD = 42  # Ethernet 14 + IPv4 20 + ICMP 8 bytes around ping's -s payload
# The kind that drops the first segment whose payload begins with the MPA request's key
# (hil.host.impair.mpa_drop_script), once: TCP must retransmit it.
DROP_MPA_REQUEST = "drop-mpa-request"


@dataclass(frozen=True)
class Impairment:
    """One impairment of one direction: ``kind`` (a registered one) and its values.

    ``percent`` (loss, duplicate, corrupt, reorder), ``delay_ms`` and ``jitter_ms``
    (delay; reorder's delay of the packets it does not reorder), ``rate_kbit`` (rate),
    ``every_s`` and ``down_s`` (flap), ``mss`` (mss: the largest TCP segment, in bytes of
    payload, the receiver is announced to take).
    """

    kind: str
    percent: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    rate_kbit: int = 0
    every_s: float = 0.0
    down_s: float = 0.0
    mss: int = 0

    def __str__(self) -> str:
        words = netem_words(self)
        if words:
            return f"{self.kind} ({' '.join(words)})"
        if self.mss:
            return f"{self.kind} (clamped to {self.mss} bytes)"
        if not self.every_s:
            return self.kind  # a kind without values (drop-mpa-request)
        return f"{self.kind} (down {self.down_s:g} s every {self.every_s:g} s)"


@dataclass(frozen=True)
class Probe:
    """What ping saw on one direction: probes sent, replies, duplicates, round trips (ms)."""

    sent: int
    received: int
    duplicates: int
    rtts_ms: tuple[float, ...]
    size: int = 56

    @property
    def lost(self) -> int:
        """Probes with no reply."""
        return self.sent - self.received

    def to_text(self) -> str:
        """One line for a report or a failure."""
        rtt = (
            f", rtt min {min(self.rtts_ms):.2f} max {max(self.rtts_ms):.2f} ms"
            if self.rtts_ms
            else ""
        )
        return (
            f"{self.sent} probes, {self.lost} lost, {self.duplicates} duplicated{rtt}"
            f" ({self.size}-byte payload)"
        )


@dataclass(frozen=True)
class ImpairKind:
    """A registered kind: its values' check, its netem words (None: not netem) and its
    probe plan (how many, how big; None: not proven by ping) and proof (None when the
    probe shows the impairment, else why not)."""

    name: str
    check: Callable[[Impairment], None]
    netem: Callable[[Impairment], list[str]] | None
    probes: Callable[[Impairment], tuple[int, int]] | None
    proof: Callable[[Impairment, Probe], str | None]


IMPAIR_KINDS: Registry[ImpairKind] = Registry("impairment kind", name_of=lambda k: k.name)


def register_kind(kind: ImpairKind) -> ImpairKind:
    """Add a kind of impairment (a name taken twice is refused)."""
    return IMPAIR_KINDS.register(kind)


def kind(imp: Impairment) -> ImpairKind:
    """The registered kind of ``imp``; InputError naming the known kinds."""
    return IMPAIR_KINDS[imp.kind]


def check(imp: Impairment) -> Impairment:
    """``imp``, once its kind is known and its values are in range (InputError otherwise)."""
    kind(imp).check(imp)
    return imp


def netem_words(imp: Impairment) -> list[str]:
    """``imp`` in tc-netem(8) words; [] for a kind netem does not do (flap)."""
    words = kind(imp).netem
    return words(imp) if words is not None else []


# -- checks and proofs -------------------------------------------------------


def _percent(imp: Impairment) -> None:
    if not 0 < imp.percent <= 100:
        raise InputError(f"{imp.kind}: percent is in (0, 100], not {imp.percent:g}")


def _delay(imp: Impairment) -> None:
    if not 0 < imp.delay_ms <= 60_000 or not 0 <= imp.jitter_ms <= imp.delay_ms:
        raise InputError(
            f"{imp.kind}: delay_ms is in (0, 60000] and jitter_ms in [0, delay_ms], "
            f"not {imp.delay_ms:g} and {imp.jitter_ms:g}"
        )


def _reorder(imp: Impairment) -> None:
    _percent(imp)
    _delay(imp)  # netem reorders by sending some packets at once, ahead of delayed ones


def _rate(imp: Impairment) -> None:
    if imp.rate_kbit < 8:
        raise InputError(f"rate: rate_kbit is at least 8, not {imp.rate_kbit}")


def _flap(imp: Impairment) -> None:
    if not 0 < imp.down_s < imp.every_s:
        raise InputError(
            f"flap: down_s is in (0, every_s), not {imp.down_s:g} (every_s {imp.every_s:g})"
        )


# The MSS a clamp may set: at least TCP_MIN_MSS (88, include/net/tcp.h, Linux 6.1), which
# the kernel raises a smaller announced MSS to anyway; below an Ethernet link's 1460
# (RFC 9293 section 3.7.1: MTU less 40 bytes of IPv4 and TCP headers), else nothing changes.
MSS_MIN, MSS_MAX = 88, 1459


def _mss(imp: Impairment) -> None:
    if not MSS_MIN <= imp.mss <= MSS_MAX:
        raise InputError(f"mss: mss is in [{MSS_MIN}, {MSS_MAX}] bytes, not {imp.mss}")


def _no_values(imp: Impairment) -> None:
    if imp != Impairment(imp.kind):
        raise InputError(f"{imp.kind} takes no values, not {imp!r}")


def random_probes(imp: Impairment, shows: float = 1.0) -> tuple[int, int]:
    """Enough probes that a p % impairment, of which the probes see the fraction
    ``shows``, is expected EXPECTED_HITS times (ping's -s 56)."""
    n = math.ceil(round(EXPECTED_HITS * 100 / (imp.percent * shows), 6))  # 180.0000001: 180
    return min(MAX_PROBES, max(MIN_PROBES, n)), 56


def _shown(imp: Impairment, probe: Probe, seen: int, what: str, shows: float = 1.0) -> str | None:
    expected = probe.sent * imp.percent * shows / 100
    if seen >= max(1.0, expected * SHOWN_FRACTION):
        return None
    return f"{what} {seen} of {probe.sent} probes, expected about {expected:.0f}"


def _loss_proof(imp: Impairment, probe: Probe) -> str | None:
    return _shown(imp, probe, probe.lost, "lost")


# The share of corrupted probes the receiver drops: netem flips a bit of the frame's
# linear part (sch_netem.c netem_enqueue, 6.1), and a flip in the source MAC, for one,
# is delivered.  [lab, 2026-12-05: corrupt 5 %, 4 of 240 probes lost, about a third]
CORRUPT_SHOWS = 1 / 3


def _corrupt_probes(imp: Impairment) -> tuple[int, int]:
    return random_probes(imp, CORRUPT_SHOWS)


def _corrupt_proof(imp: Impairment, probe: Probe) -> str | None:
    return _shown(imp, probe, probe.lost, "lost", CORRUPT_SHOWS)


def _duplicate_proof(imp: Impairment, probe: Probe) -> str | None:
    return _shown(imp, probe, probe.duplicates, "duplicated")


def _delay_proof(imp: Impairment, probe: Probe) -> str | None:
    # netem adds delay_ms +/- jitter_ms to each packet (tc-netem(8), DELAY).
    floor = imp.delay_ms - imp.jitter_ms
    if probe.rtts_ms and min(probe.rtts_ms) >= floor * 0.95:
        return None
    least = f"{min(probe.rtts_ms):.2f} ms" if probe.rtts_ms else "no reply"
    return f"the shortest round trip was {least}, below the {floor:g} ms asked"


def _reorder_proof(imp: Impairment, probe: Probe) -> str | None:
    # Reordered packets skip the delay (tc-netem(8), REORDERING): some round trips must
    # be short, the others at least the delay.
    fast = sum(1 for r in probe.rtts_ms if r < imp.delay_ms / 2)
    if not any(r >= imp.delay_ms * 0.95 for r in probe.rtts_ms):
        return f"no probe was held back by the {imp.delay_ms:g} ms delay"
    return _shown(imp, probe, fast, "sent ahead of the delay:")


def _rate_probes(imp: Impairment) -> tuple[int, int]:
    return 20, 1400


def _rate_proof(imp: Impairment, probe: Probe) -> str | None:
    # A frame of B bytes leaves a rate-limited queue no sooner than 8 B / rate.
    least_ms = 8 * (probe.size + ICMP_OVERHEAD) / imp.rate_kbit
    if probe.rtts_ms and min(probe.rtts_ms) >= least_ms * 0.9:
        return None
    seen = f"{min(probe.rtts_ms):.2f} ms" if probe.rtts_ms else "no reply"
    return f"the shortest round trip was {seen}, below the {least_ms:.1f} ms a frame takes"


def _delay_probes(imp: Impairment) -> tuple[int, int]:
    return 10, 56


def _reorder_probes(imp: Impairment) -> tuple[int, int]:
    return random_probes(imp)


def _no_probe_proof(imp: Impairment, probe: Probe) -> str | None:
    # proven by its own count (flap: hil.host.impair) or on the wire (mss, drop-mpa-request)
    return None


for _kind in (
    ImpairKind("loss", _percent, lambda i: ["loss", f"{i.percent:g}%"], random_probes, _loss_proof),
    ImpairKind(
        "delay",
        _delay,
        lambda i: ["delay", f"{i.delay_ms:g}ms", *([f"{i.jitter_ms:g}ms"] if i.jitter_ms else [])],
        _delay_probes,
        _delay_proof,
    ),
    ImpairKind(
        "reorder",
        _reorder,
        lambda i: ["delay", f"{i.delay_ms:g}ms", "reorder", f"{i.percent:g}%"],
        _reorder_probes,
        _reorder_proof,
    ),
    ImpairKind(
        "duplicate",
        _percent,
        lambda i: ["duplicate", f"{i.percent:g}%"],
        random_probes,
        _duplicate_proof,
    ),
    # Most corrupted frames fail a checksum at the receiver and are dropped: the probe
    # sees them as lost (netem computes a CHECKSUM_PARTIAL frame's checksum before it
    # flips the bit: sch_netem.c netem_enqueue, Linux 6.1).
    ImpairKind(
        "corrupt",
        _percent,
        lambda i: ["corrupt", f"{i.percent:g}%"],
        _corrupt_probes,
        _corrupt_proof,
    ),
    ImpairKind("rate", _rate, lambda i: ["rate", f"{i.rate_kbit}kbit"], _rate_probes, _rate_proof),
    ImpairKind("flap", _flap, None, None, _no_probe_proof),
    ImpairKind("mss", _mss, None, None, _no_probe_proof),
    ImpairKind(DROP_MPA_REQUEST, _no_values, None, None, _no_probe_proof),
):
    register_kind(_kind)

_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?")
_RTT = re.compile(r"time=([\d.]+) ms")


def parse_ping(stdout: str, size: int) -> Probe:
    """ping(8)'s output as a :class:`Probe`; InputError when it printed no summary."""
    m = _SUMMARY.search(stdout)
    if m is None:
        raise InputError(f"ping printed no summary: {stdout.strip()[-200:]!r}")
    rtts = tuple(float(r) for r in _RTT.findall(stdout))
    return Probe(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), rtts, size)
