"""The real virtual lab: two QEMU guests with siw, reached like lab hosts.

Boots once per session (see conftest); tests/lab/test_lab_down.py takes it down last.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rpingstate import FINDING, lost_wakeup, rping_state
from vlab import VirtualLab, hil_lab

from hil.errors import CommandTimeout, HostKeyError
from hil.lab import network, qmp
from hil.ssh import Result, SSHPool, SSHSession

# The session's first lab test may build the kernel (~15 min on 2 cores).
pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def pool(virtual_lab: VirtualLab) -> Iterator[SSHPool]:
    with SSHPool(virtual_lab.inventory, ssh_config=None) as p:
        yield p


def test_both_guests_answer_over_hil_ssh_with_verified_host_keys(
    virtual_lab: VirtualLab, pool: SSHPool
) -> None:
    names = [g.name for g in virtual_lab.state.guests]
    lab = network.lab_id(virtual_lab.dir)
    assert names == [f"{lab}-0", f"{lab}-1"] and sorted(virtual_lab.inventory.hosts) == names
    for name in names:
        assert virtual_lab.inventory.hosts[name].ssh.host_key_policy == "strict"
        out = pool.get(name).run(["hostname"], timeout=30)
        assert out.stdout.strip() == name
        # The listener forks each connection without executing itself again
        # (guest_boot.sh: sshd -r, which OpenSSH 9.2, the host's, takes).
        listener = pool.get(name).run(["pgrep", "-a", "-o", "-x", "sshd"], timeout=30)
        # Its title, as sshd sets it: "sshd: /usr/sbin/sshd -D -e -r -f ... [listener] ...".
        assert "/usr/sbin/sshd -D -e -r -f /run/hil/sshd_config" in listener.stdout, listener


def test_a_wrong_host_key_is_refused(virtual_lab: VirtualLab, tmp_path: Path) -> None:
    host, other = virtual_lab.pair.host_a, virtual_lab.pair.host_b
    other_port = other.ssh.port
    wrong = tmp_path / "known_hosts"
    # The other guest's key recorded for this one's address: the check must fail, not pass.
    lines = Path(host.ssh.known_hosts or "").read_text().splitlines()
    key = next(ln.split(" ", 1)[1] for ln in lines if ln.startswith(f"[127.0.0.1]:{other_port} "))
    wrong.write_text(f"[127.0.0.1]:{host.ssh.port} {key}\n")
    bad = replace(host, ssh=replace(host.ssh, known_hosts=str(wrong)))
    with pytest.raises(HostKeyError):
        SSHSession.connect(bad, timeout=20, ssh_config=None).close()


def rdma_links(session: SSHSession) -> list[dict[str, object]]:
    links: list[dict[str, object]] = json.loads(
        session.run(["rdma", "-j", "link", "show"], timeout=30).stdout
    )
    return links


def test_each_guest_has_an_active_siw_device_on_its_data_nic(
    virtual_lab: VirtualLab, pool: SSHPool
) -> None:
    for name, host in virtual_lab.inventory.hosts.items():
        (rnic,) = host.rnics
        links = {(ln["ifname"], ln.get("netdev")): ln for ln in rdma_links(pool.get(name))}
        link = links[(rnic.rdma_device, rnic.netdev)]
        assert link["state"] == "ACTIVE", link


def test_guests_have_the_sysctls_the_inventory_records(
    virtual_lab: VirtualLab, pool: SSHPool
) -> None:
    for name, host in virtual_lab.inventory.hosts.items():
        for key, value in host.sysctls:
            path = "/proc/sys/" + key.replace(".", "/")
            assert pool.get(name).run(["cat", path], timeout=30).stdout.strip() == value


def test_rping_between_the_guests_over_their_cable(virtual_lab: VirtualLab, pool: SSHPool) -> None:
    pair = virtual_lab.pair
    assert pair.rnic_a.address is not None
    addr, port = str(pair.rnic_a.address.ip), "7174"
    server, client = pool.get(pair.host_a.name), pool.get(pair.host_b.name)
    served: list[Result] = []
    thread = threading.Thread(
        target=lambda: served.append(
            server.run(
                ["rping", "-s", "-a", addr, "-p", port, "-C", "3", "-v"], timeout=90, check=False
            )
        )
    )
    thread.start()
    try:
        # rping -c hangs after a refused connect: start it only once the server listens.
        deadline = time.monotonic() + 30
        while f"{addr}:{port}" not in server.run(["ss", "-Htln"], timeout=30).stdout:
            assert time.monotonic() < deadline, "rping server did not listen within 30 s"
            time.sleep(0.5)
        try:
            out = client.run(
                ["rping", "-c", "-a", addr, "-p", port, "-C", "3", "-v"], timeout=60, check=False
            )
        except CommandTimeout as e:
            # Both ends hung (fresh-clone ci/tests, twice on 2026-12-06, once on 12-07):
            # with the server's accepted id still in CONNECT that is the lab kernel's
            # known lost wakeup of siw's RTR (docs/findings/siw-rtr-lost-wakeup.md), an
            # expected failure; any other hang fails with what both ends held.
            found = lost_wakeup(server, server.name, int(port))
            state = rping_state([server, client], port)
            if found:
                pytest.xfail(f"known finding {FINDING} of siw (Linux 6.1.192): {found}; {e}")
            pytest.fail(f"{e}\n{state}")
        assert out.status == 0, f"{out.stderr}\n{rping_state([server, client], port)}"
        assert out.stdout.count("ping data: rdma-ping-") == 3
    finally:
        thread.join(120)
    assert served and served[0].status == 0, served


def carrier(session: SSHSession, netdev: str) -> bool:
    (link,) = json.loads(
        session.run(["ip", "-j", "link", "show", "dev", netdev], timeout=30).stdout
    )
    return "NO-CARRIER" not in link["flags"] and "LOWER_UP" in link["flags"]


def wait_carrier(session: SSHSession, netdev: str, want: bool, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while carrier(session, netdev) != want:
        assert time.monotonic() < deadline, f"{netdev} carrier did not become {want}"
        time.sleep(0.5)


def test_a_qmp_carrier_pull_shows_no_carrier_and_restore_brings_it_back(
    virtual_lab: VirtualLab, pool: SSHPool
) -> None:
    pull = virtual_lab.pair.link.pull("carrier")
    assert pull.end is not None and pull.qmp and pull.qmp_netdev
    session = pool.get(pull.end.host)
    netdev = virtual_lab.inventory.hosts[pull.end.host].rnic(pull.end.port).netdev
    assert carrier(session, netdev)
    qmp.set_link(pull.qmp, pull.qmp_netdev, up=False, timeout=10)
    try:
        wait_carrier(session, netdev, want=False)
    finally:
        qmp.set_link(pull.qmp, pull.qmp_netdev, up=True, timeout=10)
    wait_carrier(session, netdev, want=True)


def test_status_reports_a_healthy_lab_and_up_reuses_it(virtual_lab: VirtualLab) -> None:
    out = hil_lab("status", "--dir", str(virtual_lab.dir), "--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["healthy"] is True
    assert status["lab_id"] == network.lab_id(virtual_lab.dir)
    out = hil_lab("status", "--dir", str(virtual_lab.dir))
    assert out.stdout.startswith(f"lab {status['lab_id']} in {virtual_lab.dir}: 2 guests"), (
        out.stdout
    )
    assert [g["pid"] for g in status["guests"]] == [g.pid for g in virtual_lab.state.guests]
    out = hil_lab("up", "--dir", str(virtual_lab.dir))
    assert out.returncode == 0, out.stderr
    assert "already up" in out.stderr
    assert out.stdout.strip() == str(virtual_lab.dir / "inventory.yaml")
