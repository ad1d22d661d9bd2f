"""What a DUT must do when the reference peer runs a scenario class of issue 26
item 3: the classes (:class:`Scenario`), the RFCs' requirement per class
(:data:`RFC`, :class:`RfcExpect`: the TERMINATEs and closes they allow, with
sections), and the shape of one provider's reaction (:class:`PeerExpect`).
What siw and iw_cxgb4 actually do is :mod:`hil.judge.peerproviders`;
docs/peer-expectations.md is the table in prose.

Names beyond peer-shared's vocabulary (this module's own): ``Close`` ``"fin"``,
``"rst"``, ``"none"`` (what the DUT puts on the TCP connection); cm events are
librdmacm's names in lowercase without ``RDMA_CM_EVENT_`` (``connect_request``,
``established``, ``rejected``, ``unreachable``, ``connect_error``,
``disconnected``), those the DUT's application sees.  A TERMINATE is a
``(layer, etype, ecode)`` triple (:mod:`hil.judge.terminate` names it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from hil.judge.terminate import lookup

Close = Literal["fin", "rst", "none"]
Term = tuple[int, int, int]  # (layer, etype, ecode), RFC 5040 4.8


class Scenario(StrEnum):
    """The scenario classes of issue 26 item 3 (the peer's side in brackets)."""

    # MPA negotiation matrix (the peer is the initiator unless named "reply")
    MPA_REV1 = "mpa_rev1"
    MPA_REV2 = "mpa_rev2"
    CRC_REQUESTED = "crc_requested"
    CRC_NOT_REQUESTED = "crc_not_requested"
    MARKERS_REQUESTED = "markers_requested"
    P2P_RTR_WRITE = "p2p_rtr_write"
    P2P_RTR_READ = "p2p_rtr_read"
    P2P_RTR_SEND = "p2p_rtr_send"
    P2P_BAD_RTR = "p2p_bad_rtr"
    IRD_ORD_ZERO = "ird_ord_zero"
    IRD_ORD_3FFF = "ird_ord_3fff"
    IRD_ORD_ABOVE_MAX = "ird_ord_above_max"
    # ... and the DUT the initiator: the peer's reply picks the RTR type or IRD/ORD
    P2P_REPLY_RTR_WRITE = "p2p_reply_rtr_write"
    P2P_REPLY_RTR_READ = "p2p_reply_rtr_read"
    P2P_REPLY_RTR_SEND = "p2p_reply_rtr_send"
    IRD_ORD_REPLY_ZERO = "ird_ord_reply_zero"
    IRD_ORD_REPLY_3FFF = "ird_ord_reply_3fff"
    IRD_ORD_REPLY_ABOVE_MAX = "ird_ord_reply_above_max"
    # bad MPA
    WRONG_KEY = "wrong_key"
    WRONG_KEY_REPLY = "wrong_key_reply"
    UNKNOWN_REVISION = "unknown_revision"
    REVISION_ZERO = "revision_zero"
    PD_LENGTH_OVER_RFC_LIMIT = "pd_length_over_rfc_limit"
    PD_LENGTH_OVER_256 = "pd_length_over_256"
    PD_LENGTH_REPLY_OVER_RFC_LIMIT = "pd_length_reply_over_rfc_limit"
    INCOMPLETE_REQUEST = "incomplete_request"
    INCOMPLETE_REPLY = "incomplete_reply"
    REPLY_CUT_BY_CLOSE = "reply_cut_by_close"
    REJECT_WITH_PDATA = "reject_with_pdata"
    REJECT_WITHOUT_PDATA = "reject_without_pdata"
    PEER_REJECTS = "peer_rejects"
    # DDP/RDMAP errors, the connection established
    INVALID_STAG = "invalid_stag"
    BASE_BOUNDS = "base_bounds"
    ACCESS_RIGHTS = "access_rights"
    READ_ACCESS_RIGHTS = "read_access_rights"
    INVALID_QN = "invalid_qn"
    INVALID_MSN = "invalid_msn"
    MESSAGE_TOO_LONG = "message_too_long"
    INVALID_OPCODE = "invalid_opcode"
    READ_BEYOND_IRD = "read_beyond_ird"
    BAD_CRC = "bad_crc"
    # the peer ends the stream
    PEER_TERMINATE = "peer_terminate"
    # segmenting
    REPLY_AND_FPDU_ONE_SEGMENT = "reply_and_fpdu_one_segment"
    ONE_BYTE_SEGMENTS = "one_byte_segments"
    REPLY_IN_PIECES = "reply_in_pieces"
    FPDUS_ONE_SEGMENT = "fpdus_one_segment"


@dataclass(frozen=True)
class RfcExpect:
    """What the RFCs require of the DUT: ``terminates`` allowed (empty: none may be
    sent; ``any_terminate``: one is required, its code not pinned; with
    ``terminate_optional`` none is also allowed, where the RFC lets the DUT refuse or
    go on), ``closes`` allowed, and the requirement in words with its ``sources``
    (RFC sections)."""

    requirement: str
    sources: tuple[str, ...]
    terminates: frozenset[Term] = frozenset()
    any_terminate: bool = False
    closes: frozenset[Close] = frozenset({"none"})
    terminate_optional: bool = False

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError(f"RFC expectation {self.requirement!r} cites no source")


@dataclass(frozen=True)
class PeerExpect:
    """A provider's reaction to one scenario class: the TERMINATE it sends (or
    None), how it closes, the cm events its application sees (in order), the
    ``bound_s`` its timer gives where timing matters, the ``sources`` (driver
    file:line at the kernel version), ``finding``: how it departs from the
    RFC ("" when it does not), and ``dut_mpa``: fields the DUT's MPA frame must
    carry (its reply as the responder, its request as the initiator; peer-shared's
    names: rev, m, c, r, ird, ord, p2p, rtr), none checked when empty."""

    terminate: Term | None
    close: Close
    cm_events: tuple[str, ...]
    sources: tuple[str, ...]
    bound_s: float | None = None
    finding: str = ""
    source_only: bool = False
    note: str = ""
    dut_mpa: Mapping[str, int | str] = field(default_factory=dict)
    # The application gets private data the peer never sent (kernel memory): never what
    # an RFC allows, so only ever a finding.
    unsent_private_data: bool = False

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("a provider expectation cites no source")
        if self.terminate is not None and lookup(*self.terminate) is None and not self.finding:
            raise ValueError(f"TERMINATE {self.terminate} is in no RFC table and no finding")


S = Scenario
RDMAP_REMOTE_OP, DDP_TAGGED, DDP_UNTAGGED, MPA_ERROR = (0, 2), (1, 1), (1, 2), (2, 0)
PASSIVE_ESTABLISHED = ("connect_request", "established")
_MPA_REQ = "RFC 5044 7.1.1"
_STARTUP = "RFC 5044 7.1.2"
_V2 = "RFC 6581 5"


def term(pair: tuple[int, int], ecode: int) -> Term:
    """The TERMINATE triple of a (layer, etype) pair and an error code."""
    return (pair[0], pair[1], ecode)


_CLOSE: frozenset[Close] = frozenset({"fin", "rst"})
_ANY_CLOSE: frozenset[Close] = frozenset({"none", "fin", "rst"})


def _fpdu_error(text: str, terms: tuple[Term, ...], *sources: str) -> RfcExpect:
    """A DDP/RDMAP error: a TERMINATE with one of ``terms``, then the stream closed."""
    return RfcExpect(text, (*sources, "RFC 5040 7.4"), frozenset(terms), closes=_CLOSE)


def _reply_rtr(kind: str) -> RfcExpect:
    """The DUT initiates and the peer's reply picks the ``kind`` RTR (RFC 6581 5.1-5.2)."""
    return RfcExpect(
        f"the reply picks {kind}: an initiator that offered it sends the zero-length {kind} "
        "first; one that did not may go on without P2P or refuse ('No Matching RTR Option')",
        (_V2, "RFC 6581, IANA MPA Errors 0x07 (RFC 6580)"),
        frozenset({(2, 0, 0x07)}),
        closes=_ANY_CLOSE,
        terminate_optional=True,
    )


def _reply_ord_over(value: str) -> RfcExpect:
    """The DUT initiates and the peer's reply asks an ORD above the DUT's IRD."""
    return RfcExpect(
        f"a reply ORD of {value}, above the initiator's IRD: the initiator may refuse with "
        "'Insufficient IRD Resources' and close, or go on with its own IRD",
        ("RFC 6581 3", _V2, "RFC 6581, IANA MPA Errors 0x06 (RFC 6580)"),
        frozenset({(2, 0, 0x06)}),
        closes=_ANY_CLOSE,
        terminate_optional=True,
    )


RFC: Mapping[Scenario, RfcExpect] = {
    S.MPA_REV1: RfcExpect("reply Rev 1, the connection established", (_MPA_REQ,)),
    S.MPA_REV2: RfcExpect("reply Rev 2 with IRD/ORD words, established", (_V2,)),
    S.CRC_REQUESTED: RfcExpect("CRC used when either side asks (C=1 in the reply)", (_MPA_REQ,)),
    S.CRC_NOT_REQUESTED: RfcExpect("C in the reply is the responder's own wish", (_MPA_REQ,)),
    S.MARKERS_REQUESTED: RfcExpect(
        "M=1: the responder MUST put Markers on what it sends; the connection stands",
        (_MPA_REQ,),
    ),
    S.P2P_RTR_WRITE: RfcExpect("reply picks an offered RTR type (WRITE)", (_V2,)),
    S.P2P_RTR_READ: RfcExpect("reply picks an offered RTR type (READ)", (_V2,)),
    S.P2P_RTR_SEND: RfcExpect(
        "reply picks SEND, the only type offered, or refuses ('No Matching RTR Option')",
        (_V2, "RFC 5040 7.4 via IANA MPA Errors 0x07"),
        frozenset({(2, 0, 0x07)}),
        closes=_ANY_CLOSE,
    ),
    S.P2P_BAD_RTR: RfcExpect(
        "where the RTR belongs, a frame that is no valid FPDU: the stream is terminated "
        "and closed; no RFC pins the code",
        (_V2, "RFC 5044 8"),
        any_terminate=True,
        terminate_optional=True,
        closes=_CLOSE,
    ),
    S.IRD_ORD_ZERO: RfcExpect("IRD/ORD 0 negotiated as 0 (no READs)", ("RFC 6581 3", _V2)),
    S.IRD_ORD_3FFF: RfcExpect(
        "0x3FFF (the 14-bit maximum) lowered to what the responder has", ("RFC 6581 3", _V2)
    ),
    S.IRD_ORD_ABOVE_MAX: RfcExpect(
        "values above the DUT's maximum lowered in the reply", ("RFC 6581 3", _V2)
    ),
    S.P2P_REPLY_RTR_WRITE: _reply_rtr("WRITE"),
    S.P2P_REPLY_RTR_READ: _reply_rtr("READ"),
    S.P2P_REPLY_RTR_SEND: _reply_rtr("SEND"),
    S.IRD_ORD_REPLY_ZERO: RfcExpect(
        "a reply of IRD/ORD 0: the initiator's ORD is 0 (no READs), the connection stands",
        ("RFC 6581 3", _V2),
    ),
    S.IRD_ORD_REPLY_3FFF: _reply_ord_over("0x3FFF"),
    S.IRD_ORD_REPLY_ABOVE_MAX: _reply_ord_over("a value above the DUT's maximum"),
    S.WRONG_KEY: RfcExpect(
        "a wrong Key: close the connection, report an error locally",
        (_MPA_REQ, _STARTUP),
        closes=_CLOSE,
    ),
    S.WRONG_KEY_REPLY: RfcExpect(
        "an invalid Reply Frame: the TCP connection MUST be closed at once",
        ("RFC 5044 8 (code 4)", _MPA_REQ),
        closes=_CLOSE,
    ),
    S.UNKNOWN_REVISION: RfcExpect(
        "a Rev it cannot interoperate with: close, report an error locally",
        (_MPA_REQ,),
        closes=_CLOSE,
    ),
    S.REVISION_ZERO: RfcExpect(
        "Rev MUST be 1 (RFC 5044) or 2 (RFC 6581): Rev 0 is not interoperable, close",
        (_MPA_REQ, _V2),
        closes=_CLOSE,
    ),
    S.PD_LENGTH_OVER_RFC_LIMIT: RfcExpect(
        "PD_Length past 512: an invalid frame, close", (_MPA_REQ,), closes=_CLOSE
    ),
    S.PD_LENGTH_OVER_256: RfcExpect(
        "PD_Length 257..512 is legal: the request goes to the application", (_MPA_REQ,)
    ),
    S.PD_LENGTH_REPLY_OVER_RFC_LIMIT: RfcExpect(
        "a Reply whose PD_Length is past 512: an invalid Reply Frame, close at once",
        (_MPA_REQ, "RFC 5044 8 (code 4)"),
        closes=_CLOSE,
    ),
    S.INCOMPLETE_REQUEST: RfcExpect(
        "a Request that never completes: the responder's timer closes the connection",
        (_STARTUP,),
        closes=_CLOSE,
    ),
    S.INCOMPLETE_REPLY: RfcExpect(
        "a Reply that never comes: the initiator's timer fails the connect",
        (_STARTUP,),
        closes=_CLOSE,
    ),
    S.REPLY_CUT_BY_CLOSE: RfcExpect(
        "a Reply cut short by the peer's close: the connect fails, and the application "
        "gets no private data beyond what the peer sent (it is the peer's ULP data)",
        (_STARTUP, "RFC 5044 7.1 (Private Data)"),
        closes=_CLOSE,
    ),
    S.REJECT_WITH_PDATA: RfcExpect(
        "a Reply with R=1 and the private data, then the connection closed",
        (_MPA_REQ, "RFC 5044 7.1.4"),
        closes=_CLOSE,
    ),
    S.REJECT_WITHOUT_PDATA: RfcExpect(
        "a Reply with R=1, PD_Length 0, then the connection closed", (_MPA_REQ,), closes=_CLOSE
    ),
    S.PEER_REJECTS: RfcExpect(
        "R=1 in the Reply: the connect fails, the private data reaches the ULP",
        (_MPA_REQ, "RFC 5044 7.1.4"),
        closes=_CLOSE,
    ),
    S.INVALID_STAG: _fpdu_error(
        "WRITE to an invalid STag", (term(DDP_TAGGED, 0x00), (0, 1, 0x00)), "RFC 5041 7.2"
    ),
    S.BASE_BOUNDS: _fpdu_error(
        "WRITE past the region's bounds", (term(DDP_TAGGED, 0x01), (0, 1, 0x01)), "RFC 5041 7.2"
    ),
    S.ACCESS_RIGHTS: _fpdu_error("WRITE to a region without remote write", ((0, 1, 0x02),)),
    S.READ_ACCESS_RIGHTS: _fpdu_error(
        "READ Request whose source region lacks remote read", ((0, 1, 0x02),)
    ),
    S.INVALID_QN: _fpdu_error(
        "SEND on a QN other than 0", (term(DDP_UNTAGGED, 0x01),), "RFC 5041 7.2"
    ),
    S.INVALID_MSN: _fpdu_error(
        "SEND with an MSN out of range", (term(DDP_UNTAGGED, 0x03),), "RFC 5041 7.2"
    ),
    S.MESSAGE_TOO_LONG: _fpdu_error(
        "SEND longer than the posted receive", (term(DDP_UNTAGGED, 0x05),), "RFC 5041 7.2"
    ),
    S.INVALID_OPCODE: _fpdu_error(
        "an RDMAP opcode past 7", (term(RDMAP_REMOTE_OP, 0x06),), "RFC 5040 4.3"
    ),
    S.READ_BEYOND_IRD: RfcExpect(
        "more outstanding READ Requests than the negotiated IRD: the stream is "
        "terminated; no RFC pins the code",
        ("RFC 6581 3", "RFC 5040 7.4"),
        any_terminate=True,
        closes=_CLOSE,
    ),
    S.BAD_CRC: _fpdu_error(
        "an FPDU whose CRC is wrong, CRC negotiated", (term(MPA_ERROR, 0x02),), "RFC 5044 8"
    ),
    S.PEER_TERMINATE: RfcExpect(
        "a TERMINATE received: no TERMINATE back, the stream closed, the QP in error",
        ("RFC 5040 7.4", "RFC 5040 4.8"),
        closes=_CLOSE,
    ),
    S.REPLY_AND_FPDU_ONE_SEGMENT: RfcExpect(
        "MPA v1: the responder MUST NOT send an FPDU before it received one (7.1.2 "
        "rule 4); without RTR (RFC 6581) it may, and the data is delivered",
        (_STARTUP, _V2),
    ),
    S.ONE_BYTE_SEGMENTS: RfcExpect(
        "TCP segmenting is invisible to MPA: the frames parse, the data is intact",
        ("RFC 5044 Appendix A",),
    ),
    S.REPLY_IN_PIECES: RfcExpect(
        "a reply that arrives in pieces over time is one reply: the connection is "
        "established once, the data intact",
        ("RFC 5044 Appendix A",),
    ),
    S.FPDUS_ONE_SEGMENT: RfcExpect(
        "several FPDUs in one segment each placed, the data intact", ("RFC 5044 4",)
    ),
}


def differs(rfc: RfcExpect, got: PeerExpect) -> list[str]:
    """Where ``got``'s TERMINATE, close or private data falls outside what ``rfc`` allows."""
    found = []
    required = (rfc.terminates or rfc.any_terminate) and not rfc.terminate_optional
    if got.terminate is None and required:
        found.append("no TERMINATE where the RFC asks for one")
    if got.terminate is not None and not rfc.any_terminate and got.terminate not in rfc.terminates:
        found.append(
            f"TERMINATE {got.terminate}, the RFC allows {sorted(rfc.terminates) or 'none'}"
        )
    if got.close not in rfc.closes:
        found.append(f"close {got.close!r}, the RFC allows {sorted(rfc.closes)}")
    if got.unsent_private_data:
        found.append("private data the peer never sent reaches the application")
    return found
