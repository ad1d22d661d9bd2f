"""Private data at its length boundaries (issue 25 item 3): rdma_connect, rdma_accept and
rdma_reject each given 0, 1 and the largest number of bytes the acting host's profile
says it delivers, delivered exactly; one byte more refused by the call (a provider whose
call takes more than it delivers is skipped there, its bug named, and tried one byte
past what the call takes instead).

One connection per test, in one direction (a-b): the limits are each host's own and
both lab hosts run the same kernel.  The contract judges the delivery
(``connect-pdata-delivered``, ``accept-pdata-delivered``, ``reject-status``) and the
refusal (``pdata-over-limit-refused``); the wire rules compare the MPA request, reply
and reject with what the call gave (``mpa-request-carries-connect-pdata``,
``mpa-reply-carries-accept-pdata``, ``reject-on-the-wire``).  Each test states its own
outcome too.  The limits and their sources: docs/contract.md "Private data".
"""

from __future__ import annotations

import pytest

from hil.cm import sequences
from hil.cm.sequences.pdata import PDATA_CALLS, pattern
from hil.cm.session import CMSession
from hil.judge.profiles import Profiles
from hil.judge.rule import errno_name
from hil.plugin.api import Contract, explain, seen

# Where each call's private data arrives: (the side that receives it, its event).
RECEIVED = {
    "connect": ("passive", "CONNECT_REQUEST"),
    "accept": ("active", "ESTABLISHED"),
    "reject": ("active", "REJECTED"),
}
# The MPA revisions asked for; v1 only where the provider can be set to it.
V1_SKIP = (
    "siw speaks MPA v2 only here: its revision is the global mpa_version "
    "(siw_main.c:54, Linux 6.1.192), not a module parameter, so only a rebuilt kernel "
    "could change it; iw_cxgb4's mpa_rev (cm.c:116-117, writable) is not driven yet"
)


@pytest.mark.parametrize("direction", ["a-b"])
@pytest.mark.parametrize("mpa", ["v2", pytest.param("v1", marks=pytest.mark.skip(V1_SKIP))])
@pytest.mark.parametrize("boundary", ["0", "1", "max", "max+1", "taken+1"])
@pytest.mark.parametrize("call", PDATA_CALLS)
def test_private_data_at_its_length_boundary(
    cm: CMSession, contract: Contract, profile: Profiles, call: str, boundary: str, mpa: str
) -> None:
    """``call`` with 0, 1, the largest private data it delivers, one byte more, and one
    byte more than the call itself takes (where that differs: a provider bug)."""
    caller = cm.active if call == "connect" else cm.passive
    limits = profile.of(cm.host(caller)).private_data
    limit, taken = limits.of(call), limits.taken_by(call)
    if boundary == "max+1" and taken > limit:
        pytest.skip(f"known provider bug: {call} takes {limit + 1} bytes: {limits.broken}")
    if boundary == "taken+1" and taken == limit:
        pytest.skip(f"{call} takes what it delivers: the same length as max+1")
    length = {"0": 0, "1": 1, "max": limit, "max+1": limit + 1, "taken+1": taken + 1}[boundary]
    tl = cm.run(sequences.private_data, call=call, length=length)
    contract(tl)
    acts = [a for a in tl.actions if a.name == call and a.side == caller]
    assert len(acts) == 1, explain(tl, f"expected one {call}")
    side, event = RECEIVED[call]
    got = seen(tl, event, cm.active if side == "active" else cm.passive)
    if length > limit:
        assert errno_name(acts[0].result) == limits.refusal, explain(
            tl, f"{call} with {length} bytes (limit {limit}) should fail {limits.refusal}"
        )
        # A refused reject is followed by the request's destroy, which rejects with none.
        delivered = [e for e in got if e.private_data] if call == "reject" else got
        assert not delivered, explain(tl, f"a refused {call} still produced {event}")
        assert not seen(tl, "ESTABLISHED"), explain(tl, f"a refused {call} was ESTABLISHED")
        return
    assert acts[0].ok, explain(tl, f"{call} with {length} bytes failed: {acts[0].result}")
    assert len(got) == 1, explain(tl, f"expected one {event} on the {side} side")
    assert got[0].private_bytes == pattern(length), explain(
        tl, f"{event} carries {len(got[0].private_bytes)} bytes, not the {length} {call} gave"
    )
