"""Running tshark on a capture file: the judge's eyes, which hil does not write.

One tshark run per file (``-T json`` with an ``-e`` list of fields) gives,
per TCP packet, each field's values as strings, in the order the dissectors
met them: a segment carrying three FPDUs has three ``iwarp_rdma.opcode``
values.  Field names are Wireshark's (``tshark -G fields``).

Why no decode-as: ``iwarp_mpa`` registers no ``tcp.port`` table ("Protocol
iwarp_mpa isn't valid for layer type tcp.port"); it is a heuristic
dissector on TCP, which recognises a connection by the MPA request's key
("MPA ID Req Frame") and then decodes its FPDUs, once it has seen the MPA
reply.  So the run enables that heuristic by name (``iwarp_mpa_tcp``;
``tshark -G heuristic-decodes`` lists it under the protocol's name,
``iwarp_mpa``, which ``--enable-heuristic`` refuses) and tries heuristics
before port-based dissectors, so that a test port some other protocol owns
by number still reaches MPA.  The user's Wireshark profile is left out
(``WIRESHARK_CONFIG_DIR`` is an empty directory), so a decode-as someone
set in their GUI cannot change the verdict.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hil import tools
from hil.errors import HilError, InputError

# The oldest tshark whose field names and JSON output this module was checked
# against: Debian 12's 4.0 (the controller's platform, ci/install).
MIN_VERSION = (4, 0)
INSTALL = "apt-get install tshark (ci/install installs it)"
# Bounds the short queries (--version, -G values); decoding has its own.
QUERY_TIMEOUT = 30.0
# TCP only; an ICMP error quoting a TCP header would repeat ip/tcp fields.
DISPLAY_FILTER = "tcp and not icmp and not icmpv6"
_FLAGS = ("syn", "ack", "fin", "reset", "push")
_MPA = ("req", "rep", "marker_flag", "crc_flag", "rej_flag", "res", "rev", "privatedata")
# A TERMINATE's error type and code are in one of these, by layer (and release).
TERM_ETYPES = tuple(f"iwarp_rdma.term_etype{s}" for s in ("_rdma", "_ddp", "_llp", ""))
TERM_ERRCODES = tuple(
    f"iwarp_rdma.term_errcode{s}" for s in ("_rdma", "_ddp_tagged", "_ddp_untagged", "_llp", "")
)
FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.stream",
    "tcp.seq_raw",
    "tcp.len",
    "tcp.options.mss_val",
    *(f"tcp.flags.{f}" for f in _FLAGS),
    "tcp.analysis.retransmission",
    "tcp.checksum.status",
    "tcp.reassembled_in",
    *(f"iwarp_mpa.{f}" for f in _MPA),
    "iwarp_mpa.ulpdulength",
    "iwarp_rdma.opcode",
    "iwarp_rdma.term_layer",
    *TERM_ETYPES,
    *TERM_ERRCODES,
)
# First bytes of the capture formats tshark is asked to read: pcap (both byte
# orders, micro- and nanosecond) and pcapng.  tshark itself reads almost
# anything (a 6-byte text file is an "MP4" to it), so the file type is checked first.
_MAGIC = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
_PCAPNG = b"\x0a\x0d\x0d\x0a"

Fields = dict[str, list[str]]


@dataclass(frozen=True)
class Read:
    """What tshark made of one file: each TCP packet's fields, and a warning if it stopped early."""

    packets: list[Fields]
    warning: str | None = None


def read(path: Path, *, timeout: float, desegment: bool = True) -> Read:
    """Each TCP packet of capture ``path``, as tshark's iWARP dissectors decoded it.

    ``desegment=False`` turns TCP reassembly off: each segment is decoded on its own,
    FPDU boundaries taken from the lengths tshark has read so far
    (:mod:`hil.wire.realign` says when that is needed).
    """
    _check_capture(path)
    check_version()
    argv = tools.argv(
        "tshark",
        # -n: addresses as numbers, no name lookups.
        *("-r", str(path), "-n", "-T", "json", "-Y", DISPLAY_FILTER),
        *("--enable-heuristic", "iwarp_mpa_tcp", "-o", "tcp.try_heuristic_first:TRUE"),
        # A segment corrupted on the path is in the capture but never reached the
        # receiver's TCP: its checksum tells (hil.wire.decode leaves such segments out).
        *("-o", "tcp.check_checksum:TRUE"),
        *("-o", f"tcp.desegment_tcp_streams:{'TRUE' if desegment else 'FALSE'}"),
        *(a for f in FIELDS for a in ("-e", f)),
    )
    return _parsed(path, _run(argv, timeout, f"decoding {path}"))


def write_without(path: Path, frames: list[int], out: Path, *, timeout: float) -> None:
    """Write capture ``path`` to ``out`` (pcapng) without the given frame numbers."""
    listed = frame_set(frames)
    _write(path, f"not frame.number in {{{listed}}}", out, timeout, f"without frames {listed}")


