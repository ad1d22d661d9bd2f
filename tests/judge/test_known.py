"""Known kernel findings (hil.judge.known, through hil.judge.checks.assess).

The fixture is the real report: the passive guest's kernel log after the
destroy_terminate race sweep on the debug lab (6.1.192, 2026-12-01), as the
night's Allure attachment kept it (``host: line``).  The "different" reports
are that text edited here, as each test says.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hil.errors import InputError
from hil.judge import checks, known
from hil.judge.profiles import SIW
from hil.judge.timeline import KernelLogLine, ResourceCount

ROOT = Path(__file__).resolve().parents[2]
SPLAT = ROOT / "tests" / "data" / "kernel" / "siw-terminate-lockdep-6.1.192.txt"
TEST = (
    "suites/test_races.py::test_race_sweep_reaches_every_order_and_holds_the_contract"
    "[destroy_terminate-a-b]"
)
FINDINGS = known.load(ROOT / "suites" / "known-kernel-findings.yaml", ROOT)


def splat(text: str | None = None) -> tuple[KernelLogLine, ...]:
    lines = (text or SPLAT.read_text()).splitlines()
    return tuple(KernelLogLine(*line.split(": ", 1)) for line in lines if ": " in line)


def assess(
    log: tuple[KernelLogLine, ...], test: str = TEST, release: str = "6.1.192"
) -> checks.CheckResult:
    resources = (ResourceCount("lab4fec-1", "cm_id", 0, 0),)
    after = checks.AfterState(resources, log, {}, 0.5)
    scope = checks.Known(FINDINGS, test, (release,))
    return checks.assess(after, SIW, ("lab4fec-0", "lab4fec-1"), known=scope)


def test_the_real_report_is_the_known_finding_and_does_not_fail_the_test() -> None:
    result = assess(splat())
    assert result.ok
    (match,) = result.known
    assert match.finding.id == "siw-terminate-sk-callback-lock"
    assert match.report.host == "lab4fec-1"
    assert match.report.title == "WARNING: possible irq lock inversion dependency detected"
    assert match.report.lines[-1].line.strip() == "</TASK>"  # the whole report, no more
    assert "known kernel finding siw-terminate-sk-callback-lock on lab4fec-1" in (result.to_text())


def test_without_the_registry_the_same_report_fails_as_before() -> None:
    after = checks.AfterState((), splat(), {}, 0.5)
    result = checks.assess(after, SIW, ("lab4fec-0", "lab4fec-1"))
    assert not result.ok and not result.known
    assert "possible irq lock inversion" in result.to_text()


def test_a_lockdep_report_with_the_same_title_but_other_frames_still_fails() -> None:
    # The same inversion through another driver's callback: erdma has the same read_lock.
    other = (
        SPLAT.read_text()
        .replace("siw_cm_llp_state_change", "erdma_cm_llp_state_change")
        .replace("siw_send_terminate", "erdma_cm_send_terminate")
    )
    result = assess(splat(other))
    assert not result.ok and not result.known
    assert "WARNING: possible irq lock inversion dependency detected" in result.to_text()


def test_a_different_lockdep_report_still_fails() -> None:
    other = SPLAT.read_text().replace(
        "possible irq lock inversion dependency detected",
        "possible circular locking dependency detected",
    )
    result = assess(splat(other))
    assert not result.ok and not result.known


def test_another_report_in_the_same_log_still_fails() -> None:
    kasan = (
        KernelLogLine("lab4fec-1", "BUG: KASAN: slab-use-after-free in siw_qp_llp_close+0x1c/0x90"),
        KernelLogLine("lab4fec-1", "Read of size 8 at addr ffff888008703130 by task kworker/0:1"),
    )
    result = assess((*splat(), *kasan))
    assert not result.ok and len(result.known) == 1
    failed = [v.message for v in result.verdict.violations]
    assert failed == [f"lab4fec-1 kernel log: {kasan[0].line}"]


def test_a_ubsan_report_is_a_report_a_known_finding_can_name() -> None:
    # lib/ubsan.c (6.1): ubsan_prologue's rule and "UBSAN: %s in %s:%d:%d",
    # __ubsan_handle_out_of_bounds' "index %s is out of range for type %s", then
    # ubsan_epilogue's dump_stack (lib/dump_stack.c) and rule.
    rule = "=" * 80
    text = [
        rule,
        "UBSAN: array-index-out-of-bounds in drivers/infiniband/sw/siw/siw_qp.c:123:4",
        "index 5 is out of range for type 'u8 [4]'",
        "CPU: 0 PID: 12 Comm: kworker/0:1 Not tainted 6.1.192 #1",
        "Call Trace:",
        " <TASK>",
        " dump_stack_lvl+0x34/0x48",
        " __ubsan_handle_out_of_bounds+0x7e/0xa0",
        " siw_qp_modify+0x1a2/0x1c0 [siw]",
        " </TASK>",
        rule,
    ]
    finding = known.KnownFinding(
        "siw-qp-ubsan", "^UBSAN: array-index", ("siw_qp_modify",), ("6.1",), (TEST,), "x", "open"
    )
    log = tuple(KernelLogLine("lab4fec-1", x) for x in [*text, "siw: got TERMINATE"])
    after = checks.AfterState((), log, {}, 0.5)
    result = checks.assess(after, SIW, ("lab4fec-0", "lab4fec-1"))
    assert not result.ok
    result = checks.assess(
        after, SIW, ("lab4fec-0", "lab4fec-1"), known=checks.Known((finding,), TEST, ("6.1.192",))
    )
    assert result.ok and [m.finding.id for m in result.known] == ["siw-qp-ubsan"]
    assert [k.line for k in result.known[0].report.lines] == text[1:-1]


def test_the_finding_in_a_test_or_kernel_its_entry_does_not_name_fails_and_says_so() -> None:
    for result in (
        assess(splat(), test="suites/test_regressions.py::test_siw_x[a-b]"),
        assess(splat(), release="6.12.117"),
    ):
        assert not result.ok and not result.known
        assert result.elsewhere[0].finding.id == "siw-terminate-sk-callback-lock"
        assert "widen its entry if it is the same bug" in result.to_text()


def test_frames_the_unwinder_only_guessed_do_not_identify_a_report() -> None:
    lines = [
        "WARNING: possible irq lock inversion dependency detected",
        " ? siw_cm_llp_state_change+0x1a/0x170",
        " tcp_fin+0x216/0x3a0",
        " release_sock+0x4a/0x170",
        " tcp_sendmsg+0x2c/0x40",
        " siw_send_terminate+0xd60/0xfe0",
        " siw_cm_work_handler+0x2089/0x21a0",
    ]
    assert not assess(tuple(KernelLogLine("h", x) for x in lines)).known
    clean = [x.replace(" ? ", " ") for x in lines]
    assert assess(tuple(KernelLogLine("h", x) for x in clean)).known


def test_reports_end_at_their_trace_and_frames_never_start_one() -> None:
    lines = (
        KernelLogLine("h", "WARNING: CPU: 0 PID: 1 at net/core/sock.c:1 x"),
        KernelLogLine("h", " lockdep_hardirqs_on_prepare+0x273/0x3e0"),  # a frame
        KernelLogLine("g", "siw: got TERMINATE"),
        KernelLogLine("h", "---[ end trace 0000000000000000 ]---"),
        KernelLogLine("h", "siw: got TERMINATE"),
    )
    (report,) = known.reports(lines, checks.REPORT_START)
    assert [k.line for k in report.lines] == [lines[0].line, lines[1].line, lines[3].line]


ENTRY = {
    "id": "x-y",
    "title": "WARNING: x",
    "frames": ["f"],
    "kernels": ["6.1"],
    "tests": ["suites/test_races.py::t"],
    "upstream": "https://lore.kernel.org/x",
    "status": "open",
}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"title": "WARNING: ("}, "entry 1 (x-y): title 'WARNING: (' is not a regular expression"),
        ({"frames": "f"}, "entry 1: frames must be a list of names, not 'f'"),
        ({"frames": []}, "entry 1: missing frames"),
        ({"frames": ["f()"]}, "entry 1 (x-y): frame 'f()' is not a function name"),
        ({"kernels": ["latest"]}, "entry 1 (x-y): kernel 'latest' is not a release"),
        ({"tests": ["test_races"]}, "entry 1 (x-y): test 'test_races' is not a pytest node id"),
        ({"tests": ["suites/nope.py::t"]}, "entry 1 (x-y): test suites/nope.py::t: no file"),
        ({"id": "X Y"}, "entry 1 (X Y): id must be lower-case letters"),
        ({"upstream": " "}, "entry 1: missing upstream"),
        ({"extra": 1}, "entry 1: unknown key 'extra'"),
    ],
)
def test_a_bad_entry_is_named_with_what_is_wrong(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump([{**ENTRY, **change}]))
    with pytest.raises(InputError) as e:
        known.load(path, ROOT)
    assert str(e.value).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    "text, message",
    [
        ("{id: x}", "must be a list of entries"),
        ("[x]", "entry 1: must be a mapping"),
        ("- [", "not YAML"),
    ],
)
def test_a_bad_file_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        known.load(path, ROOT)
    with pytest.raises(InputError, match="cannot read the known kernel findings"):
        known.load(tmp_path / "absent.yaml", ROOT)


def test_an_id_listed_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump([ENTRY, ENTRY]))
    with pytest.raises(InputError, match="entry 2: id x-y is listed twice"):
        known.load(path, ROOT)


# The DUT's console after hil peer replay of a Reply with PD_Length 300 on the plain lab
# (6.1.192, 2026-12-06; docs/findings/siw-mpa-reply-pdlen-null-deref.md).
OOPS = ROOT / "tests" / "data" / "kernel" / "siw-mpa-reply-pdlen-oops-6.1.192.txt"
CRASHER = "suites/test_wire_conformance.py::test_dut_reacts_as_its_provider_says"


# The DUT's console after hil peer replay of docs/findings/replay/siw-p2p-bad-rtr-iwcm-bug.yaml
# on the plain lab (6.1.192, 2026-12-06).
IWCM_BUG = ROOT / "tests" / "data" / "kernel" / "siw-p2p-bad-rtr-iwcm-bug-6.1.192.txt"
# The same BUG() on the debug lab (KASAN), fuzz seed 61206 case 385 (2026-12-06).
IWCM_BUG_KASAN = ROOT / "tests" / "data" / "kernel" / "iwcm-bug-kasan-6.1.192.txt"


@pytest.mark.parametrize(
    "path, entry",
    [(OOPS, "siw-mpa-reply-pdlen-null-deref"), (IWCM_BUG, "siw-p2p-bad-rtr-iwcm-bug")],
)
def test_each_crash_of_the_peer_is_its_known_finding(path: Path, entry: str) -> None:
    (report,) = known.reports(splat(path.read_text()), checks.REPORT_START)
    (finding,) = [f for f in FINDINGS if f.recognises(report)]
    assert finding.id == entry and finding.crashes


PDLEN, BAD_RTR = "siw-mpa-reply-pdlen-null-deref", "siw-p2p-bad-rtr-iwcm-bug"
ON_IPV4 = "suites/test_wire_conformance.py::test_dut_reacts_on_ipv4"


@pytest.mark.parametrize(
    "test, releases, stops",
    [
        (f"{CRASHER}[a-b-mpa-reply-pd-too-long-ipv4]", ("6.1.192",), PDLEN),
        (f"{CRASHER}[b-a-mpa-reply-pd-too-long-ipv6]", ("6.1.192", "6.12.118"), PDLEN),
        (f"{ON_IPV4}[b-a-neg-p2p-bad-rtr-ipv4]", ("6.12.118",), BAD_RTR),
        (f"{CRASHER}[a-b-mpa-reply-pd-too-long-ipv4]", ("6.13.2",), None),
        (f"{CRASHER}[a-b-mpa-pd-too-long-ipv4]", ("6.1.192",), None),
        (TEST, ("6.1.192",), None),  # known there, but it does not stop the kernel
    ],
)
def test_a_crashing_entry_stops_only_the_tests_and_kernels_it_names(
    test: str, releases: tuple[str, ...], stops: str | None
) -> None:
    found = known.stopping(FINDINGS, test, releases)
    assert (None if found is None else found.id) == stops


def test_crashes_is_optional_and_must_be_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump([ENTRY, {**ENTRY, "id": "x-z", "crashes": True}]))
    assert [f.crashes for f in known.load(path, ROOT)] == [False, True]
    path.write_text(yaml.safe_dump([{**ENTRY, "crashes": "yes"}]))
    with pytest.raises(InputError, match="entry 1: crashes must be true or false, not 'yes'"):
        known.load(path, ROOT)


@pytest.mark.parametrize(
    "path, releases, explained",
    [
        (OOPS, ("6.1.192",), PDLEN),
        (IWCM_BUG, ("6.1.192", "6.12.118"), BAD_RTR),
        (IWCM_BUG, ("6.13.2",), None),  # a kernel the entry does not name
        (IWCM_BUG_KASAN, ("6.1.192",), BAD_RTR),  # die()'s header says KASAN: still one report
        (SPLAT, ("6.1.192",), None),  # known, but no crash (no ``crashes`` entry)
    ],
)
def test_a_crash_outside_any_test_is_known_by_its_report_and_kernel(
    path: Path, releases: tuple[str, ...], explained: str | None
) -> None:
    found = known.known_crash(splat(path.read_text()), FINDINGS, checks.REPORT_START, releases)
    assert (None if found is None else found.finding.id) == explained


# The DUT's kernel log after fuzz case 14 of seed 20261206 on the debug lab (6.1.192,
# 2026-12-06; docs/findings/siw-terminate-sk-callback-lock.md, its second report).
RTR_LOCKDEP = ROOT / "tests" / "data" / "kernel" / "siw-rtr-lockdep-6.1.192.txt"


def test_the_rtr_lockdep_report_is_one_report_that_an_entry_could_name() -> None:
    (report,) = known.reports(splat(RTR_LOCKDEP.read_text()), checks.REPORT_START)
    assert report.title == "WARNING: inconsistent lock state"
    stacks = report.stacks()
    assert ["_raw_read_lock", "siw_qp_llp_data_ready", "tcp_rcv_established"] == stacks[0][1:4]
    call = next(s for s in stacks if "siw_rtr_data_ready" in s)
    assert call[call.index("siw_rtr_data_ready") + 1] == "tcp_data_queue"
    assert [f.id for f in FINDINGS if f.recognises(report)] == ["siw-rtr-sk-callback-lock"]


def test_a_fuzz_case_tells_apart_a_report_known_on_its_kernel_whatever_the_entry_names() -> None:
    """An entry that names no test (the RTR lockdep) excuses nothing in a suite test, and
    its report in a fuzz case (``anywhere``) on the kernels it names only."""
    lines = splat(RTR_LOCKDEP.read_text())
    fuzz = "hil peer send-bad-crc-fuzz-61206-382"
    told = known.explain(lines, FINDINGS, checks.REPORT_START, fuzz, ("6.1.192",))
    assert not told.known and [m.finding.id for m in told.elsewhere] == ["siw-rtr-sk-callback-lock"]
    told = known.explain(lines, FINDINGS, checks.REPORT_START, fuzz, ("6.1.192",), anywhere=True)
    assert [m.finding.id for m in told.known] == ["siw-rtr-sk-callback-lock"]
    assert not any(checks.REPORT_START.search(k.line) for k in told.rest)
    told = known.explain(lines, FINDINGS, checks.REPORT_START, fuzz, ("6.12.118",), anywhere=True)
    assert not told.known


def test_a_fuzz_trigger_is_a_frame_a_field_and_a_bound_on_a_crashing_entry(
    tmp_path: Path,
) -> None:
    path = tmp_path / "known.yaml"
    trigger = {**ENTRY, "crashes": True, "fuzz_trigger": "mpa_reply pd_length > 256"}
    path.write_text(yaml.safe_dump([trigger]))
    (finding,) = known.load(path, ROOT)
    assert finding.fuzz_trigger == known.Trigger("mpa_reply", "pd_length", 256)
    assert finding.known_on("6.1.192") and not finding.known_on("6.12.118")
    path.write_text(yaml.safe_dump([{**trigger, "fuzz_trigger": "pd_length above 256"}]))
    with pytest.raises(InputError, match="fuzz_trigger 'pd_length above 256' is neither"):
        known.load(path, ROOT)
    path.write_text(yaml.safe_dump([{**trigger, "fuzz_trigger": "mpa_reply pd_length in 1..3"}]))
    (finding,) = known.load(path, ROOT)
    short = known.Trigger("mpa_reply", "pd_length", 0, 3)
    assert finding.fuzz_trigger == short and str(short) == "mpa_reply pd_length in 1..3"
    assert [v for v in range(6) if short.holds(v)] == [1, 2, 3]
    path.write_text(yaml.safe_dump([{**trigger, "fuzz_trigger": "mpa_reply pd_length in 3..1"}]))
    with pytest.raises(InputError, match="3..1 is an empty range"):
        known.load(path, ROOT)
    path.write_text(yaml.safe_dump([{**trigger, "crashes": False}]))
    with pytest.raises(InputError, match="fuzz_trigger is for an entry with crashes: true"):
        known.load(path, ROOT)
    path.write_text(yaml.safe_dump([{**trigger, "fuzz_trigger": "rtr invalid"}]))
    (finding,) = known.load(path, ROOT)
    assert finding.fuzz_trigger == known.InvalidFrame("rtr") and str(finding.fuzz_trigger) == (
        "rtr invalid"
    )
    path.write_text(yaml.safe_dump([{**trigger, "fuzz_trigger": "reply invalid"}]))
    with pytest.raises(InputError, match="nor 'rtr invalid'"):
        known.load(path, ROOT)


PD0 = ROOT / "tests" / "data" / "kernel" / "siw-mpa-reply-pd0-oops-6.1.192.txt"  # plain lab
PD_SHORT = ROOT / "tests" / "data" / "kernel" / "siw-mpa-reply-pd-short-kasan-6.1.192.txt"


def test_an_oops_rip_heads_its_call_trace_so_an_entry_can_name_where_it_stopped() -> None:
    (report,) = known.reports(splat(PD0.read_text()), checks.REPORT_START)
    assert report.stacks()[0][:3] == ["siw_cm_work_handler", "process_one_work", "worker_thread"]


@pytest.mark.parametrize(
    "path, entry",
    [
        (PD0, "siw-mpa-reply-enhanced-pd0-null-deref"),
        (PD_SHORT, "siw-mpa-reply-pd-short-oob"),
        (OOPS, "siw-mpa-reply-pdlen-null-deref"),  # still its own, not the PD_Length 0 one
    ],
)
def test_each_short_reply_crash_is_its_own_known_finding(path: Path, entry: str) -> None:
    found = known.known_crash(splat(path.read_text()), FINDINGS, checks.REPORT_START, ("6.1.192",))
    assert found is not None and found.finding.id == entry
    assert [f.id for f in FINDINGS if f.recognises(found.report)] == [entry]


def test_an_entry_may_name_no_suite_test(tmp_path: Path) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(yaml.safe_dump([{k: v for k, v in ENTRY.items() if k != "tests"}]))
    (finding,) = known.load(path, ROOT)
    assert finding.tests == () and not finding.known_in("suites/test_races.py::t", ("6.1.1",))
