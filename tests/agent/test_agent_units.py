"""Pure parts of the agent, without a process: record parsing, sysctl names."""

from __future__ import annotations

import pytest

from hil.agent.remote import kmsg, system
from hil.agent.remote.errors import OpError


def test_kmsg_record_parses_priority_facility_seq_time_and_drops_key_lines() -> None:
    rec = kmsg.parse(b"14,1234,5678901,-;hello world\n SUBSYSTEM=net\n DEVICE=n2\n")
    assert rec == {
        "seq": 1234,
        "usec": 5678901,
        "priority": 6,
        "facility": 1,
        "message": "hello world",
    }


def test_kmsg_record_keeps_semicolons_in_the_message() -> None:
    assert kmsg.parse(b"3,1,2,c;a;b\n")["message"] == "a;b"


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward"),
        ("net/ipv4/conf/eth0.100/rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"),
    ],
)
def test_sysctl_path(name: str, path: str) -> None:
    assert system.sysctl_path(name) == path


@pytest.mark.parametrize("name", ["", "/etc/passwd", "net/../../etc", "net.ipv4 x", "net/.hidden"])
def test_sysctl_path_refuses_what_is_not_a_sysctl(name: str) -> None:
    with pytest.raises(OpError, match="not a sysctl name"):
        system.sysctl_path(name)
