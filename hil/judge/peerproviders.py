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
(siw_get_trailer): a FIN, unless more data was already queued.  Measured, the
closes after the header errors the built-in scenarios make (an invalid STag, QN,
MSN or opcode, a SEND too long, a READ beyond IRD, a TERMINATE received) are FINs
all the same (lab 2026-12-05); why the inferred RST does not come is not traced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

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


# Measured: after a TERMINATE for an FPDU error siw closes with a FIN, not the RST the unread
# rest would give (the module doc's inference): every class below that the peer's built-in
# scenarios run, both directions (lab 2026-12-05, hil/peer/builtin_errors.py); why is not
# traced.  Base and bounds and a WRITE without remote write too (write-past-region-end,
# write-no-remote-write: TERMINATE 1/1/0x01 and 1/1/0x00, then a FIN, lab 2026-12-05).
_LAB_FPDU_ERRORS = (
    "measured: lab 6.1.192 guests 2026-12-05, hil/peer/builtin_errors.py's scenarios "
    "(TERMINATE then FIN, DISCONNECTED)"
)


def _siw_fpdu(term: Term, *where: str, close: Close = "rst", finding: str = "") -> PeerExpect:
    return _siw_term(term, close, _DISC, _siw(*where, *_DROP), finding)


_DROP_FIN = tuple(w for w in _DROP if w != _TCP_RST)


def _siw_fpdu_measured(term: Term, *where: str, finding: str = "") -> PeerExpect:
    sources = _siw(*where, *_DROP_FIN, _LAB_FPDU_ERRORS)
    return _siw_term(term, "fin", _DISC, sources, finding)


# The MPA negotiation matrix (hil/peer/builtin_mpa.py).  The DUT responds to the peer's
# request with the scenario's accept (IRD 1, ORD 1, hil/peer/run.py) or initiates with its
# connect (IRD 1, ORD 1).  siw's reply is the request's own header, its key changed
# (siw_proc_mpareq), so Rev, C and M are the request's unless it refuses; its IRD/ORD
# words are siw_accept's, relaxed (siw_cm.c:32): its ORD lowered to the request's IRD, its
# IRD raised to the request's ORD, both clamped at 128 first (docs/ird-ord.md).
_REQ = "siw_cm.c:608-731 siw_proc_mpareq"
_ACC = "siw_cm.c:1612-1642 siw_accept"
_CON = "siw_cm.c:1460-1491 siw_connect"
_REP = "siw_cm.c:733-920 siw_proc_mpareply"
_MAX = ("siw.h:24-25 SIW_MAX_IRD_QP, SIW_MAX_ORD_QP", "siw_main.c:359-360")
_NO_P2P = "siw_main.c:59 peer_to_peer (const false)"
# As the initiator siw asks for Rev 2 with IRD/ORD words, no CRC, no P2P (siw_connect;
# mpa_crc_required and peer_to_peer are const false, siw_main.c:45, :59), and the
# application's IRD 1 / ORD 1.
_SIW_REQUEST: dict[str, int | str] = {
    "rev": 2,
    "c": 0,
    "m": 0,
    "r": 0,
    "p2p": 0,
    "rtr": "none",
    "ird": 1,
    "ord": 1,
}
_ACTIVE_ESTABLISHED = ("established",)
_IRD_OVER = _siw_term(
    (2, 0, 0x06),
    "fin",
    ("connect_error",),
    _siw(_CON, "siw_cm.c:806-840 siw_proc_mpareply", *_MAX, _CMA_REPLY),
    "",
)


def _matrix(
    mpa: dict[str, int | str],
    *where: str,
    events: tuple[str, ...] = PASSIVE_ESTABLISHED,
    close: Close = "none",
    finding: str = "",
    note: str = "",
) -> PeerExpect:
    """siw's reaction to one cell of the negotiation matrix: no TERMINATE, its MPA frame."""
    return PeerExpect(None, close, events, _siw(*where), finding=finding, note=note, dut_mpa=mpa)


