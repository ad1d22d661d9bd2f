"""The wire judge on a real IPv6 connection: the netns lab's data link given IPv6
addresses, both ends captured by the real LinkCapture (tcpdump on each host's data0),
an MPA exchange (mpa_peer.py's frames) between the two namespaces, decoded by the real
tshark, linked to its timeline by the 4-tuple its events carry (``[v6]:port``, as
hil/agent/remote/librdmacm/cmabi.py writes them) and judged by the wire rules.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import make_captures as mc
import mpa_peer
import pytest
from netnslab import NetnsLab
from test_rules_captures import ACCEPT, CONNECT, connected_and_closed, only

from hil.host.hosts import Hosts
from hil.judge.profiles import SIW
from hil.wire.decode import decode
from hil.wire.judge import judge
from hil.wire.link import link
from hil.wire.linkcapture import LinkCapture
from hil.wire.model import Exchange
from hil.wire.plan import capture_plan

# RFC 3849's documentation prefix: only the two namespaces' own link carries it.
ACTIVE, PASSIVE, PORT = "2001:db8:7::1", "2001:db8:7::2", 7174
TIMEOUT_S = 20.0
# Each end, run in its namespace by its own interpreter: the MPA request, the reply, and
# an orderly close that the active side begins (a connect, accept and disconnect).
# Arguments: mpa_peer's folder, the passive address and port, the request and the reply
# (hex), the active address.
PASSIVE_END = """
import socket, sys
sys.path.insert(0, sys.argv[1])
import mpa_peer as m
srv = socket.create_server((sys.argv[2], int(sys.argv[3])), family=socket.AF_INET6)
print("listening", flush=True)
conn, _ = srv.accept()
conn.settimeout(10)
m.recv_exactly(conn, len(bytes.fromhex(sys.argv[4])))
conn.sendall(bytes.fromhex(sys.argv[5]))
assert conn.recv(1) == b""
conn.close()
"""
ACTIVE_END = """
import socket, sys
sys.path.insert(0, sys.argv[1])
import mpa_peer as m
cli = socket.create_connection((sys.argv[2], int(sys.argv[3])), 10, (sys.argv[6], 0))
cli.sendall(bytes.fromhex(sys.argv[4]))
m.recv_exactly(cli, len(bytes.fromhex(sys.argv[5])))
cli.shutdown(socket.SHUT_WR)
assert cli.recv(1) == b""
cli.close()
"""
# As siw sends them: enhanced (MPA v2) frames whose private data begins with the IRD/ORD words.
REQUEST = mc.REQUEST
REPLY = mpa_peer.frame(mpa_peer.KEY_REP, mpa_peer.ENHANCED, 2, mc.IRD_ORD + mc.ACCEPT_PDATA)


@pytest.fixture
def six(netns_lab: NetnsLab) -> Iterator[NetnsLab]:
    """The netns lab's data link with an IPv6 address on each end (no DAD: usable at once)."""
    added = []
    try:
        for n, address in enumerate((ACTIVE, PASSIVE)):
            netdev = netns_lab.hosts[n].port("p0").netdev
            netns_lab.exec(n, ["ip", "-6", "addr", "add", f"{address}/64", "dev", netdev, "nodad"])
            added.append((n, address, netdev))
        yield netns_lab
    finally:
        for n, address, netdev in added:
            netns_lab.exec(n, ["ip", "-6", "addr", "del", f"{address}/64", "dev", netdev])


def _end(lab: NetnsLab, n: int, script: str, *args: str) -> list[str]:
    folder = str(Path(mpa_peer.__file__).parent)
    return ["ip", "netns", "exec", lab.hosts[n].netns, sys.executable, "-c", script, folder, *args]


def _exchange(lab: NetnsLab) -> None:
    """One MPA connection from ACTIVE (ns0) to PASSIVE:PORT (ns1), closed by ACTIVE."""
    pdata = (REQUEST.hex(), REPLY.hex())
    argv = _end(lab, 1, PASSIVE_END, PASSIVE, str(PORT), *pdata)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as passive:
        try:
            assert passive.stdout is not None and passive.stdout.readline() == "listening\n"
            active = _end(lab, 0, ACTIVE_END, PASSIVE, str(PORT), *pdata, ACTIVE)
            subprocess.run(active, timeout=TIMEOUT_S, check=True)
            assert passive.wait(TIMEOUT_S) == 0
        finally:
            passive.kill()


@pytest.fixture
def captured(six: NetnsLab, tmp_path: Path) -> Exchange:
    inventory = six.inventory()
    with Hosts(inventory) as hosts:
        with LinkCapture.start(hosts, capture_plan(inventory.pairs()[0], "siw")) as capture:
            _exchange(six)
            files = capture.stop(tmp_path).files
    assert sorted(files) == ["ns0", "ns1"]
    return decode(files, timeout=60)


def test_an_ipv6_connection_is_decoded_at_both_ends_with_its_4_tuple(captured: Exchange) -> None:
    conn = only(captured)
    assert conn.active[0] == ACTIVE and conn.passive == (PASSIVE, PORT)
    assert conn.name == f"[{ACTIVE}]:{conn.active[1]} > [{PASSIVE}]:{PORT}"
    assert sorted(conn.points) == ["ns0", "ns1"]
    request, reply = conn.mpa("request"), conn.mpa("reply")
    assert request is not None and request.mpa is not None and conn.role(request) == "active"
    assert reply is not None and reply.mpa is not None and conn.role(reply) == "passive"
    assert (request.mpa.private_data, reply.mpa.private_data) == (CONNECT, ACCEPT)
    assert captured.between(PASSIVE, ACTIVE) == (conn,)


def test_an_ipv6_connection_is_linked_by_its_4_tuple_and_passes_the_wire_rules(
    captured: Exchange,
) -> None:
    conn = only(captured)
    closed = connected_and_closed(conn)
    connect = dataclasses.replace(
        closed.actions[0], params={**closed.actions[0].params, "dst": PASSIVE, "port": PORT}
    )
    timeline = dataclasses.replace(closed, actions=(connect, *closed.actions[1:]))
    (linked,) = link([timeline], captured)
    assert (linked.how, linked.wire) == ("4-tuple", conn)
    verdict = judge(captured, [timeline], SIW)
    assert verdict.ok, verdict.to_text()
    assert {r.outcome.status for r in verdict.results} >= {"pass"}


def test_a_broken_ipv6_exchange_fails_its_rule_naming_the_v6_4_tuple(captured: Exchange) -> None:
    conn = only(captured)
    closed = connected_and_closed(conn)
    accept = next(a for a in closed.actions if a.name == "accept")
    other = dataclasses.replace(accept, params={"private_data": b"other".hex()})
    timeline = dataclasses.replace(
        closed, actions=tuple(other if a is accept else a for a in closed.actions)
    )
    results = {r.rule: r.outcome for r in judge(captured, [timeline], SIW).results}
    outcome = results["mpa-reply-carries-accept-pdata"]
    assert outcome.status == "fail"
    (finding,) = outcome.findings
    assert finding.connection == f"[{ACTIVE}]:{conn.active[1]} > [{PASSIVE}]:{PORT}"
    assert finding.packets[0].split(" ", 1)[1].startswith(f"[{PASSIVE}]:{PORT} > [{ACTIVE}]:")
