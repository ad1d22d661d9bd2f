"""Known kernel findings: kernel reports already found, filed, and told apart from new ones.

``suites/known-kernel-findings.yaml`` (or ``--hil-known-kernel-findings FILE``)
lists them; each entry names one report by its title line and the stack
frames that identify it, and where it is known::

    - id: siw-terminate-sk-callback-lock
      title: "WARNING: possible irq lock inversion dependency detected"   # a regex
      frames: [siw_cm_llp_state_change, tcp_fin, release_sock, siw_send_terminate]
      kernels: ["6.1"]                # release prefixes: 6.1 covers 6.1.192
      tests: ["suites/test_races.py::test_x[destroy_terminate-a-b]"]   # as known-flaky
      upstream: docs/findings/siw-terminate-sk-callback-lock.md      # a link or a path
      status: not sent upstream yet
      crashes: true                   # optional: the report stops the kernel (below)

An entry with ``crashes: true`` is a report after which the kernel does not go
on (an oops in a worker, a panic): a test it names is not run on a kernel it
names (:func:`stopping`; the plugin skips it, naming the entry, unless
``--hil-rerun-crashers``), since running it only costs the host.

A kernel log is cut into reports (:func:`reports`): a report begins at a
line the kernel-log rule would fail (:data:`~hil.judge.expectations.BAD_KERNEL_LINE`:
a WARNING, BUG, UBSAN, RCU stall, hung-task ``INFO:`` line and the like) that is not a
stack frame, and ends
at its ``</TASK>`` or ``---[ end trace`` line, or where the next one begins.
A report matches an entry when the title pattern is found in its first line
and the entry's frames appear in one of its stacks in that order, innermost
first as printed (other frames may sit between them; ``?`` frames, which the
unwinder only guessed, do not count).  :func:`explain` splits a test's log
into the known reports (the entry names the test and one of the pair's
kernels) and the rest, which the kernel-log rule judges as before; a report
that matches an entry known elsewhere is not excused, and is named with the
entry so the list can be widened if it is the same bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import yaml

from hil.errors import InputError
from hil.judge.timeline import KernelLogLine

FIELDS = ("id", "title", "frames", "kernels", "upstream", "status")
# tests: [] (or none) for a finding no suite test shows, only the fuzzer and its replays.
OPTIONAL = ("tests", "crashes", "fuzz_trigger")
LISTS = ("frames", "kernels", "tests")
# A stack frame line (a report starts at what the kernel-log rule fails on, the caller's
# ``starts``: hil.judge.checks.REPORT_START, i.e. hil.judge.expectations.BAD_KERNEL_LINE).
FRAME = re.compile(r"^\s*(?:\[<[0-9a-f]+>\]\s*)?(\? )?([A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+")
END = re.compile(r"</TASK>|---\[ end trace")
RIP = re.compile(r"\bRIP: [0-9a-f]+:([A-Za-z_][\w.]*)\+0x")  # x86's faulting function
# x86's page fault oops prints its "BUG: ..." line and the "#PF:" lines, then die()'s
# "Oops: ..." header and the stack (arch/x86/mm/fault.c page_fault_oops, show_fault_oops;
# arch/x86/kernel/dumpstack.c __die_header): one report, whose "Oops:" starts nothing.
# BUG() is the same: "kernel BUG at FILE:LINE!" (lib/bug.c report_bug), then die()'s
# header "invalid opcode: 0000 [#1] SMP KASAN" (arch/x86/kernel/traps.c handle_invalid_op,
# __die_header's "%s: %04lx [#%d]"), which a debug kernel's "KASAN" makes a report line.
OOPS = re.compile(r"^\s*(?:Oops: |[a-z][a-z ]*: [0-9a-f]{4} \[#\d+\])")
ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
# "mpa_reply pd_length > 256", "mpa_reply pd_length in 1..3"
TRIGGER = re.compile(r"^([a-z_]+) ([a-z_]+) (?:> (\d+)|in (\d+)\.\.(\d+))$")
# "rtr invalid": the frames a DUT can tell to be malformed only as a whole.
INVALID_TRIGGER = re.compile(r"^(rtr) invalid$")


# The address families the plugin gives suite tests (hil.plugin.fixtures): the last
# part of their parameters' id, "-ipv4" or "-ipv6".
FAMILY_IDS = ("ipv4", "ipv6")


def covers(entry: str, nodeid: str) -> bool:
    """Whether a list's node id ``entry`` covers the test ``nodeid``: the same id; an entry
    without ``[params]`` every variant; an entry without a family (``[a-b]``) every family
    (``[a-b-ipv4]``, ``[a-b-ipv6]``)."""
    if "[" not in entry:
        return nodeid.split("[")[0] == entry
    return nodeid == entry or any(nodeid == f"{entry[:-1]}-{f}]" for f in FAMILY_IDS)


@dataclass(frozen=True)
class Trigger:
    """A frame the reference peer sends whose ``field`` is above ``above`` (and at most
    ``up_to``, when it is set): what sets off a finding that stops the kernel, so that the
    fuzzer need not run it again."""

    frame: str
    field: str
    above: int
    up_to: int | None = None

    def holds(self, value: int) -> bool:
        """Whether a sent ``value`` of the field sets the finding off."""
        return value > self.above and (self.up_to is None or value <= self.up_to)

    def __str__(self) -> str:
        if self.up_to is None:
            return f"{self.frame} {self.field} > {self.above}"
        return f"{self.frame} {self.field} in {self.above + 1}..{self.up_to}"


@dataclass(frozen=True)
class InvalidFrame:
    """A frame the DUT parses in ``frame``'s place that is no valid one, what sets off a
    finding that stops the kernel.  ``rtr``: the first frame a DUT in peer-to-peer mode
    reads after the peer's MPA request, where RFC 6581 5.2 puts the peer's RTR."""

    frame: Literal["rtr"]

    def __str__(self) -> str:
        return f"{self.frame} invalid"


FuzzTrigger: TypeAlias = Trigger | InvalidFrame


@dataclass(frozen=True)
class KnownFinding:
    """One known kernel report: how to recognise it, where it is known, where it is filed."""

    id: str
    title: str  # a regular expression searched in the report's first line
    frames: tuple[str, ...]  # function names, innermost first, in one stack of the report
    kernels: tuple[str, ...]  # release prefixes (6.1 covers 6.1.192)
    tests: tuple[str, ...]  # pytest node ids; without [params] every variant
    upstream: str
    status: str
    crashes: bool = False  # the report stops the kernel: the tests it names are not run
    fuzz_trigger: FuzzTrigger | None = None  # a fuzz case that sends it is not run (crashes only)

    def recognises(self, report: KernelReport) -> bool:
        """Whether ``report`` is this finding: its title, and the frames in one stack."""
        if not re.search(self.title, report.title):
            return False
        return any(_in_order(self.frames, stack) for stack in report.stacks())

    def known_on(self, release: str) -> bool:
        """Whether the entry names this kernel release (6.1 names 6.1.192)."""
        return any(_release_of(release, k) for k in self.kernels)

    def known_in(self, test: str, releases: Iterable[str]) -> bool:
        """Whether the entry covers this test on one of these kernel releases."""
        in_test = any(covers(t, test) for t in self.tests)
        return in_test and any(_release_of(r, k) for r in releases for k in self.kernels)


def stopping(
    findings: Iterable[KnownFinding], test: str, releases: Iterable[str]
) -> KnownFinding | None:
    """The ``crashes`` entry that covers ``test`` on one of these kernel releases: the
    test would only stop the kernel again; None when there is none."""
    releases = tuple(releases)
    return next((f for f in findings if f.crashes and f.known_in(test, releases)), None)


@dataclass(frozen=True)
class KernelReport:
    """One report in one host's kernel log: its lines, the first one its title."""

    host: str
    lines: tuple[KernelLogLine, ...]

    @property
    def title(self) -> str:
        return self.lines[0].line.strip()

    def stacks(self) -> list[list[str]]:
        """Each run of stack-frame lines as function names, ``?`` frames left out; an oops's
        ``RIP:`` function (where it stopped, which its call trace does not name) heads the
        run that follows it."""
        runs: list[list[str]] = [[]]
        rip = ""
        for k in self.lines:
            frame = FRAME.match(k.line)
            if frame is None:
                if runs[-1]:
                    runs.append([])
                at = RIP.search(k.line)
                rip = at.group(1) if at else rip
            elif not frame.group(1):
                if rip and not runs[-1]:
                    runs[-1].append(rip)
                    rip = ""
                runs[-1].append(frame.group(2))
        return [r for r in runs if r]

    def text(self) -> str:
        """The report as the host logged it."""
        return "\n".join(k.line for k in self.lines)


