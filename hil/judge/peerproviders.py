"""What siw and iw_cxgb4 do when the reference peer runs each scenario class
(:mod:`hil.judge.peerexpect` has the classes and what the RFCs require): a
:class:`~hil.judge.peerexpect.PeerExpect` per provider and class, each citing
file:line, and where a provider departs from the RFC its ``finding``.

siw: Linux 6.1.192, the lab's kernel (``drivers/infiniband/sw/siw`` and
``net/ipv4/tcp.c`` at that version), its closes and TERMINATEs measured on the
lab where noted.  iw_cxgb4: its ``cm.c``/``qp.c`` at 6.1.192, ``source_only``
(never run).

Why siw closes with RST after most DDP/RDMAP errors: it detects them in the
FPDU's header (siw_qp_rx.c siw_get_hdr, the *_check_ntoh functions), stops
reading (siw_qp_cm_drop, siw_cm.c:392-399) and releases the socket with the
rest of the FPDU unread; tcp_close then resets (net/ipv4/tcp.c:2931-2958,
RFC 2525 2.17).  A CRC error is found after the whole FPDU was read
(siw_get_trailer): a FIN, unless more data was already queued.
"""

from __future__ import annotations

from collections.abc import Mapping

from hil.errors import InputError
from hil.judge.peerexpect import (
    DDP_TAGGED,
    DDP_UNTAGGED,
    MPA_ERROR,
    PASSIVE_ESTABLISHED,
    RDMAP_REMOTE_OP,
    Close,
    PeerExpect,
    S,
    Scenario,
    Term,
    term,
)

_K = "Linux 6.1.192"


def _siw(*where: str) -> tuple[str, ...]:
    """``siw_cm.c:623`` as ``drivers/infiniband/sw/siw/siw_cm.c:623 (Linux 6.1.192)``."""
    return tuple(w if "/" in w else f"drivers/infiniband/sw/siw/{w} ({_K})" for w in where)


_LAB_WRITE_INVALID_STAG = "measured: lab 6.1.192 guests 2026-12-05, docs/peer.md"
_LAB_ONE_BYTE = (
    "measured: lab 6.1.192 guests 2026-12-05 (request-one-byte-segments: CONNECT_REQUEST "
    "11.06 s after the connect, at the peer's close), docs/peer.md"
)
# Why (docs/findings/siw-mpa-header-blocking-recv.md): siw_recv_mpa_rr reads the MPA header
# with flags 0, so a READ_MPAHDR work that finds the queue empty sleeps in sk_wait_data;
# siw_cm_llp_data_ready queues work but never calls the saved sk_data_ready that would wake
# it, only a FIN (state_change) does; and siw_cm_wq has one worker, so the MPA timer waits too.
_SIW_BLOCKING_READ = ("siw_cm.c:526-530", "siw_cm.c:1236-1268", "siw_cm.c:1937")
_CMA_EST = f"drivers/infiniband/core/cma.c:2519-2522 ({_K})"
_CMA_REPLY = f"drivers/infiniband/core/cma.c:2501-2516 ({_K})"
_CMA_CLOSE = f"drivers/infiniband/core/cma.c:2493-2494 ({_K})"
_TCP_RST = f"net/ipv4/tcp.c:2931-2958 ({_K}): unread data at close -> RST"
# An FPDU error found in its header: TERMINATE, CLOSE_LLP work, socket released
# with the FPDU's rest unread (module docstring).
_DROP = ("siw_qp_rx.c:1490", "siw_cm.c:1074-1084", _TCP_RST, _CMA_CLOSE)
_DISC = ("disconnected",)


# siw's struct iwarp_terminate declares layer:4 then etype:4 for little-endian bitfields,
# which puts Layer in the first byte's low nibble and EType in its high one; RFC 5040 4.8
# has Layer in the most significant 4 bits.  On the wire (x86 guests) the two are swapped:
# measured on the lab 2026-12-05 (send-bad-crc: LLP/MPA/CRC (2, 0, 2) arrived as
# (0, 2, 2); docs/peer.md "Running scenarios against a DUT").
_SIW_TERM_LAYOUT = f"drivers/infiniband/sw/siw/iwarp.h:176-198 ({_K}), lab 2026-12-05"
_SWAPPED = (
    "siw puts the TERMINATE's Layer and EType nibbles in each other's place (iwarp.h: "
    "little-endian bitfields layer:4, etype:4), so {meant} goes on the wire as {wire} "
    "(docs/findings/siw-terminate-layer-etype-swap.md)"
)


