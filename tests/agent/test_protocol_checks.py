"""Checking and decoding a message against its declaration
(hil/agent/protocol/checks.py, through the methods' and ops' specs)."""

from __future__ import annotations

from typing import Any

import pytest

from hil.agent import protocol

LINK = {
    "name": "eth1",
    "index": 2,
    "mtu": 9000,
    "operstate": "UP",
    "carrier": True,
    "up": True,
    "mac": None,
    "kind": None,
}


def test_a_reply_decodes_to_itself_once_checked() -> None:
    assert protocol.LINK.decode(LINK) is LINK
    assert protocol.KMSG_CURSOR.decode(3) == 3 and protocol.ADD_ADDRESS.decode(None) is None
    assert protocol.RDMA_RESOURCES.decode({"qp": 2}) == {"qp": 2}


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        (protocol.LINK, {**LINK, "mtu": "9000"}, "link reply.mtu: expected int, got '9000'"),
        (protocol.LINK, {**LINK, "carrier": 1}, "link reply.carrier: expected bool, got 1"),
        (
            protocol.LINK,
            {k: v for k, v in LINK.items() if k != "up"},
            "link reply: LinkReply lacks up",
        ),
        (protocol.LINKS, [LINK, 7], r"links reply\[1\]: expected LinkReply, got 7"),
        (protocol.KMSG_CURSOR, True, "kmsg_cursor reply: expected int, got True"),
        (
            protocol.OP_EVENTS,
            {
                "t_us": 1,
                "log": [
                    {
                        "kind": "event",
                        "seq": 1,
                        "type": "EST",
                        "status": 0,
                        "id": 1,
                        "listen_id": None,
                        "private_data": "",
                        "host_t_us": 5,
                    }
                ],
            },
            r"events reply.log\[0\]: expected Union\[CMEventEntry",
        ),
    ],
)
def test_a_mismatch_names_where_and_what(
    spec: protocol.Spec[Any, Any], value: object, message: str
) -> None:
    with pytest.raises(protocol.ProtocolMismatch, match=message):
        spec.decode(value)


def test_undeclared_keys_are_ignored_unless_strict() -> None:
    newer = {**LINK, "qdisc": "fq"}
    assert protocol.LINK.decode(newer) is newer
    with pytest.raises(protocol.ProtocolMismatch, match="link reply: LinkReply has no qdisc"):
        protocol.LINK.decode(newer, strict=True)


def test_params_are_checked_by_name_and_type() -> None:
    protocol.SET_LINK.check_params({"netdev": "eth1", "mtu": None})
    with pytest.raises(protocol.ProtocolMismatch, match="SetLinkParams has no mtuu"):
        protocol.SET_LINK.check_params({"netdev": "eth1", "mtuu": 1500})
    with pytest.raises(protocol.ProtocolMismatch, match="SetLinkParams lacks netdev"):
        protocol.SET_LINK.check_params({"up": True})
    with pytest.raises(protocol.ProtocolMismatch, match=r"set_link params.up: expected bool"):
        protocol.SET_LINK.check_params({"netdev": "eth1", "up": "yes"})