_SIW_MATRIX: Mapping[Scenario, PeerExpect] = {
    S.MPA_REV1: _matrix(
        {"rev": 1, "r": 0, "m": 0, "c": 0}, "siw_cm.c:623-631 siw_proc_mpareq", "siw_cm.c:705"
    ),
    # v2-connect-send: the peer's IRD/ORD 4 (its default); siw's accept asks ORD 1, IRD 1.
    S.MPA_REV2: _matrix(
        {"rev": 2, "r": 0, "m": 0, "c": 1, "p2p": 0, "ird": 4, "ord": 1},
        _REQ,
        _ACC,
        _CMA_EST,
    ),
    S.CRC_REQUESTED: _matrix(
        {"rev": 1, "r": 0, "c": 1},
        "siw_cm.c:650-663 siw_proc_mpareq",
        "siw_main.c:45-48",
        note="the request's bits are the reply's: C=1 echoed (mpa_crc_strict off)",
    ),
    S.CRC_NOT_REQUESTED: _matrix(
        {"rev": 2, "r": 0, "c": 0},
        "siw_cm.c:650-663 siw_proc_mpareq",
        "siw_main.c:45",
        note="C=0 echoed: mpa_crc_required is const false",
    ),
    S.MARKERS_REQUESTED: _matrix(
        {"r": 1, "m": 0},
        "siw_cm.c:646-648 siw_proc_mpareq",
        "siw_cm.c:716-733 siw_proc_mpareq",
        events=(),
        close="fin",
        finding="siw sends no Markers: it answers M=1 with a reject Reply (R=1, M=0) and "
        "closes; the application never sees the request",
    ),
    S.P2P_RTR_WRITE: _matrix(
        {"r": 0, "p2p": 1, "rtr": "write"},
        "siw_cm.c:689-697 siw_proc_mpareq",
        "siw_cm.c:1632-1633 siw_accept",
        note="ESTABLISHED only after the peer's zero-length WRITE (siw_cm.c:107-139)",
    ),
    S.P2P_RTR_READ: _matrix(
        {"r": 0, "p2p": 1, "rtr": "read"},
        "siw_cm.c:689-697 siw_proc_mpareq",
        "siw_cm.c:1632-1633 siw_accept",
        note="READ picked only when WRITE is not offered",
    ),
    S.P2P_RTR_SEND: _matrix(
        {"r": 0, "p2p": 1, "rtr": "write"},
        "siw_cm.c:683-697 siw_proc_mpareq",
        events=("connect_request",),
        finding="siw answers a SEND-only RTR offer with WRITE, a type the initiator did "
        "not offer, rather than 'No Matching RTR Option'",
    ),
    S.IRD_ORD_ZERO: _matrix(
        {"r": 0, "ird": 1, "ord": 0},
        "siw_cm.c:671-679 siw_proc_mpareq",
        _ACC,
        note="its ORD lowered to the request's IRD 0; its IRD stays 1",
    ),
    S.IRD_ORD_3FFF: _matrix(
        {"r": 0, "ird": 128, "ord": 1},
        "siw_cm.c:671-679 siw_proc_mpareq",
        _ACC,
        *_MAX,
        note="the request's 0x3FFF clamped at 128, then its IRD raised to it",
    ),
    S.IRD_ORD_ABOVE_MAX: _matrix(
        {"r": 0, "ird": 128, "ord": 1},
        "siw_cm.c:671-679 siw_proc_mpareq",
        _ACC,
        *_MAX,
        note="the request's 256 clamped at 128, then its IRD raised to it",
    ),
    # siw offers no P2P (peer_to_peer const false), so the reply's RTR pick is ignored:
    # mpa_p2p_mode stays NO_RTR, no RTR is sent, the connection established.
    **{
        s: _matrix(
            _SIW_REQUEST,
            _CON,
            _NO_P2P,
            "siw_cm.c:842-873 siw_proc_mpareply",
            events=_ACTIVE_ESTABLISHED,
        )
        for s in (S.P2P_REPLY_RTR_WRITE, S.P2P_REPLY_RTR_READ, S.P2P_REPLY_RTR_SEND)
    },
    S.IRD_ORD_REPLY_ZERO: _matrix(
        _SIW_REQUEST, _CON, "siw_cm.c:806-831 siw_proc_mpareply", events=_ACTIVE_ESTABLISHED
    ),
    # The reply's ORD above siw's IRD 1 and above its maximum (relaxed negotiation still
    # refuses that): TERMINATE 'Insufficient IRD Resources', the connect fails.
    S.IRD_ORD_REPLY_3FFF: replace(_IRD_OVER, dut_mpa=_SIW_REQUEST),
    S.IRD_ORD_REPLY_ABOVE_MAX: replace(_IRD_OVER, dut_mpa=_SIW_REQUEST),
}


