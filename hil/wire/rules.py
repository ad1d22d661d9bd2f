"""The wire rules: what the packets of a test must show, by name.

Each rule reads the provider's :class:`~hil.judge.profiles.WireExpect`
(``case.expects(host)``: the sending or closing host's), never the driver's
name.  docs/wire.md states each rule and its source.  A lab adds its own with
:func:`register_wire_rule`.
"""

from __future__ import annotations

from hil.registry import Registry
from hil.wire.addr_rules import event_addresses
from hil.wire.cause_rules import every_event_has_cause
from hil.wire.close_rules import abortive_close, access_error, no_listener, orderly_close
from hil.wire.listener_rules import listener_destroy_keeps_accepted
from hil.wire.mpa_rules import (
    ird_ord_words,
    reject_on_wire,
    reply_pdata,
    request_pdata,
    revision_and_flags,
)
from hil.wire.mpadrop_rules import mpa_request_retransmitted
from hil.wire.mss_rules import clamped_mss
from hil.wire.pull_rules import link_pull
from hil.wire.rule import WireRule

WIRE_RULES = Registry[WireRule](
    "wire rule",
    name_of=lambda r: r.name,
    items=(
        WireRule(
            "mpa-request-carries-connect-pdata",
            "The MPA request carries the private data given to rdma_connect, after the MPA v2 "
            "IRD/ORD words (the contract's connect-pdata-delivered checks the peer's "
            "CONNECT_REQUEST).",
            request_pdata,
        ),
        WireRule(
            "mpa-reply-carries-accept-pdata",
            "The MPA reply carries the private data given to rdma_accept (the contract's "
            "accept-pdata-delivered checks the active side's ESTABLISHED).",
            reply_pdata,
        ),
        WireRule(
            "mpa-revision-and-flags",
            "MPA frames have the revision, CRC, marker and enhanced flags the profile says.",
            revision_and_flags,
            needs_timeline=False,
        ),
        WireRule(
            "reject-on-the-wire",
            "A reject is an MPA reply with the reject flag and the rejecting side's private data, "
            "followed by the teardown the profile names.",
            reject_on_wire,
            needs_timeline=False,
        ),
        WireRule(
            "mpa-ird-ord-words",
            "The MPA v2 IRD/ORD words are what the events report: the request's the passive "
            "side's CONNECT_REQUEST mirrored, the reply's the passive side's ESTABLISHED and "
            "the active side's mirrored (the contract's ird-ord-* rules judge the values).",
            ird_ord_words,
        ),
        WireRule(
            "orderly-close-is-fin",
            "rdma_disconnect of an idle connection gives a FIN from each side, no RST, "
            "no TERMINATE.",
            orderly_close,
        ),
        WireRule(
            "abortive-close-on-the-wire",
            "QP to ERR, destroy while connected and SIGKILL of the holder put TERMINATE and/or RST "
            "on the wire as the profile says, never a FIN-only close.",
            abortive_close,
        ),
        WireRule(
            "no-listener-is-rst",
            "A connect with no listener is a SYN answered by RST.",
            no_listener,
        ),
        WireRule(
            "remote-access-error-terminates",
            "An RDMA WRITE outside the peer's region makes the data sink send a TERMINATE with the "
            "DDP layer and the tagged-buffer error type and code.",
            access_error,
        ),
        WireRule(
            "link-pull-on-the-wire",
            "During a carrier pull under traffic the old 4-tuple shows the writer's "
            "retransmissions, then no traffic or an RST (or, when the writer is the pulled host, "
            "nothing of it arrives); the reconnect is a new 4-tuple.",
            link_pull,
            needs_clock=True,
        ),
        WireRule(
            "every-teardown-event-has-a-cause",
            "Each ESTABLISHED, REJECTED and DISCONNECTED has the packet that caused it (MPA reply, "
            "reject, FIN, RST, TERMINATE) on the wire before it, within the clock uncertainty.",
            every_event_has_cause,
            needs_clock=True,
        ),
        WireRule(
            "event-addresses-on-the-wire",
            "Each event's local and remote address are the 4-tuple of the TCP connection that "
            "carried its connection's MPA request and reply, from its end (the contract's "
            "event-addresses-are-the-ids compares them with the id's).",
            event_addresses,
        ),
        WireRule(
            "listener-destroy-keeps-accepted",
            "A listener's destroy puts no FIN, RST or TERMINATE on its accepted connections "
            "before the test itself closes them.",
            listener_destroy_keeps_accepted,
            needs_clock=True,
        ),
        WireRule(
            "segments-within-the-clamped-mss",
            "Through a path that clamps the MSS, the receiver's SYN reaches the sender with the "
            "clamped MSS (its own capture showing a larger one) and the sender's data segments "
            "are no longer than it; otherwise the impairment was not effective.",
            clamped_mss,
        ),
        WireRule(
            "mpa-request-retransmitted",
            "Through a path that drops the first MPA request once, the sender's capture shows "
            "the request twice or more (the original and TCP's retransmission: the same "
            "sequence number and length); otherwise the impairment was not effective.",
            mpa_request_retransmitted,
        ),
    ),
)


def register_wire_rule(rule: WireRule) -> WireRule:
    """Add a lab's own wire rule to those every wire verdict runs; returns it."""
    return WIRE_RULES.register(rule)


def wire_rule_named(name: str) -> WireRule:
    """The registered wire rule of this name."""
    return WIRE_RULES[name]
