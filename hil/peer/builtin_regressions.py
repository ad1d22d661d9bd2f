"""Built-in peer scenarios that replay the wire conditions of known kernel bugs (issue 26 item 6).

Each scenario's ``description`` names the fix it guards.  hil/peer/builtin.py
registers them in ``SCENARIOS`` with the other built-ins (this module is data
only and imports nothing of it: no import ring), so the wire-conformance suite judges
them against the provider's expectation and the fuzzer mutates them;
suites/test_regressions.py runs them as the regression corpus's tests, where
the after-test checks (kernel log, KASAN on the debug lab, leaked resources)
show a kernel without the fix.

The two other bugs item 6 names need no scenario of their own: the built-in
``mpa-bad-key`` and ``mpa-unknown-revision`` send the malformed MPA request at
once after the connect (CVE-2026-74345's condition), and ``reply-with-first-fpdu``
is the 2019 siw/cxgb4 interop report's MPA reply with the first FPDU in one
segment (suites/test_regressions.py cites both).
"""

from __future__ import annotations

from typing import Any

# RFC 5040 4.3 defines opcodes 0..7; 8 is the first one no RNIC knows.
UNKNOWN_OPCODE = 8


def regressions(
    connected: list[dict[str, Any]], terminated: list[dict[str, Any]], payload: str
) -> list[dict[str, Any]]:
    """The regression scenarios as data, built from builtin.py's steps: ``connected``
    (the peer connected to the DUT's listener, MPA v2 with CRC), ``terminated`` (the
    DUT's TERMINATE, then its close) and ``payload`` (hex, any message's bytes)."""
    return [
        {
            "name": "first-fpdu-unknown-opcode",
            "role": "active",
            "expectation": "invalid_opcode",
            "description": (
                "the connection's first FPDU carries RDMAP opcode 8: siw's siw_get_hdr fails "
                "before set_rx_fpdu_context, with qp->rx_fpdu still NULL (CVE-2026-23242, "
                "'RDMA/siw: Fix potential NULL pointer dereference in header processing')"
            ),
            "steps": [
                *connected,
                {"step": "send", "frame": "fpdu", "opcode": UNKNOWN_OPCODE, "payload": payload},
                *terminated,
            ],
        },
    ]