def _siw_term(
    term: Term, close: Close, events: tuple[str, ...], where: tuple[str, ...], finding: str
) -> PeerExpect:
    """siw's reaction with the TERMINATE it means as ``term``, as it goes on the wire:
    where the nibble swap changes the triple, the layout's source and finding added."""
    wire = (term[1], term[0], term[2])
    if wire != term:
        swapped = _SWAPPED.format(meant=term, wire=wire)
        where, finding = (*where, _SIW_TERM_LAYOUT), f"{finding}; {swapped}" if finding else swapped
    return PeerExpect(wire, close, events, where, finding=finding)


def _siw_fpdu(term: Term, *where: str, close: Close = "rst", finding: str = "") -> PeerExpect:
    return _siw_term(term, close, _DISC, _siw(*where, *_DROP), finding)


SIW: Mapping[Scenario, PeerExpect] = {
    S.MPA_REV1: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_cm.c:623-631", "siw_cm.c:705")
    ),
    S.MPA_REV2: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_cm.c:633-643", "siw_cm.c:705", _CMA_EST)
    ),
    S.CRC_REQUESTED: PeerExpect(
        None,
        "none",
        PASSIVE_ESTABLISHED,
        _siw("siw_cm.c:650-663", "siw_main.c:45-48"),
        note="the request's bits are the reply's: C=1 echoed (mpa_crc_strict off)",
    ),
    S.CRC_NOT_REQUESTED: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_cm.c:650-663", "siw_main.c:45")
    ),
    S.MARKERS_REQUESTED: PeerExpect(
        None,
        "fin",
        (),
        _siw("siw_cm.c:646-648", "siw_cm.c:716-733"),
        finding="siw sends no Markers: it answers M=1 with a reject Reply (R=1, M=0) and "
        "closes; the application never sees the request",
    ),
    S.P2P_RTR_WRITE: PeerExpect(
        None,
        "none",
        PASSIVE_ESTABLISHED,
        _siw("siw_cm.c:689-697", "siw_cm.c:1632-1633"),
        note="ESTABLISHED only after the peer's zero-length WRITE",
    ),
    S.P2P_RTR_READ: PeerExpect(
        None,
        "none",
        PASSIVE_ESTABLISHED,
        _siw("siw_cm.c:689-697", "siw_cm.c:1632-1633"),
        note="READ picked only when WRITE is not offered",
    ),
    S.P2P_RTR_SEND: PeerExpect(
        None,
        "none",
        ("connect_request",),
        _siw("siw_cm.c:683-697"),
        finding="siw answers a SEND-only RTR offer with WRITE, a type the initiator did "
        "not offer, rather than 'No Matching RTR Option'",
    ),
    S.IRD_ORD_ZERO: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_cm.c:671-679", "siw_cm.c:1612-1629")
    ),
    S.IRD_ORD_3FFF: PeerExpect(
        None,
        "none",
        PASSIVE_ESTABLISHED,
        _siw("siw_cm.c:671-679", "siw.h:24-25"),
        note="lowered to 128 (SIW_MAX_IRD_QP/SIW_MAX_ORD_QP)",
    ),
    S.IRD_ORD_ABOVE_MAX: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_cm.c:671-679", "siw.h:24-25")
    ),
    S.WRONG_KEY: PeerExpect(
        None, "fin", (), _siw("siw_cm.c:627-628", "siw_cm.c:1071-1072", "siw_cm.c:1173-1176")
    ),
    S.WRONG_KEY_REPLY: _siw_term(
        (2, 0, 0x04),
        "fin",
        ("connect_error",),
        _siw("siw_cm.c:758-763", "siw_cm.c:918-920", _CMA_REPLY),
        "siw sends a TERMINATE (LLP/MPA/0x04) before closing, where RFC 5044 8 "
        "says close at once; no FPDU mode was ever entered",
    ),
    S.UNKNOWN_REVISION: PeerExpect(None, "fin", (), _siw("siw_cm.c:623-625", "siw_cm.c:1071-1072")),
    S.REVISION_ZERO: PeerExpect(
        None,
        "none",
        ("connect_request",),
        _siw("siw_cm.c:623-625", "siw_cm.c:1745-1749"),
        finding="siw takes Rev 0 as valid ('allow for 0, 1, and 2') and hands the request "
        "to the application; a reject of it sends no Reply",
    ),
    S.PD_LENGTH_OVER_RFC_LIMIT: PeerExpect(
        None, "rst", (), _siw("siw_cm.c:537-538", "iwarp.h:17", _TCP_RST)
    ),
    S.PD_LENGTH_OVER_256: PeerExpect(
        None,
        "rst",
        (),
        _siw(
            "siw_cm.c:537-538",
            "iwarp.h:17",
            f"include/uapi/rdma/rdma_user_cm.h:45 ({_K})",
            _TCP_RST,
        ),
        finding="siw refuses PD_Length 257..512, legal per RFC 5044 7.1.1 (its limit is "
        "RDMA_MAX_PRIVATE_DATA, 256); it closes with RST, the private data unread",
    ),
    S.INCOMPLETE_REQUEST: PeerExpect(
        None,
        "fin",
        (),
        _siw("siw_cm.c:971-973", "siw_cm.c:1218-1225", "siw_cm.h:75", "siw_cm.c:1142-1150"),
        bound_s=5.0,
        note="MPAREP_TIMEOUT (5 s) guards the request: siw's names are swapped",
    ),
    S.INCOMPLETE_REPLY: PeerExpect(
        None,
        "fin",
        ("unreachable",),
        _siw("siw_cm.c:1218-1225", "siw_cm.h:74", "siw_cm.c:1129-1141", _CMA_REPLY),
        bound_s=10.0,
        note="MPAREQ_TIMEOUT (10 s) guards the reply",
    ),
    S.REJECT_WITH_PDATA: PeerExpect(None, "fin", ("connect_request",), _siw("siw_cm.c:1745-1749")),
    S.REJECT_WITHOUT_PDATA: PeerExpect(
        None, "fin", ("connect_request",), _siw("siw_cm.c:1745-1749")
    ),
    S.PEER_REJECTS: PeerExpect(
        None, "fin", ("rejected",), _siw("siw_cm.c:765-769", "siw_cm.c:1071-1072", _CMA_REPLY)
    ),
    # Measured: FIN, not the RST the unread rest would give (a 3-byte WRITE, its whole
    # FPDU in one segment; lab 2026-12-05, peer scenario write-invalid-stag, both directions).
    S.INVALID_STAG: _siw_fpdu(
        term(DDP_TAGGED, 0x00), "siw_qp_rx.c:562-571", _LAB_WRITE_INVALID_STAG, close="fin"
    ),
    S.BASE_BOUNDS: _siw_fpdu(term(DDP_TAGGED, 0x01), "siw_qp_rx.c:589-596", "siw_qp.c:328-329"),
    S.ACCESS_RIGHTS: _siw_fpdu(
        term(DDP_TAGGED, 0x00),
        "siw_qp_rx.c:589-596",
        "siw_qp.c:332-338",
        finding="siw reports a WRITE without remote-write rights as DDP Invalid STag "
        "(1/1/0x00), not RDMAP Access rights violation (0/1/0x02)",
    ),
    S.INVALID_QN: _siw_fpdu(term(DDP_UNTAGGED, 0x01), "siw_qp_rx.c:288-292", "siw_qp_rx.c:324-326"),
    S.INVALID_MSN: _siw_fpdu(
        term(DDP_UNTAGGED, 0x03), "siw_qp_rx.c:294-299", "siw_qp_rx.c:324-326"
    ),
    S.MESSAGE_TOO_LONG: _siw_fpdu(
        term(DDP_UNTAGGED, 0x02),
        "siw_qp_rx.c:314-321",
        finding="siw reports a SEND too long for the receive as 'Invalid MSN - no buffer "
        "available' (1/2/0x02), not 'DDP Message too long' (1/2/0x05)",
    ),
    S.INVALID_OPCODE: _siw_fpdu(term(RDMAP_REMOTE_OP, 0x06), "siw_qp_rx.c:1071-1080"),
    S.READ_BEYOND_IRD: _siw_fpdu(term(RDMAP_REMOTE_OP, 0x07), "siw_qp_rx.c:694-726"),
    S.BAD_CRC: _siw_fpdu(term(MPA_ERROR, 0x02), "siw_qp_rx.c:995-1009", close="fin"),
    S.PEER_TERMINATE: PeerExpect(
        None,
        "rst",
        _DISC,
        _siw("siw_qp_rx.c:892-960", *_DROP),
        note="siw_proc_terminate returns before reading the trailer: RST [src, inferred]",
    ),
    S.REPLY_AND_FPDU_ONE_SEGMENT: PeerExpect(
        None,
        "rst",
        ("connect_error",),
        _siw("siw_cm.c:547-571", "siw_cm.c:583-591", "siw_cm.c:918-920", _CMA_REPLY, _TCP_RST),
        finding="siw reads up to 4 bytes past the Reply and fails the connect when an FPDU "
        "follows it (the 2019 siw/cxgb4 interop report, linux-rdma 'siw: MPA Reply handler "
        "tries to read beyond MPA message'), also without RTR where RFC 6581 allows it",
    ),
    S.ONE_BYTE_SEGMENTS: PeerExpect(
        None,
        "none",
        ("connect_request",),
        _siw(*_SIW_BLOCKING_READ, "siw_qp_rx.c:1380-1490", _LAB_ONE_BYTE),
        finding="siw takes an MPA request written in 1-byte segments only when the peer's FIN "
        "arrives: its siw_cm_wq worker reads the MPA header blocking and data never wakes it "
        "(docs/findings/siw-mpa-header-blocking-recv.md); no CONNECT_REQUEST within 10 s, then "
        "one at the peer's close (RFC 5044 Appendix A: segmenting is invisible to MPA)",
    ),
    S.FPDUS_ONE_SEGMENT: PeerExpect(None, "none", (), _siw("siw_qp_rx.c:1380-1490")),
}

