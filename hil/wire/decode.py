"""Capture files to an :class:`~hil.wire.model.Exchange`: what tshark saw, as data.

:func:`decode` runs tshark once per capture point's file, at once
(:mod:`hil.wire.tshark`), and turns each TCP packet into a
:class:`~hil.wire.model.Packet`; nothing here reads packet bytes.

Connections: packets are grouped by :mod:`hil.wire.tcpconn`, and a later
connection on a 4-tuple already used in the file is read again on its own
(:mod:`hil.wire.reused`).

MPA v2 (RFC 6581, "enhanced" connection setup): the ``H`` bit is the top
bit of what tshark 4.0 calls ``iwarp_mpa.res`` (0x10; the kernel's
``MPA_RR_FLAG_ENHANCED``), and with revision 2 and ``H`` set the first four
private data bytes are the IRD and ORD words, each a 14-bit count under two
control bits (Linux's ``MPA_IRD_ORD_MASK``).  tshark 4.0 shows those bytes
as private data; splitting them off is the one thing done here by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hil.wire import corrupted, reused, tshark
from hil.wire.model import Exchange, Mpa, Packet, Terminate
from hil.wire.tcpconn import Seen, connections

DEFAULT_TIMEOUT = 120.0
_FLAGS = {"syn": "SYN", "ack": "ACK", "fin": "FIN", "reset": "RST", "push": "PSH"}
_ENHANCED = 0x10
_IRD_ORD_MASK = 0x3FFF
# RFC 5040 7.2 names the layers RDMAP, DDP and LLP (tshark says "RDMA" for the first).
_LAYERS = {0: "RDMAP", 1: "DDP", 2: "LLP"}
_ETYPE = {
    0: "iwarp_rdma.term_etype_rdma",
    1: "iwarp_rdma.term_etype_ddp",
    2: "iwarp_rdma.term_etype_llp",
}
_ERRCODE = {
    (0, None): "iwarp_rdma.term_errcode_rdma",
    (1, 1): "iwarp_rdma.term_errcode_ddp_tagged",
    (1, 2): "iwarp_rdma.term_errcode_ddp_untagged",
    (2, None): "iwarp_rdma.term_errcode_llp",
}


def decode(captures: Mapping[str, Path], *, timeout: float = DEFAULT_TIMEOUT) -> Exchange:
    """Decode each capture point's file (point name -> pcap) into one exchange.

    InputError for a file that is missing or not a pcap/pcapng; HilError when
    tshark is missing, too old, fails, or runs past ``timeout`` (per file).  A
    file cut short decodes up to the cut, with a note saying so.
    """
    # One tshark per file, all at once: most of its time is its own start-up.
    with ThreadPoolExecutor(max_workers=max(len(captures), 1)) as pool:
        reads = list(pool.map(lambda p: corrupted.read(p, timeout=timeout), captures.values()))
    seen: list[Seen] = []
    notes: list[str] = []
    for (point, path), reading in zip(captures.items(), reads, strict=True):
        mine, mine_notes = _seen(point, reading)
        for frames in reused.later(mine):
            again = reused.read_alone(path, frames, timeout=timeout)
            mine, again_notes = _read_again(point, mine, frames, again)
            mine_notes += again_notes
        seen += mine
        notes += mine_notes
    return Exchange(connections=connections(seen), points=tuple(captures), notes=tuple(notes))


def _seen(point: str, reading: corrupted.Reading) -> tuple[list[Seen], list[str]]:
    """One capture point's decodable packets, and notes on what was left out."""
    result = reading.read
    whole = [f for f in result.packets if _decodable(f)]
    notes = [result.warning] if result.warning else []
    notes += _reading_notes(point, reading)
    if len(whole) < len(result.packets):
        notes.append(
            f"{point}: {len(result.packets) - len(whole)} packet(s) whose TCP header tshark "
            "could not decode were left out (corrupted on the wire, or cut by the snap length)"
        )
    return [(point, int(_one(f, "tcp.stream")), packet(point, f)) for f in whole], notes


def _read_again(
    point: str, seen: list[Seen], frames: list[int], again: corrupted.Reading
) -> tuple[list[Seen], list[str]]:
    """``seen`` with the packets of ``frames`` replaced by their reading ``again``; each
    keeps its stream, so the connections are split as before."""
    wanted = set(frames)
    stream = {p.frame: s for _, s, p in seen if p.frame in wanted}
    alone, notes = _seen(point, again)
    kept = [s for s in seen if s[2].frame not in stream]
    redone = [(point, stream[p.frame], p) for _, _, p in alone if p.frame in stream]
    return sorted(kept + redone, key=lambda s: s[2].frame), notes


# What packet() reads unconditionally; a bit flipped in a TCP header (netem
# corrupt, docs/impairment.md) can leave tshark without some of them.
_REQUIRED = (
    "frame.number",
    "frame.time_epoch",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.stream",
    "tcp.seq_raw",
    "tcp.len",
)


def _decodable(f: tshark.Fields) -> bool:
    ip = "ipv6" if "ipv6.src" in f else "ip"
    return all(k in f for k in (*_REQUIRED, f"{ip}.src", f"{ip}.dst"))