@dataclass(frozen=True)
class Match:
    """A report and the entry it matched."""

    finding: KnownFinding
    report: KernelReport

    def line(self) -> str:
        """``known kernel finding siw-x on host-b: WARNING: ... (docs/findings/x.md)``."""
        return (
            f"known kernel finding {self.finding.id} on {self.report.host}: "
            f"{self.report.title} ({self.finding.upstream})"
        )


@dataclass(frozen=True)
class Explained:
    """A test's kernel log split: known reports, reports known elsewhere, the rest."""

    known: tuple[Match, ...]
    elsewhere: tuple[Match, ...]  # recognised, but the entry does not name this test/kernel
    rest: tuple[KernelLogLine, ...]  # every line not in a known report, in order


def reports(lines: Sequence[KernelLogLine], starts: re.Pattern[str]) -> list[KernelReport]:
    """The reports in a kernel log, per host in the order logged; ``starts`` finds the
    lines that begin one (frame lines never do: a function may be called lockdep_x)."""
    found: list[KernelReport] = []
    open_: dict[str, list[KernelLogLine]] = {}
    for k in lines:
        current = open_.get(k.host)
        if starts.search(k.line) and not FRAME.match(k.line) and not _oops_of(current, k):
            if current:
                found.append(KernelReport(k.host, tuple(current)))
            open_[k.host] = current = [k]
        elif current is not None:
            current.append(k)
        else:
            continue
        if END.search(k.line):
            found.append(KernelReport(k.host, tuple(current)))
            del open_[k.host]
    found += [KernelReport(host, tuple(rest)) for host, rest in open_.items() if rest]
    return found


