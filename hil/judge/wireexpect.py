"""What siw, iw_cxgb4 and irdma put on the wire where the iWARP RFCs leave a choice.

The wire rules (``hil.wire.rules``) read a host's :class:`WireExpect` from
its profile (``Profile.wire``); each value's source is in docs/wire.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

# TCP and iWARP signals a wire rule names (hil.wire.rules): how a connection ends.
WireSignal = Literal["FIN", "RST", "TERMINATE"]


@dataclass(frozen=True)
class WireExpect:
    """What a provider puts on the wire where the iWARP RFCs leave it a choice.

    Read by the wire rules (``hil.wire.rules``); each value's source is in
    docs/wire.md.
    """

    # MPA revisions the provider may send (cxgb4 falls back to v1 after a RST).
    mpa_revisions: frozenset[int]
    # The CRC flag in MPA frames; None when it is a per-host setting we do not pin.
    crc: bool | None
    # MPA v2 enhanced connection setup (the IRD/ORD words before private data).
    enhanced: bool
    # How the rejecting side ends the TCP connection after its MPA reject reply.
    reject_teardown: frozenset[WireSignal]
    # What an abortive close (QP to ERR, destroy while connected, SIGKILL) must put on
    # the wire: at least one of these, and never a FIN-only close.
    abortive_signals: frozenset[WireSignal]
    # A remote access error's TERMINATE: layer, error type, and the codes allowed for
    # each way the remote_access_error sequence breaks the WRITE ("bad_rkey", "past_end").
    access_error_layer: str
    access_error_type: int
    access_error_codes: tuple[tuple[str, frozenset[int]], ...]


# DDP error type 1 (tagged buffer) and its codes, RFC 5041 7.2: 0x00 invalid
# STag (a wrong rkey), 0x01 base or bounds violation (past the region's end).
_TAGGED_BUFFER = 1
_TAGGED_CODES = (("bad_rkey", frozenset({0x00})), ("past_end", frozenset({0x01})))

SIW_WIRE = WireExpect(
    mpa_revisions=frozenset({2}),
    crc=False,  # siw's mpa_crc_required defaults to false: no CRC unless the peer asks
    enhanced=True,
    reject_teardown=frozenset({"FIN", "RST"}),
    # siw's emergency close (QP RTS -> ERROR: siw_qp_nextstate_from_rts) drops the
    # connection with no TERMINATE and releases its socket, a FIN-only close; destroy
    # and SIGKILL take the same path through iw_cm (iwcm_modify_qp_err).  [src, lab]
    abortive_signals=frozenset({"TERMINATE", "RST", "FIN"}),
    access_error_layer="DDP",
    access_error_type=_TAGGED_BUFFER,
    access_error_codes=_TAGGED_CODES,
)

CXGB4_WIRE = WireExpect(
    mpa_revisions=frozenset({1, 2}),
    crc=None,  # the crc_enabled module parameter (default on); pinned by issue 13's doctor
    enhanced=True,
    reject_teardown=frozenset({"FIN", "RST"}),
    abortive_signals=frozenset({"TERMINATE", "RST"}),
    access_error_layer="DDP",
    access_error_type=_TAGGED_BUFFER,
    access_error_codes=_TAGGED_CODES,
)

# irdma (Linux 6.1.192): MPA v2 (IRDMA_CM_DEFAULT_MPA_VER, cm.h:66), v1 after a RST during
# MPA v2 (irdma_handle_rst_pkt cm.c:2476-2484); the CRC flag always set
# (irdma_build_mpa_v1 cm.c:798); markers only with iw_ooo, which 6.1 never sets (cm.c:819,
# main.h:349); the request offers RDMA0 WRITE and READ as its RTR, the reply picks READ
# when offered (irdma_build_mpa_v2 cm.c:842-857, irdma_negotiate_mpa_v2_ird_ord :997-1007).
# A reject's MPA reply carries the FIN (irdma_send_mpa_reject cm.c:944); an abortive close
# (QP to ERR) resets the connection (reset_tcp_conn, verbs.c:1647-1650).  Offloaded: the
# capture plan finds no host TCP for it (hil.wire.plan, HOST_TCP_DRIVERS).
# cxgb4's choices, but the CRC is always on.
IRDMA_WIRE = replace(CXGB4_WIRE, crc=True)
