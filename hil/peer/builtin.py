"""The built-in peer scenarios, written as data and checked by the same loader as a file.

Each names the class of the DUT's expected reaction (``expectation``: a
``hil.judge.peerexpect.Scenario`` value); what that class expects of the RFCs
and of each provider, with its sources, is hil/judge/peerexpect.py's and
hil/judge/peerproviders.py's.  The ``within`` bounds here only end a wait: the
expectation class judges the reaction's timing from the peer's record.
``SCENARIOS`` is the registry the fuzzer and the suites look names up in; a
lab's own scenarios register there too (``SCENARIOS.register(load(path))``).
"""

from __future__ import annotations

from typing import Any

from hil.peer.builtin_mpa import MATRIX
from hil.peer.builtin_regressions import regressions
from hil.peer.scenario import Scenario, parse
from hil.peer.vocab import REPLY_KEY
from hil.registry import Registry

SCENARIOS = Registry[Scenario]("peer scenario", name_of=lambda s: s.name)

# Lab policy: what the DUT owes at once (a reply to an accept, a close or TERMINATE
# for a bad frame) comes within 5 s on any lab host.
PROMPT_S = 5.0
# Past every DUT's MPA timeout: siw's 5 s passive (siw_cm.c MPAREQ_TIMEOUT, docs/contract.md
# "MPA timeouts"), iw_cxgb4's ep_timeout_secs (60 s by default, cm.c) plus a margin.
MPA_TIMEOUT_WAIT_S = 65.0
HIL = b"hil".hex()
# A STag no DUT advertised in these scenarios: no reg_mr step precedes its use.
UNADVERTISED_STAG = 0x00DEAD00

LISTEN: list[dict[str, Any]] = [
    {"step": "dut", "action": "listen"},
    {"step": "dut", "action": "post_recv", "args": {"length": 64}},
]
REPLY = {"step": "expect", "frame": "mpa_reply", "within": PROMPT_S, "fields": {"rev": 2}}
# The peer connects to the DUT's listener with an MPA v2 request (CRC asked for).
CONNECTED: list[dict[str, Any]] = [
    *LISTEN,
    {"step": "send", "frame": "mpa_request", "rev": 2, "c": 1},
    {"step": "dut", "action": "accept"},
    REPLY,
]
# The DUT, a receive posted, connects to the peer's listener and sends its MPA request.
DUT_CONNECTS: list[dict[str, Any]] = [
    {"step": "dut", "action": "post_recv", "args": {"length": 64}},
    {"step": "dut", "action": "connect"},
    {"step": "expect", "frame": "mpa_request", "within": PROMPT_S},
]
TERMINATED: list[dict[str, Any]] = [
    {"step": "expect", "frame": "fpdu", "within": PROMPT_S, "fields": {"opcode": "terminate"}},
    {"step": "expect", "frame": "close", "within": PROMPT_S},
]
_CLOSED = {"step": "expect", "frame": "close", "within": PROMPT_S}
SEND_HIL = {"step": "send", "frame": "fpdu", "opcode": "send", "payload": HIL}
RECV_HIL = {"step": "dut", "action": "recv", "args": {"payload": HIL}}

