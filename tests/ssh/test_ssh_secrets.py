"""An encrypted identity file and a password, against the netns lab's real sshd.

The key is unlocked with ``ssh.key_passphrase`` (from the environment or
literal); each mistake (variable unset, wrong passphrase, no passphrase, a
password sshd does not take) is an ``AuthenticationFailed`` naming the host
and what to do, and no message or log line holds a secret.  The lab's sshd
refuses passwords (``PasswordAuthentication no``), so a password login that
succeeds is not tested here.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab import NetnsLab
from sshtest import make_key, with_ssh

from hil.errors import EXIT_INFRA, AuthenticationFailed
from hil.inventory import Secret
from hil.inventory.model import Host, Inventory
from hil.ssh import SSHSession

PASSPHRASE = "hil-pass 'phr\"ase\\9"
PASSWORD = "hil-passw0rd-unused"
VAR = "HIL_TEST_KEY_PASSPHRASE"


@pytest.fixture
def ns0(lab_inventory: Inventory) -> Host:
    return lab_inventory.hosts["ns0"]


@pytest.fixture
def locked_key(netns_lab: NetnsLab, tmp_path: Path) -> Iterator[Path]:
    """An encrypted key whose public half the lab's hosts accept while the test runs."""
    key = make_key(tmp_path / "locked", passphrase=PASSPHRASE)
    authorized = netns_lab.tmpdir / "authorized_keys"
    before = authorized.read_text()
    authorized.write_text(before + key.with_suffix(".pub").read_text())
    yield key
    authorized.write_text(before)


def connect(host: Host) -> None:
    SSHSession.connect(host, ssh_config=None).close()


def failure(host: Host) -> AuthenticationFailed:
    """The connect's error; neither it nor its traceback with every frame's locals
    (what ``pytest -l`` prints) holds a secret."""
    with pytest.raises(AuthenticationFailed) as info:
        connect(host)
    shown = traceback.TracebackException.from_exception(info.value, capture_locals=True)
    printed = "".join(shown.format())
    assert "AuthenticationFailed" in printed and "_authenticate" in printed
    for secret in (PASSPHRASE, PASSWORD):
        assert secret not in printed and repr(secret)[1:-1] not in printed
    assert info.value.exit_code == EXIT_INFRA
    return info.value


def test_an_encrypted_key_unlocks_with_the_passphrase_from_the_environment(
    ns0: Host, locked_key: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VAR, PASSPHRASE)
    caplog.set_level(logging.DEBUG)  # paramiko's own messages too
    connect(with_ssh(ns0, identity_file=str(locked_key), key_passphrase=Secret(env=VAR)))
    assert "Authentication (publickey) successful" in caplog.text
    assert PASSPHRASE not in caplog.text


def test_an_encrypted_key_unlocks_with_a_literal_passphrase(ns0: Host, locked_key: Path) -> None:
    connect(with_ssh(ns0, identity_file=str(locked_key), key_passphrase=Secret(literal=PASSPHRASE)))


def test_an_unset_variable_is_named_with_what_to_do(
    ns0: Host, locked_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VAR, raising=False)
    e = failure(with_ssh(ns0, identity_file=str(locked_key), key_passphrase=Secret(env=VAR)))
    assert str(e) == (
        f"ns0: ssh.key_passphrase comes from the environment variable {VAR}, "
        f"which is not set; export {VAR} before running hil"
    )


def test_a_wrong_passphrase_names_the_file_and_where_it_came_from(
    ns0: Host, locked_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VAR, PASSPHRASE + "x")
    e = failure(with_ssh(ns0, identity_file=str(locked_key), key_passphrase=Secret(env=VAR)))
    assert str(e) == (
        f"ns0: ssh.key_passphrase (${VAR}) does not unlock identity file {locked_key}; "
        f"check the passphrase (ssh-keygen -y -f {locked_key} asks for it)"
    )
    literal = Secret(literal="wrong " + PASSPHRASE)
    e = failure(with_ssh(ns0, identity_file=str(locked_key), key_passphrase=literal))
    assert "ssh.key_passphrase (<secret>) does not unlock" in str(e)


def test_an_encrypted_key_without_a_passphrase_says_how_to_give_one(
    ns0: Host, locked_key: Path
) -> None:
    e = failure(with_ssh(ns0, identity_file=str(locked_key)))
    assert str(e) == (
        f"ns0: identity file {locked_key} is encrypted; set ssh.key_passphrase in the "
        f"inventory (better as {{env: NAME}} than as text) or use an unencrypted key"
    )


def test_a_password_the_host_does_not_take_says_what_it_allows(
    ns0: Host, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    stranger = make_key(tmp_path / "stranger")
    e = failure(with_ssh(ns0, identity_file=str(stranger), password=Secret(literal=PASSWORD)))
    assert str(e) == (
        f"ns0: root@{ns0.ssh.host}:22 refused the key(s) {stranger} and does not accept "
        f"passwords (it allows: publickey); install a public key in ~root/.ssh/authorized_keys "
        f"on the host and set ssh.identity_file"
    )
    assert PASSWORD not in caplog.text


def test_an_unset_password_variable_is_named(
    ns0: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HIL_TEST_SSH_PASSWORD", raising=False)
    stranger = make_key(tmp_path / "stranger")
    host = with_ssh(ns0, identity_file=str(stranger), password=Secret(env="HIL_TEST_SSH_PASSWORD"))
    assert "ns0: ssh.password comes from the environment variable HIL_TEST_SSH_PASSWORD" in str(
        failure(host)
    )


def test_a_set_password_leaves_an_accepted_key_alone(ns0: Host) -> None:
    """The password is tried only when every key was refused: the lab key still logs in."""
    connect(with_ssh(ns0, password=Secret(env="HIL_TEST_NEVER_SET")))