def _reading_notes(point: str, reading: corrupted.Reading) -> list[str]:
    notes = []
    if reading.realigned:
        notes.append(
            f"{point}: {reading.realigned} segment(s) that tshark's reassembly lost after a "
            "frame cut by the snap length were decoded segment by segment (hil/wire/realign.py)"
        )
    left_out = reading.left_out_empty + reading.left_out_data
    if left_out:
        notes.append(
            f"{point}: {left_out} segment(s) ({reading.left_out_data} with data) with a bad "
            "TCP checksum among good ones of their sender were left out and the capture "
            "decoded without them (corrupted on the path: the receiver's TCP drops them and "
            "reads the retransmission; hil/wire/corrupted.py)"
        )
    return notes


def packet(point: str, f: tshark.Fields) -> Packet:
    """One TCP packet from tshark's fields for it."""
    ip = "ipv6" if "ipv6.src" in f else "ip"
    opcodes = tuple(
        _name("iwarp_rdma.opcode", tshark.number(v)) for v in f.get("iwarp_rdma.opcode", [])
    )
    return Packet(
        frame=int(_one(f, "frame.number")),
        point=point,
        wall_us=_micros(_one(f, "frame.time_epoch")),
        # The last IP header is the one carrying the TCP segment (tunnels put theirs first).
        src=(f[f"{ip}.src"][-1], int(_one(f, "tcp.srcport"))),
        dst=(f[f"{ip}.dst"][-1], int(_one(f, "tcp.dstport"))),
        flags=frozenset(name for key, name in _FLAGS.items() if _true(f, f"tcp.flags.{key}")),
        seq=int(_one(f, "tcp.seq_raw")),
        length=int(_one(f, "tcp.len")),
        mss=int(f["tcp.options.mss_val"][-1]) if "tcp.options.mss_val" in f else None,
        retransmission="tcp.analysis.retransmission" in f,
        mpa=mpa(f),
        rdmap=opcodes,
        terminate=terminate(f),
    )


def mpa(f: tshark.Fields) -> Mpa | None:
    """The MPA request or reply this packet carries, if any."""
    if "iwarp_mpa.req" not in f and "iwarp_mpa.rep" not in f:
        return None
    wire = _hex(f.get("iwarp_mpa.privatedata", [""])[0])
    revision = tshark.number(_one(f, "iwarp_mpa.rev"))
    enhanced = bool(tshark.number(_one(f, "iwarp_mpa.res")) & _ENHANCED)
    ird = ord_ = None
    private = wire
    if enhanced and revision == 2 and len(wire) >= 8:
        ird, ord_ = int(wire[0:4], 16) & _IRD_ORD_MASK, int(wire[4:8], 16) & _IRD_ORD_MASK
        private = wire[8:]
    return Mpa(
        kind="request" if "iwarp_mpa.req" in f else "reply",
        revision=revision,
        marker=_true(f, "iwarp_mpa.marker_flag"),
        crc=_true(f, "iwarp_mpa.crc_flag"),
        reject=_true(f, "iwarp_mpa.rej_flag"),
        enhanced=enhanced,
        private_data=private,
        wire_private_data=wire,
        ird=ird,
        ord=ord_,
    )


def terminate(f: tshark.Fields) -> Terminate | None:
    """The first RDMAP TERMINATE of this packet, if any.

    Which field holds the error type and code depends on the layer (and on
    tshark's version), so the number is taken from whichever is there and the
    name from the value table of the layer's own field.
    """
    if "iwarp_rdma.term_layer" not in f:
        return None
    layer = tshark.number(f["iwarp_rdma.term_layer"][0])
    etype = tshark.number(_first(f, tshark.TERM_ETYPES))
    code = tshark.number(_first(f, tshark.TERM_ERRCODES))
    code_field = _ERRCODE.get((layer, etype if layer == 1 else None), "")
    words = (
        tshark.value_names("iwarp_rdma.term_layer").get(layer, str(layer)),
        tshark.value_names(_ETYPE.get(layer, "")).get(etype, f"error type {etype}"),
        tshark.value_names(code_field).get(code, f"error code {code:#x}"),
    )
    return Terminate(_LAYERS.get(layer, str(layer)), etype, code, ": ".join(words))


def _name(field: str, value: int) -> str:
    return tshark.value_names(field).get(value, f"opcode {value:#x}")


def _one(f: tshark.Fields, field: str) -> str:
    return f[field][0]


def _first(f: tshark.Fields, names: tuple[str, ...]) -> str:
    # -1 when the snap length cut the field off.
    return next((f[k][0] for k in names if k in f), "-1")


def _true(f: tshark.Fields, field: str) -> bool:
    # Booleans are "1"/"0" in tshark 4.0's -e output ("True"/"False" in some releases).
    return f.get(field, ["0"])[0].lower() in ("1", "true")


def _hex(text: str) -> str:
    return text.replace(":", "").lower()


def _micros(epoch: str) -> int:
    # "1796094113.963786000": exact integer microseconds, no float rounding.
    seconds, _, fraction = epoch.partition(".")
    return int(seconds) * 1_000_000 + int((fraction + "000000")[:6])