_BUILT_IN: list[dict[str, Any]] = [
    {
        "name": "v2-connect-send",
        "role": "active",
        "expectation": "mpa_rev2",
        "description": "MPA v2 connect to the DUT's listener, one SEND delivered",
        "steps": [*CONNECTED, SEND_HIL, RECV_HIL],
    },
    {
        "name": "mpa-bad-key",
        "role": "active",
        "expectation": "wrong_key",
        "description": "an MPA request carrying the reply's key",
        "steps": [*LISTEN, {"step": "send", "frame": "mpa_request", "key": REPLY_KEY}, _CLOSED],
    },
    {
        "name": "mpa-unknown-revision",
        "role": "active",
        "expectation": "unknown_revision",
        "description": "an MPA request of revision 3 (RFC 5044 knows 1, RFC 6581 2)",
        "steps": [*LISTEN, {"step": "send", "frame": "mpa_request", "rev": 3}, _CLOSED],
    },
    {
        "name": "mpa-pd-too-long",
        "role": "active",
        "expectation": "pd_length_over_rfc_limit",
        "description": "an MPA request with 513 bytes of private data (RFC 5044 7.1: 512 at most)",
        "steps": [
            *LISTEN,
            {"step": "send", "frame": "mpa_request", "pd_length": 513, "private_data": "00" * 513},
            _CLOSED,
        ],
    },
    {
        "name": "mpa-reply-pd-too-long",
        "role": "passive",
        "expectation": "pd_length_reply_over_rfc_limit",
        "description": (
            "the DUT connects; the peer's MPA v2 Reply says PD_Length 513 (RFC 5044 7.1: "
            "512 at most), its private data never sent"
        ),
        "steps": [
            {"step": "dut", "action": "connect"},
            {"step": "expect", "frame": "mpa_request", "within": PROMPT_S},
            {"step": "send", "frame": "mpa_reply", "rev": 2, "pd_length": 513},
            _CLOSED,
        ],
    },
    {
        "name": "mpa-reply-cut-by-close",
        "role": "passive",
        "expectation": "reply_cut_by_close",
        "description": (
            "the DUT connects; the peer's MPA v2 Reply says PD_Length 200 but carries its "
            "IRD/ORD words and 8 bytes, then the peer closes: the connect fails, and the "
            "DUT's application must get no private data the peer did not send"
        ),
        "steps": [
            {"step": "dut", "action": "connect"},
            {"step": "expect", "frame": "mpa_request", "within": PROMPT_S},
            {
                "step": "send",
                "frame": "mpa_reply",
                "rev": 2,
                "pd_length": 200,
                "private_data": "41" * 8,
            },
            {"step": "send", "frame": "fin"},
            _CLOSED,
        ],
    },
    {
        "name": "mpa-incomplete-request",
        "role": "active",
        "expectation": "incomplete_request",
        "description": "10 bytes of an MPA request, never the rest: the DUT's MPA timeout ends it",
        "steps": [
            *LISTEN,
            {"step": "send", "frame": "mpa_request", "truncate": 10},
            {"step": "expect", "frame": "close", "within": MPA_TIMEOUT_WAIT_S},
        ],
    },
    {
        "name": "send-bad-crc",
        "role": "active",
        "expectation": "bad_crc",
        "description": "a SEND whose MPA CRC is wrong, CRC negotiated",
        "steps": [*CONNECTED, {**SEND_HIL, "crc": "bad"}, *TERMINATED],
    },
    {
        "name": "write-invalid-stag",
        "role": "active",
        "expectation": "invalid_stag",
        "description": "an RDMA WRITE to a STag the DUT never advertised",
        "steps": [
            *CONNECTED,
            # With data: siw takes a zero-length WRITE without looking its STag up
            # (siw_qp_rx.c siw_proc_write, 6.1; seen on the lab: no TERMINATE came).
            {
                "step": "send",
                "frame": "fpdu",
                "opcode": "write",
                "stag": UNADVERTISED_STAG,
                "payload": HIL,
            },
            *TERMINATED,
        ],
    },
    {
        "name": "reply-with-first-fpdu",
        "role": "passive",
        "expectation": "reply_and_fpdu_one_segment",
        "description": "the DUT connects; the MPA reply and a SEND reach it in one segment",
        "steps": [
            *DUT_CONNECTS,
            {"step": "send", "frame": "mpa_reply", "rev": 2, "coalesce_with_next": True},
            SEND_HIL,
            RECV_HIL,
        ],
    },
    {
        "name": "request-one-byte-segments",
        "role": "active",
        "expectation": "one_byte_segments",
        "description": "an MPA v2 request written 1 byte at a time (RFC 5044 Appendix A)",
        "steps": [
            *LISTEN,
            # 20 header bytes and the 4 bytes of the v2 IRD/ORD words (RFC 6581 5.1).
            {"step": "send", "frame": "mpa_request", "rev": 2, "segments": [1] * 24},
            {"step": "dut", "action": "accept"},
            REPLY,
            SEND_HIL,
            RECV_HIL,
        ],
    },
]

_REGRESSIONS = regressions(CONNECTED, TERMINATED, HIL)
for _data in [*_BUILT_IN, *MATRIX, *_REGRESSIONS]:
    SCENARIOS.register(parse(_data, f"built-in scenario {_data['name']!r}"))

# The scenarios whose suite test runs on IPv4 alone: the address family plays no part in
# what they test, and ci/suites stays cheap (budget, session 16).
IPV4_ONLY = frozenset(d["name"] for d in MATRIX)
