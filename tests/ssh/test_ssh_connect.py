"""Connection failures, each with its own error and within its timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab
from sshtest import make_key, with_ssh

from hil.errors import EXIT_INFRA, AuthenticationFailed, SSHError, Unreachable
from hil.inventory.model import Host, Inventory
from hil.ssh import SSHSession


@pytest.fixture
def ns0(lab_inventory: Inventory) -> Host:
    return lab_inventory.hosts["ns0"]


def connect(host: Host, timeout: float | None = None) -> None:
    SSHSession.connect(host, ssh_config=None, timeout=timeout).close()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_wrong_key_is_refused_naming_user_and_key(ns0: Host, tmp_path: Path) -> None:
    key = make_key(tmp_path / "stranger")
    with pytest.raises(AuthenticationFailed) as info:
        connect(with_ssh(ns0, identity_file=str(key)))
    assert str(info.value) == (
        f"ns0: root@{ns0.ssh.host}:22 refused the key(s) {key}; install the public key "
        f"({key}.pub) in ~root/.ssh/authorized_keys on the host, or set ssh.identity_file"
    )
    assert info.value.exit_code == EXIT_INFRA


def test_a_wrong_user_is_refused(ns0: Host) -> None:
    with pytest.raises(AuthenticationFailed, match="nobody@"):
        connect(with_ssh(ns0, user="nobody"))


def test_a_missing_identity_file_is_named(ns0: Host, tmp_path: Path) -> None:
    with pytest.raises(AuthenticationFailed, match=f"cannot load identity file {tmp_path}/nope"):
        connect(with_ssh(ns0, identity_file=str(tmp_path / "nope")))


def test_a_closed_port_is_unreachable_refused(ns0: Host) -> None:
    port = closed_port()
    with pytest.raises(Unreachable) as info:
        connect(with_ssh(ns0, host="127.0.0.1", port=port))
    assert str(info.value) == (
        f"ns0: cannot connect to 127.0.0.1:{port}: connection refused; "
        f"check the host is up and ssh.host/ssh.port in the inventory"
    )


def test_a_failing_dns_lookup_is_unreachable(ns0: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    # Faked: a real lookup would query a DNS server outside the test network.
    def no_such_name(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    with pytest.raises(Unreachable, match="DNS lookup of lab-host.example failed"):
        connect(with_ssh(ns0, host="lab-host.example"))


def test_a_hanging_dns_lookup_is_cut_at_the_connect_timeout(
    ns0: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def hanging(*args: object, **kwargs: object) -> None:
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    try:
        with pytest.raises(Unreachable, match="DNS lookup of lab-host.example took more than 0.3s"):
            connect(with_ssh(ns0, host="lab-host.example"), timeout=0.3)
    finally:
        release.set()


@pytest.fixture
def silent_lab() -> Iterator[NetnsLab]:
    """A one-host lab whose answers to the test process are dropped (blackhole route)."""
    with NetnsLab(hosts=1) as lab:
        root_side = next(lab.hosts[0].mgmt_address.network.hosts())
        lab.exec(0, ["ip", "route", "add", "blackhole", f"{root_side}/32"])
        yield lab


def test_a_host_that_drops_packets_times_out_within_connect_timeout(
    silent_lab: NetnsLab,
) -> None:
    host = silent_lab.inventory().hosts["ns0"]
    started = time.monotonic()
    with pytest.raises(Unreachable) as info:
        connect(with_ssh(host, connect_timeout=1.5))
    elapsed = time.monotonic() - started
    assert str(info.value) == (
        f"ns0: cannot connect to {host.ssh.host}:22: timed out after 1.5s; "
        f"check the host is up and ssh.host/ssh.port in the inventory"
    )
    assert elapsed < 5, f"Unreachable came {elapsed:.1f}s after a 1.5s connect timeout"


def test_the_timeout_argument_overrides_connect_timeout(silent_lab: NetnsLab) -> None:
    host = silent_lab.inventory().hosts["ns0"]
    with pytest.raises(Unreachable, match="timed out after 0.5s"):
        connect(with_ssh(host, connect_timeout=60), timeout=0.5)


def test_a_jump_host_in_the_inventory_needs_a_pool_or_jump_session(ns0: Host) -> None:
    with pytest.raises(SSHError, match="ns0: needs the jump host ns1: connect it through SSHPool"):
        connect(with_ssh(ns0, jump="ns1"))


def test_a_session_dies_with_its_connection(ns0: Host) -> None:
    session = SSHSession.connect(ns0, ssh_config=None)
    assert session.is_alive()
    session.close()
    assert not session.is_alive()
    with pytest.raises(SSHError, match="ns0: cannot open a channel"):
        session.run(["true"])


@pytest.fixture
def banner_less_port() -> Iterator[int]:
    """A loopback port whose server accepts and closes at once, as a booting host's may."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        stop = threading.Event()

        def serve() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        yield int(server.getsockname()[1])
        stop.set()
        thread.join(timeout=5)


def test_a_failed_handshake_logs_no_paramiko_error(
    ns0: Host, banner_less_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO"), pytest.raises(Unreachable, match="SSH handshake failed"):
        connect(with_ssh(ns0, host="127.0.0.1", port=banner_less_port), timeout=5)
    assert not [r for r in caplog.records if r.levelno >= 30], caplog.text
    with caplog.at_level("DEBUG"), pytest.raises(Unreachable):
        connect(with_ssh(ns0, host="127.0.0.1", port=banner_less_port), timeout=5)
    assert "Error reading SSH protocol banner" in caplog.text