def write_only(path: Path, frames: list[int], out: Path, *, timeout: float) -> None:
    """Write the given frame numbers of capture ``path`` to ``out`` (pcapng), in order."""
    listed = frame_set(frames)
    _write(path, f"frame.number in {{{listed}}}", out, timeout, f"frames {listed}")


def frame_set(frames: list[int]) -> str:
    """Frame numbers as the members of a display filter set: ``1..3,7``.  tshark 4.0
    refuses a set without commas; runs become ranges, so that a long connection's
    frames stay a short argument."""
    runs: list[list[int]] = []
    for n in sorted(set(frames)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)


def _write(path: Path, display_filter: str, out: Path, timeout: float, what: str) -> None:
    _check_capture(path)
    argv = tools.argv("tshark", *("-r", str(path), "-n", "-Y", display_filter, "-w", str(out)))
    done = _run(argv, timeout, f"writing {what} of {path}")
    if done.returncode != 0 or not out.exists():
        problem = _all_lines(done.stderr) or f"exit {done.returncode}"
        raise HilError(f"tshark could not write {what} of {path} to {out}: {problem}")


def _check_capture(path: Path) -> None:
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise InputError(f"cannot read the capture {path}: {e.strerror or e}") from None
    if head not in (*_MAGIC, _PCAPNG):
        raise InputError(
            f"{path} is not a packet capture (pcap or pcapng): it starts with {head!r}"
        )


def _parsed(path: Path, done: subprocess.CompletedProcess[str]) -> Read:
    problem = _last_line(done.stderr)
    try:
        docs: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        raise InputError(f"tshark could not read {path}: {problem or 'no output'}") from None
    if done.returncode != 0 and not docs:
        # tshark's complaints about the file begin 'The file "..."'; anything else
        # (a field this tshark does not know, a crash) is not the file's fault.
        error = InputError if problem.startswith("The file ") else HilError
        raise error(f"tshark could not read {path}: {problem or f'exit {done.returncode}'}")
    # A capture cut at its size bound ends in a partial packet: tshark says so,
    # exits 2, and still prints everything before it.
    warning = f"{path}: {problem}" if done.returncode != 0 else None
    return Read([d["_source"]["layers"] for d in docs], warning)


def _last_line(stderr: str) -> str:
    lines = _lines(stderr)
    return lines[-1].removeprefix("tshark: ") if lines else ""


def _all_lines(stderr: str) -> str:
    return " | ".join(s.strip().removeprefix("tshark: ") for s in _lines(stderr))


def _lines(stderr: str) -> list[str]:
    # tshark warns about running as root on every run; that is not the problem.
    return [s for s in stderr.splitlines() if s.strip() and "could be dangerous" not in s]


def _run(argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="hil-tshark-") as profile:
        env = {**os.environ, "WIRESHARK_CONFIG_DIR": profile}
        try:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
            )
        except FileNotFoundError:
            raise HilError(
                f"tshark is not installed on this controller ({argv[0]!r} is not on PATH): "
                + INSTALL
            ) from None
        except subprocess.TimeoutExpired:
            raise HilError(
                f"tshark did not finish {what} within {timeout:g} s; a large capture needs "
                "a longer timeout"
            ) from None


def check_version() -> str:
    """tshark's version, refused (HilError) when older than :data:`MIN_VERSION`."""
    found = _version(os.environ.get("PATH", ""))
    if _numbers(found) < MIN_VERSION:
        wanted = ".".join(map(str, MIN_VERSION))
        raise HilError(
            f"tshark {found} is too old for hil's wire judge (it needs {wanted} or newer): "
            + INSTALL
        )
    return found


@functools.cache
def _version(path_env: str) -> str:
    # Cached per PATH: one --version run per process, not per capture.
    out = _run(tools.argv("tshark", "--version"), QUERY_TIMEOUT, "--version").stdout
    match = re.search(r"TShark \(Wireshark\) (\d+\.\d+(?:\.\d+)?)", out)
    if not match:
        raise HilError(f"tshark --version says {out[:80]!r}, not a version hil can read: {INSTALL}")
    return match.group(1)


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.split("."))


def value_names(field: str) -> dict[int, str]:
    """tshark's names for the values of ``field`` (``tshark -G values``), e.g. opcodes."""
    return _values(os.environ.get("PATH", "")).get(field, {})


@functools.cache
def _values(path_env: str) -> dict[str, dict[int, str]]:
    out = _run(tools.argv("tshark", "-G", "values"), QUERY_TIMEOUT, "listing value names").stdout
    table: dict[str, dict[int, str]] = {}
    for line in out.splitlines():
        kind, _, rest = line.partition("\t")
        parts = rest.split("\t")
        if kind == "V" and len(parts) == 3 and parts[0].startswith("iwarp_"):
            table.setdefault(parts[0], {})[number(parts[1])] = parts[2]
    return table


def number(text: str) -> int:
    """An integer field's value: tshark prints BASE_HEX fields as ``0x..``, others in decimal."""
    return int(text, 16) if text.lower().startswith("0x") else int(text)