_CX = "drivers/infiniband/hw/cxgb4"


def _cx(where: str) -> tuple[str, ...]:
    return (f"{_CX}/{where} ({_K})",)


def _cx_term(term: Term, where: str, finding: str = "") -> PeerExpect:
    return PeerExpect(term, "rst", _DISC, _cx(where), source_only=True, finding=finding)


# iw_cxgb4: only what its source says (never run here); its close after a TERMINATE
# is the firmware's, so "rst" is the abortive close c4iw_ep_disconnect asks for.
IW_CXGB4: Mapping[Scenario, PeerExpect] = {
    S.INVALID_STAG: _cx_term((0, 1, 0x00), "qp.c:1448-1455"),
    S.ACCESS_RIGHTS: _cx_term((0, 1, 0x02), "qp.c:1469-1471"),
    S.BASE_BOUNDS: _cx_term((1, 1, 0x01), "qp.c:1477-1483"),
    S.INVALID_QN: _cx_term((1, 2, 0x01), "qp.c:1534-1536"),
    S.INVALID_MSN: _cx_term((1, 2, 0x03), "qp.c:1538-1543"),
    S.MESSAGE_TOO_LONG: _cx_term((1, 2, 0x05), "qp.c:1513-1515"),
    S.INVALID_OPCODE: _cx_term((0, 2, 0x06), "qp.c:1530-1532"),
    S.READ_BEYOND_IRD: _cx_term((1, 2, 0x03), "qp.c:1538-1543"),
    S.BAD_CRC: _cx_term(
        (2, 3, 0x02),
        "qp.c:1505-1507",
        finding="iw_cxgb4 puts LAYER_MPA|DDP_LLP (layer 2, type 3) in an MPA error's "
        "TERMINATE; the RFCs' MPA error type is 0 (iw_cxgb4.h:718, :725)",
    ),
    S.UNKNOWN_REVISION: PeerExpect(None, "rst", (), _cx("cm.c:1744-1748"), source_only=True),
    S.WRONG_KEY: PeerExpect(None, "rst", (), _cx("cm.c:1750-1751"), source_only=True),
    S.PD_LENGTH_OVER_RFC_LIMIT: PeerExpect(
        None, "rst", (), _cx("cm.c:1758-1759"), source_only=True
    ),
}

PROVIDERS: Mapping[str, Mapping[Scenario, PeerExpect]] = {"siw": SIW, "iw_cxgb4": IW_CXGB4}


def expect(provider: str, scenario: str) -> PeerExpect:
    """``provider``'s expected reaction to ``scenario``; InputError naming the known ones."""
    table = PROVIDERS.get(provider)
    if table is None:
        raise InputError(
            f"no peer expectations for provider {provider!r}; known: {', '.join(PROVIDERS)}"
        )
    try:
        return table[Scenario(scenario)]
    except (ValueError, KeyError):
        known = ", ".join(s.value for s in table)
        raise InputError(
            f"{provider} has no expectation for scenario {scenario!r}; known: {known}"
        ) from None


def departures(provider: str) -> list[tuple[Scenario, str]]:
    """``provider``'s departures from the RFCs: each class's finding, in class order."""
    return [(s, e.finding) for s, e in PROVIDERS[provider].items() if e.finding]
