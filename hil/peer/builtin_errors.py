"""The built-in peer scenarios of DDP/RDMAP errors, of a TERMINATE from the peer and of
several FPDUs in one TCP segment (issue 26 item 3), registered into
:data:`hil.peer.builtin.SCENARIOS` (which imports this module).

Each error scenario connects with MPA v2 (CRC on) and sends one FPDU that breaks one rule;
the DUT must answer with a TERMINATE and close (RFC 5040 7.4, RFC 5041 7.2; the codes each
provider sends are hil/judge/peerproviders.py's, with their sources).  The DUT's receives
are its CM endpoint's: 16 of 64 KiB each (hil/agent/remote/cm/stream.py QP_DEPTH,
librdmacm/channel.py create_qp), so "too long for the posted receive" is a SEND of
64 KiB + 1 in two DDP segments (one FPDU holds at most 65535 bytes, RFC 5044 4).

The tagged errors name a region the DUT registers for them (a ``reg_mr`` step: one page,
with the rights each scenario gives) by its STag, base and length (``{dut: stag}``,
hil/peer/scenario.py): a WRITE one byte past its end (base and bounds), a WRITE to the STag
next to its own (same index, another key: invalid), a WRITE to a region without remote
write and a READ Request from one without remote read (access rights, RFC 5040 7.4).

:data:`ONE_FAMILY`: these scenarios test DDP and RDMAP above an established stream, where
the address family plays no part, so the suite runs them on IPv4 only (the budget of
ci/suites, docs/peer-scenarios.md).
"""

from __future__ import annotations

from typing import Any

from hil.peer.builtin import (
    CONNECTED,
    HIL,
    LISTEN,
    PROMPT_S,
    RECV_HIL,
    REPLY,
    SCENARIOS,
    SEND_HIL,
    TERMINATED,
)
from hil.peer.scenario import parse

# RFC 5041 4.3: an untagged queue's first MSN is 1; 5 is past what the DUT expects.
MSN_TOO_HIGH = 5
# RFC 5040 5.1: RDMAP uses queues 0..2; 3 is none of them.
INVALID_QN = 3
# RFC 5040 4.3: opcodes 0..7 are defined; 8 is the first unknown one.
INVALID_OPCODE = 8
# The DUT's receive buffer (module doc) and one byte more, in two DDP segments: the first
# as long as an untagged FPDU goes (ULPDU_Length 65535 less the 18 header bytes, RFC 5044 4,
# RFC 5041 4.3), the second the rest, 20 bytes.  A short second segment leaves little unread
# when the DUT finds the error in its header: with 32 KiB unread siw closed with an RST in
# one run of two, a FIN in the other (lab 2026-12-05).
RECV_BYTES = 65536
FIRST_SEGMENT = 0xFFFF - 18
# READ Requests written at once, past the IRD of 1 the connection negotiates: siw holds one
# READ Response in transmit and one in its IRQ (siw_qp_rx.c siw_init_rresp, Linux 6.1.192),
# so a third outstanding one is already beyond it; 8 leave no doubt for any DUT.
READS = 8

# The SENDs of one segment, each a prefix of the one before: the DUT's CM endpoint posts
# every receive on its one buffer, at offset 0 (librdmacm/channel.py post_recv), so SENDs
# that land before the first is read overlay each other; this way each completion still
# shows its own message's bytes and length, which a SEND lost, cut or misplaced would change.
SEGMENT_SENDS = tuple(b"hil-fpdu-1-2-3"[:n].hex() for n in (14, 12, 10))

# ibv_poll_cq(3) IBV_WC_WR_FLUSH_ERR: a receive flushed by its QP's move to ERROR.
WR_FLUSH_ERR = 5

# How long the peer waits for the DUT's reaction to the READs (its TERMINATE and close come
# at once: lab policy, as PROMPT_S); the peer records for DRAIN_S more (hil/peer/run.py).
REACT_S = 2.0