SIW: Mapping[Scenario, PeerExpect] = {
    **_SIW_MATRIX,
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
    # What siw's code does once the header's PD_Length is refused (a Reply's error path
    # upcalls CONNECT_REPLY -EINVAL: the application's CONNECT_ERROR); not measured, since
    # that upcall hands iw_cm private data at NULL (+4) on 6.1.192 and 6.12.118, a kernel
    # NULL dereference: docs/findings/siw-mpa-reply-pdlen-null-deref.md.
    S.PD_LENGTH_REPLY_OVER_RFC_LIMIT: PeerExpect(
        None,
        "fin",
        ("connect_error",),
        _siw("siw_cm.c:537-538", "siw_cm.c:915-917", "siw_cm.c:336-355", _CMA_REPLY),
        source_only=True,
    ),
    # Not measured: siw's drop upcalls CLOSE for an id iw_cm holds in CONN_RECV, whose
    # cm_close_handler then calls BUG() (6.1.192 and 6.12.118, replayed on the lab):
    # docs/findings/siw-p2p-bad-rtr-iwcm-bug.md.
    S.P2P_BAD_RTR: PeerExpect(
        None,
        "rst",
        ("connect_request",),
        _siw("siw_cm.c:107-134 siw_rtr_data_ready", "siw_cm.c:424", _TCP_RST),
        source_only=True,
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
    # Measured on the lab (2026-12-06): REJECTED with 196 bytes for the 8 sent.
    S.REPLY_CUT_BY_CLOSE: PeerExpect(
        None,
        "fin",
        ("rejected",),
        _siw("siw_cm.c:578-585", "siw_cm.c:1087-1094", "siw_cm.c:336-355", _CMA_REPLY),
        finding="siw's peer-close upcall keeps the Reply's PD_Length (the MPA timer's path "
        "zeroes it, siw_cm.c:1129-1142) and hands the application the partly received, "
        "kmalloc()ed private data buffer: kernel heap "
        "(docs/findings/siw-mpa-reply-pdata-infoleak.md)",
        unsent_private_data=True,
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
    # An unknown STag index (write-invalid-stag), or the index of a region with another key
    # (write-stag-next-to-valid: siw's keys are 0, siw_mem.c:120).
    S.INVALID_STAG: _siw_fpdu(
        term(DDP_TAGGED, 0x00),
        "siw_qp_rx.c:562-571",
        "siw_qp_rx.c:583-587",
        _LAB_WRITE_INVALID_STAG,
        close="fin",
    ),
    S.BASE_BOUNDS: _siw_fpdu_measured(
        term(DDP_TAGGED, 0x01), "siw_qp_rx.c:589-596", "siw_qp.c:328-329"
    ),
    S.ACCESS_RIGHTS: _siw_fpdu_measured(
        term(DDP_TAGGED, 0x00),
        "siw_qp_rx.c:589-596",
        "siw_qp.c:332-338",
        finding="siw reports a WRITE without remote-write rights as DDP Invalid STag "
        "(1/1/0x00), not RDMAP Access rights violation (0/1/0x02)",
    ),
    # siw_init_rresp queues the READ Response with the request's source STag and TO as its
    # SGE (siw_qp_rx.c:703-705); siw_qp_sq_proc_tx checks that SGE with no right at all
    # (perms 0, siw_qp_tx.c:826-833: "w/o checking access for LOCAL_READ permission"), so
    # siw_check_mem's rights test (siw_mem.c:182-186) passes and the data goes out.
    S.READ_ACCESS_RIGHTS: PeerExpect(
        None,
        "none",
        PASSIVE_ESTABLISHED,
        _siw("siw_qp_rx.c:703-705", "siw_qp_tx.c:826-833", "siw_mem.c:182-186"),
        finding="siw answers a READ Request from a region registered without remote read "
        "with a READ Response carrying its bytes, not a TERMINATE (RDMAP Access rights "
        "violation, 0/1/0x02): it checks no right on a READ Response's source",
    ),
    S.INVALID_QN: _siw_fpdu_measured(
        term(DDP_UNTAGGED, 0x01), "siw_qp_rx.c:288-292", "siw_qp_rx.c:324-326"
    ),
    S.INVALID_MSN: _siw_fpdu_measured(
        term(DDP_UNTAGGED, 0x03), "siw_qp_rx.c:294-299", "siw_qp_rx.c:324-326"
    ),
    S.MESSAGE_TOO_LONG: _siw_fpdu_measured(
        term(DDP_UNTAGGED, 0x02),
        "siw_qp_rx.c:314-321",
        finding="siw reports a SEND too long for the receive as 'Invalid MSN - no buffer "
        "available' (1/2/0x02), not 'DDP Message too long' (1/2/0x05)",
    ),
    S.INVALID_OPCODE: _siw_fpdu_measured(term(RDMAP_REMOTE_OP, 0x06), "siw_qp_rx.c:1071-1080"),
    # siw_init_rresp: one READ Response in transmit, one in the IRQ (IRD 1), the next one
    # over; none of the responses went out before the TERMINATE on the lab.
    S.READ_BEYOND_IRD: _siw_fpdu_measured(term(RDMAP_REMOTE_OP, 0x07), "siw_qp_rx.c:694-726"),
    S.BAD_CRC: _siw_fpdu(term(MPA_ERROR, 0x02), "siw_qp_rx.c:995-1009", close="fin"),
    S.PEER_TERMINATE: PeerExpect(
        None,
        "fin",
        _DISC,
        _siw("siw_qp_rx.c:892-960", *_DROP_FIN, _LAB_FPDU_ERRORS),
        note="siw_qp_rx.c siw_proc_terminate (6.1.192) logs the TERMINATE and returns "
        "-ECONNRESET with its control word and CRC unread (M=0); siw_tcp_rx_data then "
        "drops the connection (siw_qp_cm_drop), whose CLOSE_LLP work (siw_cm.c "
        "siw_cm_work_handler) sends no TERMINATE back (none was set) and reports "
        "IW_CM_EVENT_CLOSE: iw_cm moves the QP to ERROR, the application sees DISCONNECTED; "
        "the close measured a FIN (an RST inferred from the unread rest did not come)",
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
    S.FPDUS_ONE_SEGMENT: PeerExpect(
        None, "none", PASSIVE_ESTABLISHED, _siw("siw_qp_rx.c:1380-1490", _CMA_EST)
    ),
    # The header's first part read, -EAGAIN, and no upcall until the rest came (the fix
    # 3056fc6c32e6, "RDMA/siw: Fix duplicated reported IW_CM_EVENT_CONNECT_REPLY event").
    S.REPLY_IN_PIECES: PeerExpect(
        None,
        "none",
        _ACTIVE_ESTABLISHED,
        _siw("siw_cm.c:526-535", "siw_cm.c:745-749", "siw_cm.c:915-917", _CMA_EST),
    ),
}

_CX = "drivers/infiniband/hw/cxgb4"


def _cx(where: str) -> tuple[str, ...]:
    return (f"{_CX}/{where} ({_K})",)


def _cx_term(term: Term, where: str, finding: str = "") -> PeerExpect:
    return PeerExpect(term, "rst", _DISC, _cx(where), source_only=True, finding=finding)


_CX_TERM_TYPE = (
    "iw_cxgb4 puts LAYER_MPA|DDP_LLP (layer 2, type 3) in an MPA error's TERMINATE; the "
    "RFCs' MPA error type is 0 (iw_cxgb4.h:718, :725)"
)
_CX_RTR = (
    "iw_cxgb4's reply names its module's p2p_type (RDMA READ by default, cm.c:106-109) "
    "whatever RTR types the initiator offered (send_mpa_reply, cm.c:1176-1189)"
)


def _cx_mpa(
    mpa: dict[str, int | str],
    *where: str,
    events: tuple[str, ...] = PASSIVE_ESTABLISHED,
    finding: str = "",
) -> PeerExpect:
    """iw_cxgb4's negotiation: no TERMINATE, no close, its MPA frame (source only)."""
    sources = tuple(s for w in where for s in _cx(w))
    return PeerExpect(None, "none", events, sources, source_only=True, finding=finding, dut_mpa=mpa)


def _cx_refuses(ecode: int, where: str, mpa: dict[str, int | str]) -> PeerExpect:
    """iw_cxgb4 as the initiator refusing the peer's reply: its TERMINATE (layer 2, type
    3), connect_reply_upcall(-ENOMEM), the graceful close process_mpa_reply's 1 asks for."""
    return PeerExpect(
        (2, 3, ecode),
        "fin",
        ("connect_error",),
        _cx(f"{where}, 1690-1692, 1867-1868"),
        source_only=True,
        finding=_CX_TERM_TYPE,
        dut_mpa=mpa,
    )


# iw_cxgb4 in the negotiation matrix (cm.c at 6.1.192, defaults: crc_enabled 1,
# markers_enabled 0, peer2peer 1, p2p_type READ, cm.c:102-128).  Its reply's C is
# crc_enabled or the request's C, M its own markers_enabled (process_mpa_request
# cm.c:1779-1781, send_mpa_reply cm.c:1165-1168); as the initiator it offers P2P with
# p2p_type's RTR (send_mpa_req cm.c:1000-1014) and refuses a reply that picks another
# (process_mpa_reply cm.c:1622-1662), or whose ORD is above its IRD and maximum
# (cm.c:1577-1598, :1673-1684).
_CX_MATRIX: Mapping[Scenario, PeerExpect] = {
    S.CRC_REQUESTED: _cx_mpa({"c": 1}, "cm.c:1779", "cm.c:1165-1166"),
    S.CRC_NOT_REQUESTED: _cx_mpa({"c": 1}, "cm.c:1779", "cm.c:1165-1166"),
    S.MARKERS_REQUESTED: _cx_mpa({"r": 0, "m": 0}, "cm.c:1780-1781", "cm.c:1167-1168"),
    S.P2P_RTR_WRITE: _cx_mpa(
        {"p2p": 1, "rtr": "read"}, "cm.c:1803-1812", "cm.c:1176-1189", finding=_CX_RTR
    ),
    S.P2P_RTR_READ: _cx_mpa({"p2p": 1, "rtr": "read"}, "cm.c:1803-1812", "cm.c:1176-1189"),
    S.P2P_RTR_SEND: _cx_mpa(
        {"p2p": 1, "rtr": "read"}, "cm.c:1803-1812", "cm.c:1176-1189", finding=_CX_RTR
    ),
    S.P2P_REPLY_RTR_READ: _cx_mpa(
        {"p2p": 1, "rtr": "read"}, "cm.c:1000-1014", "cm.c:1599-1611", events=("established",)
    ),
    S.P2P_REPLY_RTR_WRITE: _cx_refuses(0x07, "cm.c:1622-1662", {"p2p": 1, "rtr": "read"}),
    S.IRD_ORD_REPLY_3FFF: _cx_refuses(0x06, "cm.c:1577-1598, 1673-1684", {}),
}

# iw_cxgb4: only what its source says (never run here); its close after a TERMINATE
# is the firmware's, so "rst" is the abortive close c4iw_ep_disconnect asks for.
IW_CXGB4: Mapping[Scenario, PeerExpect] = {
    S.INVALID_STAG: _cx_term((0, 1, 0x00), "qp.c:1448-1455"),
    S.ACCESS_RIGHTS: _cx_term((0, 1, 0x02), "qp.c:1469-1471"),
    # The same mapping for any CQE status T4_ERR_ACCESS, the READ Request's source as a
    # WRITE's sink: which status the firmware gives is not in the driver.
    S.READ_ACCESS_RIGHTS: _cx_term((0, 1, 0x02), "qp.c:1469-1471"),
    S.BASE_BOUNDS: _cx_term((1, 1, 0x01), "qp.c:1477-1483"),
    S.INVALID_QN: _cx_term((1, 2, 0x01), "qp.c:1534-1536"),
    S.INVALID_MSN: _cx_term((1, 2, 0x03), "qp.c:1538-1543"),
    S.MESSAGE_TOO_LONG: _cx_term((1, 2, 0x05), "qp.c:1513-1515"),
    S.INVALID_OPCODE: _cx_term((0, 2, 0x06), "qp.c:1530-1532"),
    S.READ_BEYOND_IRD: _cx_term((1, 2, 0x03), "qp.c:1538-1543"),
    S.BAD_CRC: _cx_term(
        (2, 3, 0x02),
        "qp.c:1505-1507",
        finding=_CX_TERM_TYPE,
    ),
    **_CX_MATRIX,
    # cm.c terminate(), CPL_RDMA_TERMINATE's handler: the QP to TERMINATE internally (qp.c
    # c4iw_modify_qp: send_term unset, so none back), then c4iw_ep_disconnect(ep,
    # abrupt=1), an abort (d219face9059); its CLOSE upcall is the application's DISCONNECTED.
    S.PEER_TERMINATE: PeerExpect(
        None, "rst", _DISC, (*_cx("cm.c:3024-3046"), *_cx("qp.c:1946-1960")), source_only=True
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


# Where a provider's application is known to get private data the peer never sent, in
# any scenario (a fuzz case has no expectation of its own, hil/run/peercase.py): the cm
# event kinds it comes with, and the finding.
UNSENT_PRIVATE_DATA: Mapping[str, tuple[frozenset[str], str]] = {
    "siw": (
        frozenset({"rejected"}),
        "siw-mpa-reply-pdata-infoleak: a reply cut short by the peer's close leaves "
        "PD_Length set for the CONNECT_REPLY upcall (siw_cm.c:1087-1094, Linux 6.1.192; "
        "docs/findings/siw-mpa-reply-pdata-infoleak.md)",
    ),
}


def known_unsent(provider: str, event: str) -> str:
    """The known finding that explains ``provider``'s application getting private data
    the peer never sent with cm event ``event`` ('' when none does)."""
    events, finding = UNSENT_PRIVATE_DATA.get(provider, (frozenset(), ""))
    return finding if event in events else ""


def departures(provider: str) -> list[tuple[Scenario, str]]:
    """``provider``'s departures from the RFCs: each class's finding, in class order."""
    return [(s, e.finding) for s, e in PROVIDERS[provider].items() if e.finding]
