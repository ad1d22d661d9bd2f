"""Host key checks against the netns lab's sshd: unknown, changed, accept-new, formats."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from netnslab import ALT_SSH_PORT, NetnsLab
from sshtest import make_key, openssh_fingerprint, with_ssh

from hil.errors import HostKeyError
from hil.inventory.model import Host, Inventory
from hil.ssh import SSHSession


@pytest.fixture
def ns0(lab_inventory: Inventory) -> Host:
    return lab_inventory.hosts["ns0"]


def connect(host: Host) -> None:
    SSHSession.connect(host, ssh_config=None).close()


def lab_key_line(lab: NetnsLab) -> tuple[str, str]:
    key_type, blob = lab.host_key(0).with_suffix(".pub").read_text().split()[:2]
    return key_type, blob


def test_unknown_key_is_refused_with_how_to_accept_it(
    netns_lab: NetnsLab, ns0: Host, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    addr = ns0.ssh.host
    with pytest.raises(HostKeyError) as info:
        connect(with_ssh(ns0, known_hosts=str(known)))
    fp = openssh_fingerprint(netns_lab.host_key(0).with_suffix(".pub"))
    assert str(info.value) == (
        f"ns0: host key of {addr} (ssh-ed25519 {fp}) is not in {known}; if this is the right "
        f"host, run: ssh-keyscan -p 22 {addr} >> {known} "
        f"(or set ssh.host_key_policy: accept-new for this host)"
    )
    assert known.read_text() == ""  # strict never writes


def test_missing_known_hosts_file_is_an_unknown_key(ns0: Host, tmp_path: Path) -> None:
    with pytest.raises(HostKeyError, match="is not in"):
        connect(with_ssh(ns0, known_hosts=str(tmp_path / "absent")))


def test_changed_key_is_refused_even_with_accept_new(
    netns_lab: NetnsLab, ns0: Host, tmp_path: Path
) -> None:
    other = make_key(tmp_path / "other")
    key_type, blob = other.with_suffix(".pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"{ns0.ssh.host} {key_type} {blob}\n")
    for policy in ("strict", "accept-new"):
        with pytest.raises(HostKeyError) as info:
            connect(with_ssh(ns0, known_hosts=str(known), host_key_policy=policy))
        message = str(info.value)
        expected = openssh_fingerprint(other.with_suffix(".pub"))
        offered = openssh_fingerprint(netns_lab.host_key(0).with_suffix(".pub"))
        assert f"host key of {ns0.ssh.host} CHANGED" in message
        assert f"expects ssh-ed25519 {expected}" in message
        assert f"offered ssh-ed25519 {offered}" in message
        assert f"ssh-keygen -R '{ns0.ssh.host}' -f {known}" in message
    assert known.read_text() == f"{ns0.ssh.host} {key_type} {blob}\n"


def test_accept_new_records_the_key_openssh_can_read(
    netns_lab: NetnsLab, ns0: Host, tmp_path: Path
) -> None:
    known = tmp_path / "sub" / "known_hosts"
    connect(with_ssh(ns0, known_hosts=str(known), host_key_policy="accept-new"))
    key_type, blob = lab_key_line(netns_lab)
    assert known.read_text() == f"{ns0.ssh.host} {key_type} {blob}\n"
    found = subprocess.run(
        ["ssh-keygen", "-F", ns0.ssh.host, "-f", str(known)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert found.returncode == 0
    connect(with_ssh(ns0, known_hosts=str(known)))  # now strict accepts it


def test_accept_new_appends_after_a_last_line_without_newline(
    netns_lab: NetnsLab, ns0: Host, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("# no newline at the end")
    connect(with_ssh(ns0, known_hosts=str(known), host_key_policy="accept-new"))
    lines = known.read_text().splitlines()
    assert lines[0] == "# no newline at the end" and lines[1].startswith(ns0.ssh.host + " ")


def test_hashed_known_hosts_entries_are_honoured(
    netns_lab: NetnsLab, ns0: Host, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    shutil.copy(netns_lab.known_hosts, known)
    subprocess.run(
        ["ssh-keygen", "-H", "-f", str(known)], check=True, timeout=30, capture_output=True
    )
    assert ns0.ssh.host not in known.read_text() and "|1|" in known.read_text()
    connect(with_ssh(ns0, known_hosts=str(known)))


def test_port_entries_use_the_bracket_form(netns_lab: NetnsLab, ns0: Host, tmp_path: Path) -> None:
    key_type, blob = lab_key_line(netns_lab)
    addr = ns0.ssh.host
    on_alt_port = with_ssh(ns0, port=ALT_SSH_PORT)
    # The lab's known_hosts has the key for port 22 only: port 2222 is another host.
    with pytest.raises(HostKeyError) as info:
        connect(on_alt_port)
    assert f"host key of [{addr}]:{ALT_SSH_PORT} " in str(info.value)
    assert f"ssh-keyscan -p {ALT_SSH_PORT} {addr}" in str(info.value)
    known = tmp_path / "known_hosts"
    known.write_text(f"[{addr}]:{ALT_SSH_PORT} {key_type} {blob}\n")
    connect(with_ssh(on_alt_port, known_hosts=str(known)))
    with pytest.raises(HostKeyError, match="is not in"):
        connect(with_ssh(ns0, known_hosts=str(known)))  # and not for port 22
