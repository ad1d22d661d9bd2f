"""The impairment kinds: their netem words (tc-netem(8)), their range checks, ping's
parsing and each kind's proof against what a path would show."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.host.impairkinds import (
    IMPAIR_KINDS,
    ImpairKind,
    Impairment,
    Probe,
    check,
    kind,
    netem_words,
    parse_ping,
    random_probes,
    register_kind,
)

PING = """\
PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.
64 bytes from 198.18.0.2: icmp_seq=1 ttl=64 time=10.4 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=10.2 ms
64 bytes from 198.18.0.2: icmp_seq=2 ttl=64 time=10.3 ms (DUP!)

--- 198.18.0.2 ping statistics ---
3 packets transmitted, 2 received, +1 duplicates, 33.3333% packet loss, time 41ms
"""


@pytest.mark.parametrize(
    ("imp", "words"),
    [
        (Impairment("loss", percent=5), ["loss", "5%"]),
        (Impairment("delay", delay_ms=100, jitter_ms=10), ["delay", "100ms", "10ms"]),
        (Impairment("delay", delay_ms=100), ["delay", "100ms"]),
        (Impairment("reorder", percent=25, delay_ms=10), ["delay", "10ms", "reorder", "25%"]),
        (Impairment("duplicate", percent=2.5), ["duplicate", "2.5%"]),
        (Impairment("corrupt", percent=1), ["corrupt", "1%"]),
        (Impairment("rate", rate_kbit=1000), ["rate", "1000kbit"]),
        (Impairment("flap", every_s=2, down_s=0.5), []),
        (Impairment("mss", mss=536), []),
        (Impairment("drop-mpa-request"), []),
    ],
)
def test_each_kind_says_itself_in_netem_words(imp: Impairment, words: list[str]) -> None:
    assert netem_words(check(imp)) == words


@pytest.mark.parametrize(
    ("imp", "message"),
    [
        (Impairment("loss", percent=0), r"loss: percent is in \(0, 100\], not 0"),
        (Impairment("corrupt", percent=101), "not 101"),
        (Impairment("delay", delay_ms=10, jitter_ms=20), r"jitter_ms in \[0, delay_ms\]"),
        (Impairment("reorder", percent=5), "reorder: delay_ms is in"),
        (Impairment("rate", rate_kbit=1), "rate_kbit is at least 8"),
        (Impairment("flap", every_s=1, down_s=1), r"down_s is in \(0, every_s\)"),
        (Impairment("mss", mss=87), r"mss: mss is in \[88, 1459\] bytes, not 87"),
        (Impairment("mss"), "not 0"),
        (Impairment("mss", mss=1460), "not 1460"),
        (Impairment("drop-mpa-request", percent=10), "drop-mpa-request takes no values"),
        (
            Impairment("jam"),
            r"no impairment kind 'jam' \(known: corrupt, delay, drop-mpa-request, dup",
        ),
    ],
)
def test_values_out_of_range_are_refused_before_any_host_is_asked(
    imp: Impairment, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        check(imp)


def test_an_mss_clamp_and_a_flap_say_their_values() -> None:
    assert str(Impairment("mss", mss=536)) == "mss (clamped to 536 bytes)"
    assert str(Impairment("flap", every_s=2, down_s=1)) == "flap (down 1 s every 2 s)"
    assert str(Impairment("drop-mpa-request")) == "drop-mpa-request"


def test_ping_is_read_with_its_duplicates_and_round_trips() -> None:
    assert parse_ping(PING, 56) == Probe(3, 2, 1, (10.4, 10.2, 10.3), 56)


def test_ping_without_a_summary_is_an_input_error() -> None:
    with pytest.raises(InputError, match="ping printed no summary"):
        parse_ping("connect: Network is unreachable\n", 56)


def test_random_kinds_probe_enough_to_expect_twenty_hits() -> None:
    assert random_probes(Impairment("loss", percent=10)) == (200, 56)
    assert random_probes(Impairment("loss", percent=50)) == (50, 56)  # MIN_PROBES
    assert random_probes(Impairment("loss", percent=0.1)) == (1000, 56)  # MAX_PROBES
    corrupt = Impairment("corrupt", percent=20)
    plan = kind(corrupt).probes
    assert plan is not None and plan(corrupt) == (300, 56)  # a third of them seen: 3 times


def _probe(
    sent: int = 120, received: int = 120, dups: int = 0, rtts: tuple[float, ...] = ()
) -> Probe:
    return Probe(sent, received, dups, rtts or (0.5,) * received)


@pytest.mark.parametrize(
    ("imp", "probe", "why"),
    [
        (Impairment("loss", percent=10), _probe(received=117), None),
        (Impairment("loss", percent=10), _probe(received=118), "lost 2 of 120 probes"),
        (Impairment("corrupt", percent=10), Probe(360, 356, 0, (0.5,) * 356), None),
        (Impairment("corrupt", percent=10), Probe(360, 358, 0, (0.5,) * 358), "expected about 12"),
        (Impairment("duplicate", percent=10), _probe(dups=3), None),
        (Impairment("duplicate", percent=10), _probe(), "duplicated 0 of 120"),
        (Impairment("delay", delay_ms=20, jitter_ms=5), _probe(rtts=(15.2, 24.0)), None),
        (
            Impairment("delay", delay_ms=20),
            _probe(rtts=(0.4, 20.1)),
            "shortest round trip was 0.40",
        ),
        (Impairment("delay", delay_ms=20), _probe(received=0, rtts=()), "no reply"),
        (
            Impairment("reorder", percent=25, delay_ms=10),
            _probe(rtts=(0.4,) * 30 + (10.3,) * 90),
            None,
        ),
        (
            Impairment("reorder", percent=25, delay_ms=10),
            _probe(rtts=(10.3,) * 120),
            "sent ahead of the delay: 0 of 120",
        ),
        (
            Impairment("reorder", percent=25, delay_ms=10),
            _probe(rtts=(0.4,) * 120),
            "no probe was held back",
        ),
        (Impairment("rate", rate_kbit=1000), Probe(20, 20, 0, (12.0,) * 20, 1400), None),
        (Impairment("rate", rate_kbit=1000), Probe(20, 20, 0, (0.6,) * 20, 1400), "11.5 ms"),
    ],
)
def test_each_kind_proves_itself_or_says_what_the_path_showed(
    imp: Impairment, probe: Probe, why: str | None
) -> None:
    got = kind(imp).proof(imp, probe)
    assert got is None if why is None else (got is not None and why in got)


def test_a_kind_registered_twice_is_refused() -> None:
    loss = IMPAIR_KINDS["loss"]
    with pytest.raises(InputError, match="impairment kind 'loss' is registered already"):
        register_kind(ImpairKind("loss", loss.check, loss.netem, loss.probes, loss.proof))