_TERMINATE_FROM_PEER = {
    "step": "send",
    "frame": "fpdu",
    "opcode": "terminate",
    # RDMAP / Remote Operation Error / Unspecified Error (RFC 5040 7.4), no header attached.
    "layer": 0,
    "etype": 2,
    "ecode": 0xFF,
}


# reg_mr's rights (hil/agent/protocol/cmops.py REGION_ACCESS): remote write needs local
# write (ibv_reg_mr(3)), so the region without remote write has local write and remote read.
NO_REMOTE_WRITE = "local_write,remote_read"
NO_REMOTE_READ = "local_write,remote_write"
ALL_RIGHTS = "local_write,remote_write,remote_read"
# The peer's own sink for a READ Response: no region of the peer is real, any STag does.
PEER_SINK_STAG = 0x00BEEF00


def _send(**fields: Any) -> dict[str, Any]:
    return {**SEND_HIL, **fields}


def _region(access: str) -> dict[str, Any]:
    """The DUT registers a page with ``access`` and shares its STag, base and length."""
    return {"step": "dut", "action": "reg_mr", "args": {"length": 4096, "access": access}}


def _write(stag: str, to: str) -> dict[str, Any]:
    """A WRITE of 3 bytes (a zero-length one siw takes without looking at its STag,
    builtin.py's write-invalid-stag) to the DUT's region: ``stag`` and ``to`` name it."""
    return {
        "step": "send",
        "frame": "fpdu",
        "opcode": "write",
        "stag": {"dut": stag},
        "to": {"dut": to},
        "payload": HIL,
    }


def _connected_ird_1() -> list[dict[str, Any]]:
    """Connected with IRD and ORD 1 both ways (RFC 6581 5.1): the DUT takes one READ."""
    request = {"step": "send", "frame": "mpa_request", "rev": 2, "c": 1, "ird": 1, "ord": 1}
    accept = {"step": "dut", "action": "accept", "args": {"ird": 1, "ord": 1}}
    return [*LISTEN, request, accept, REPLY]


def _reads(count: int) -> list[dict[str, Any]]:
    """``count`` zero-length READ Requests in one TCP segment: zero-length, so no DUT
    looks up a source STag (the peer knows none) before it counts them."""
    read = {"step": "send", "frame": "fpdu", "opcode": "read_request", "size": 0}
    return [{**read, "coalesce_with_next": True}] * (count - 1) + [read]