def explain(
    lines: Sequence[KernelLogLine],
    findings: Sequence[KnownFinding],
    starts: re.Pattern[str],
    test: str,
    releases: Iterable[str],
    *,
    anywhere: bool = False,
) -> Explained:
    """Tell the known reports of a test's kernel log from the rest (see the module).
    ``anywhere``: an entry is known in any test on its kernels (a fuzz case names no
    suite test, as :func:`known_crash` says)."""
    releases = tuple(releases)
    known: list[Match] = []
    elsewhere: list[Match] = []
    for report in reports(lines, starts) if findings else []:
        finding = next((f for f in findings if f.recognises(report)), None)
        if finding is None:
            continue
        match = Match(finding, report)
        here = finding.known_in(test, releases) or (
            anywhere and any(finding.known_on(r) for r in releases)
        )
        (known if here else elsewhere).append(match)
    excused = {id(k) for m in known for k in m.report.lines}
    return Explained(
        tuple(known), tuple(elsewhere), tuple(k for k in lines if id(k) not in excused)
    )


def known_crash(
    lines: Sequence[KernelLogLine],
    findings: Sequence[KnownFinding],
    starts: re.Pattern[str],
    releases: Iterable[str],
) -> Match | None:
    """The ``crashes`` entry that explains a crashed host's last kernel lines on one of these
    kernel releases, whatever ran (a fuzz case names no suite test); None when none does."""
    releases = tuple(releases)
    stopping = [
        f
        for f in findings
        if f.crashes and any(_release_of(r, k) for r in releases for k in f.kernels)
    ]
    for report in reports(lines, starts) if stopping else []:
        finding = next((f for f in stopping if f.recognises(report)), None)
        if finding is not None:
            return Match(finding, report)
    return None


def yaml_entries(path: Path, what: str, fields: Sequence[str]) -> list[Any]:
    """The raw entries of a YAML list file (``what`` names it in errors; none when empty);
    InputError when it cannot be read, is not YAML or not a list of ``fields`` entries."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(f"{path}: cannot read the {what}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not YAML: {e}") from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise InputError(f"{path}: must be a list of entries ({', '.join(fields)})")
    return data


def load(path: Path, rootdir: Path) -> tuple[KnownFinding, ...]:
    """The entries of a known-findings file; InputError naming the file and entry when bad."""
    data = yaml_entries(path, "known kernel findings", FIELDS)
    entries = tuple(_entry(f"{path}: entry {i}", raw, rootdir) for i, raw in enumerate(data, 1))
    no_repeats(path, [f"id {e.id}" for e in entries])
    return entries


def no_repeats(path: Path, keys: Sequence[str]) -> None:
    """InputError naming the entry of a YAML list file whose key an earlier one had."""
    seen: set[str] = set()
    for i, key in enumerate(keys, 1):
        if key in seen:
            raise InputError(f"{path}: entry {i}: {key} is listed twice")
        seen.add(key)


def yaml_mapping(
    where: str, raw: Any, fields: Sequence[str], optional: Sequence[str] = ()
) -> dict[Any, Any]:
    """An entry of a YAML list file with every one of ``fields``, each given (not empty),
    maybe some of ``optional`` and no other key; InputError starting with ``where`` when
    not."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: must be a mapping with {', '.join(fields)}")
    keys = (*fields, *optional)
    unknown = sorted(set(map(str, raw)) - set(keys))
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(keys)})")
    for field in fields:
        value = raw.get(field)
        if value is None or value == [] or not str(value).strip():
            raise InputError(f"{where}: missing {field}")
    return raw


