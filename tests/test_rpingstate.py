"""tests/rpingstate.py: the siw lost-wakeup mark, read from what the guests held in the
failures of 2026-12-06 and 2026-12-07 (fresh-clone ci/tests, Linux 6.1.192 guests)."""

from __future__ import annotations

from rpingstate import lost_wakeup

# 2026-12-07 10:55 UTC (fresh clone of 48aed9e): the client killed at its bound, its
# socket in TIME-WAIT; the server's accepted id still in CONNECT.
HUNG = "\n".join(
    [
        "--- labbfcb-0: ss -tnoei state all ( sport = :7174 or dport = :7174 )",
        "State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess",
        "LISTEN 0      3         198.18.0.1:7174      0.0.0.0:*    ino:2935 sk:2 <->",
        "--- labbfcb-0: rdma resource show cm_id",
        "link siw_data0/1 cm-idn 2 state LISTEN ps TCP pid 2101 comm rping "
        "src-addr 198.18.0.1:7174 dst-addr 0.0.0.0:0 ",
        "link siw_data0/1 cm-idn 3 lqpn 1 qp-type RC state CONNECT ps TCP pid 2101 comm rping "
        "src-addr 198.18.0.1:7174 dst-addr 198.18.0.2:47253 ",
        "--- labbfcb-0: dmesg --ctime",
        "[Mon Dec  7 10:54:30 2026] data0 speed is unknown, defaulting to 1000",
        "--- labbfcb-1: ss -tnoei state all ( sport = :7174 or dport = :7174 )",
        "TIME-WAIT 0      0         198.18.0.2:47253   198.18.0.1:7174 "
        "timer:(timewait,56sec,0) ino:0 sk:1",
        "--- labbfcb-1: rdma resource show cm_id",
        "--- labbfcb-1: dmesg --ctime",
    ]
)


def test_the_servers_accepted_id_stuck_in_connect_is_the_finding() -> None:
    found = lost_wakeup(HUNG, "labbfcb-0", "198.18.0.1", "7174")
    assert found is not None and "cm-idn 3" in found and "198.18.0.2:47253" in found


def test_a_listener_alone_an_established_id_or_another_host_is_not() -> None:
    listening = HUNG.replace("state CONNECT", "state ESTABLISHED")
    assert lost_wakeup(listening, "labbfcb-0", "198.18.0.1", "7174") is None
    assert lost_wakeup(HUNG, "labbfcb-1", "198.18.0.1", "7174") is None
    assert lost_wakeup(HUNG, "labbfcb-0", "198.18.0.1", "7175") is None
    assert lost_wakeup("", "labbfcb-0", "198.18.0.1", "7174") is None