_BUILT_IN: list[dict[str, Any]] = [
    {
        "name": "send-invalid-qn",
        "role": "active",
        "expectation": "invalid_qn",
        "description": f"a SEND on DDP queue {INVALID_QN} (RDMAP's are 0..2, RFC 5040 5.1)",
        "steps": [*CONNECTED, _send(qn=INVALID_QN), *TERMINATED],
    },
    {
        "name": "send-msn-too-high",
        "role": "active",
        "expectation": "invalid_msn",
        "description": f"the first SEND with MSN {MSN_TOO_HIGH}, not 1 (RFC 5041 4.3)",
        "steps": [*CONNECTED, _send(msn=MSN_TOO_HIGH), *TERMINATED],
    },
    {
        "name": "send-msn-reused",
        "role": "active",
        "expectation": "invalid_msn",
        "description": "a SEND delivered, then a second one with its MSN (1) again",
        "steps": [*CONNECTED, SEND_HIL, RECV_HIL, _send(msn=1), *TERMINATED],
    },
    {
        "name": "send-too-long",
        "role": "active",
        "expectation": "message_too_long",
        "description": f"a SEND of {RECV_BYTES + 1} bytes in two DDP segments, the DUT's "
        f"receives {RECV_BYTES}",
        "steps": [
            *CONNECTED,
            _send(l=0, mo=0, payload="00" * FIRST_SEGMENT, coalesce_with_next=True),
            _send(l=1, mo=FIRST_SEGMENT, payload="00" * (RECV_BYTES + 1 - FIRST_SEGMENT)),
            *TERMINATED,
        ],
    },
    {
        "name": "fpdu-invalid-opcode",
        "role": "active",
        "expectation": "invalid_opcode",
        "description": f"an untagged FPDU with RDMAP opcode {INVALID_OPCODE} (RFC 5040 4.3: 0..7)",
        "steps": [*CONNECTED, _send(opcode=INVALID_OPCODE), *TERMINATED],
    },
    {
        "name": "read-beyond-ird",
        "role": "active",
        "expectation": "read_beyond_ird",
        "description": f"{READS} READ Requests at once on a connection of IRD 1 (RFC 6581 3)",
        # No expect step: the DUT may answer a READ or two before its TERMINATE, how many
        # depends on its timing; the peer's record holds them all, and the verdict looks
        # for the first TERMINATE and the close in it (hil/peer/judge.py).
        "steps": [*_connected_ird_1(), *_reads(READS), {"step": "sleep", "seconds": REACT_S}],
    },
    {
        "name": "write-past-region-end",
        "role": "active",
        "expectation": "base_bounds",
        "description": "a WRITE of 3 bytes whose last byte is one past the DUT's region",
        "steps": [*CONNECTED, _region(ALL_RIGHTS), _write("stag", "base+len-2"), *TERMINATED],
    },
    {
        "name": "write-stag-next-to-valid",
        "role": "active",
        "expectation": "invalid_stag",
        "description": "a WRITE to the DUT's region's STag plus 1: its index, another key "
        "(the low 8 bits, ibv_inc_rkey(3); siw_mem.c:120 makes them 0, Linux 6.1.192)",
        "steps": [*CONNECTED, _region(ALL_RIGHTS), _write("stag+1", "base"), *TERMINATED],
    },
    {
        "name": "write-no-remote-write",
        "role": "active",
        "expectation": "access_rights",
        "description": "a WRITE to a DUT region registered without remote write",
        "steps": [*CONNECTED, _region(NO_REMOTE_WRITE), _write("stag", "base"), *TERMINATED],
    },
    {
        "name": "read-no-remote-read",
        "role": "active",
        "expectation": "read_access_rights",
        "description": "a READ Request of 3 bytes from a DUT region registered without remote read",
        # No expect step: a DUT that does not check the right answers with a READ Response
        # (siw 6.1, hil/judge/peerproviders.py); the verdict reads the record.
        "steps": [
            *CONNECTED,
            _region(NO_REMOTE_READ),
            {
                "step": "send",
                "frame": "fpdu",
                "opcode": "read_request",
                "sink_stag": PEER_SINK_STAG,
                "size": 3,
                "source_stag": {"dut": "stag"},
                "source_to": {"dut": "base"},
            },
            {"step": "sleep", "seconds": REACT_S},
        ],
    },
    {
        "name": "peer-terminate",
        "role": "active",
        "expectation": "peer_terminate",
        "description": "the peer sends a TERMINATE (RDMAP, Remote Operation, Unspecified)",
        "steps": [
            *CONNECTED,
            _TERMINATE_FROM_PEER,
            # RFC 5040 7.4: no TERMINATE answers one; the next thing seen is the close.
            {"step": "expect", "frame": "close", "within": PROMPT_S},
            # And the DUT's QP is in ERROR: its posted receives complete flushed.
            {"step": "dut", "action": "recv", "args": {"status": WR_FLUSH_ERR}},
        ],
    },
    {
        "name": "fpdus-one-segment",
        "role": "active",
        "expectation": "fpdus_one_segment",
        "description": "three SENDs in one TCP segment, each delivered intact",
        "steps": [
            *CONNECTED,
            *(_send(payload=p, coalesce_with_next=True) for p in SEGMENT_SENDS[:-1]),
            _send(payload=SEGMENT_SENDS[-1]),
            *({**RECV_HIL, "args": {"payload": p}} for p in SEGMENT_SENDS),
        ],
    },
]

for _data in _BUILT_IN:
    SCENARIOS.register(parse(_data, f"built-in scenario {_data['name']!r}"))

ONE_FAMILY = frozenset(str(d["name"]) for d in _BUILT_IN)