def _entry(where: str, raw: Any, rootdir: Path) -> KnownFinding:
    raw = yaml_mapping(where, raw, FIELDS, OPTIONAL)
    crashes = raw.get("crashes", False)
    if not isinstance(crashes, bool):
        raise InputError(f"{where}: crashes must be true or false, not {crashes!r}")
    raw = {**raw, "tests": raw.get("tests") or []}
    for field in LISTS:
        if not isinstance(raw[field], list) or not all(
            isinstance(v, str | int | float) and str(v).strip() for v in raw[field]
        ):
            raise InputError(f"{where}: {field} must be a list of names, not {raw[field]!r}")
    finding = KnownFinding(
        id=str(raw["id"]).strip(),
        title=str(raw["title"]),
        frames=tuple(str(v).strip() for v in raw["frames"]),
        kernels=tuple(str(v).strip() for v in raw["kernels"]),
        tests=tuple(str(v).strip() for v in raw["tests"]),
        upstream=str(raw["upstream"]).strip(),
        status=str(raw["status"]).strip(),
        crashes=crashes,
        fuzz_trigger=_trigger(where, raw.get("fuzz_trigger"), crashes),
    )
    where = f"{where} ({finding.id})"
    if not ID.match(finding.id):
        raise InputError(f"{where}: id must be lower-case letters, digits, dots and dashes")
    try:
        re.compile(finding.title)
    except re.error as e:
        raise InputError(
            f"{where}: title {finding.title!r} is not a regular expression: {e}"
        ) from None
    for frame in finding.frames:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", frame):
            raise InputError(f"{where}: frame {frame!r} is not a function name")
    for kernel in finding.kernels:
        if not re.fullmatch(r"\d+\.\d+[\w.+~-]*", kernel):
            raise InputError(f"{where}: kernel {kernel!r} is not a release (6.1, 6.1.192)")
    for test in finding.tests:
        file = test.split("::", 1)[0]
        if "::" not in test:
            raise InputError(f"{where}: test {test!r} is not a pytest node id (FILE::TEST)")
        if not (rootdir / file).is_file():
            raise InputError(f"{where}: test {test}: no file {file} under {rootdir}")
    return finding


def _trigger(where: str, raw: Any, crashes: bool) -> FuzzTrigger | None:
    """An entry's ``fuzz_trigger`` ("FRAME FIELD > N", "FRAME FIELD in LOW..HIGH" or
    "rtr invalid"); InputError when it is malformed or on an entry that does not stop the
    kernel (the fuzzer runs every other case)."""
    if raw is None:
        return None
    found = TRIGGER.match(str(raw).strip())
    invalid = INVALID_TRIGGER.match(str(raw).strip())
    if found is None and invalid is None:
        raise InputError(
            f"{where}: fuzz_trigger {raw!r} is neither 'FRAME FIELD > NUMBER', "
            "'FRAME FIELD in LOW..HIGH' nor 'rtr invalid'"
        )
    if not crashes:
        raise InputError(f"{where}: fuzz_trigger is for an entry with crashes: true")
    if found is None:
        return InvalidFrame("rtr")
    frame, field, above, low, high = found.groups()
    if above is not None:
        return Trigger(frame, field, int(above))
    if int(low) > int(high):
        raise InputError(f"{where}: fuzz_trigger {raw!r}: {low}..{high} is an empty range")
    return Trigger(frame, field, int(low) - 1, int(high))


def _oops_of(current: list[KernelLogLine] | None, line: KernelLogLine) -> bool:
    """Whether ``line`` is die()'s header ("Oops: ...", "invalid opcode: 0000 [#1] ...") of
    the open report, which has no stack yet."""
    return (
        bool(current)
        and bool(OOPS.match(line.line))
        and not any(FRAME.match(k.line) for k in current or ())
    )


def _in_order(wanted: Sequence[str], stack: Sequence[str]) -> bool:
    """Whether ``wanted`` appear in ``stack`` in that order (others between them)."""
    frames = iter(stack)
    return all(any(_same(name, f) for f in frames) for name in wanted)


def _same(name: str, frame: str) -> bool:
    # The compiler's clones keep the name: siw_x.cold, siw_x.constprop.0.
    return frame == name or frame.startswith(name + ".")


def _release_of(release: str, kernel: str) -> bool:
    return release == kernel or release.startswith((kernel + ".", kernel + "-", kernel + "+"))
