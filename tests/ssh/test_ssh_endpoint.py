"""Resolving an inventory host through ssh_config (pure: no network)."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from hil.errors import InputError
from hil.inventory.model import Host, SshConfig
from hil.ssh.endpoint import jump_host, load_ssh_config, resolve

CONFIG = """
Host alias
  HostName real.example
  Port 2200
  User admin
  IdentityFile ~/keys/lab
  ProxyJump gw1,admin@gw2:2022
  UserKnownHostsFile /etc/lab_known_hosts

Host plain
  User other

Host *
  User me
  Port 2022
  IdentityFile ~/.ssh/personal
"""


@pytest.fixture
def config(tmp_path: Path) -> paramiko.SSHConfig:
    path = tmp_path / "config"
    path.write_text(CONFIG)
    return load_ssh_config(path)


def test_alias_fills_what_the_inventory_leaves_at_defaults(config: paramiko.SSHConfig) -> None:
    ep = resolve(Host("h", SshConfig(host="alias")), config)
    assert (ep.address, ep.port, ep.user) == ("real.example", 2200, "admin")
    # IdentityFile accumulates over the blocks that match, as in OpenSSH.
    assert ep.identity_files == (
        Path("~/keys/lab").expanduser(),
        Path("~/.ssh/personal").expanduser(),
    )
    assert ep.jumps == ("gw1", "admin@gw2:2022")
    assert ep.known_hosts == Path("/etc/lab_known_hosts")
    assert ep.known_hosts_name == "[real.example]:2200"


def test_inventory_values_win(config: paramiko.SSHConfig) -> None:
    ssh = SshConfig(
        host="alias", port=22022, user="hil", identity_file="/k", jump="bastion", known_hosts="/kh"
    )
    ep = resolve(Host("h", ssh), config)
    assert (ep.address, ep.port, ep.user) == ("real.example", 22022, "hil")
    assert (ep.identity_files, ep.jumps, ep.known_hosts) == (
        (Path("/k"),),
        ("bastion",),
        Path("/kh"),
    )


def test_a_host_not_in_ssh_config_is_taken_as_is(config: paramiko.SSHConfig) -> None:
    ep = resolve(Host("h", SshConfig(host="10.0.0.1", identity_file="/k")), config)
    assert (ep.address, ep.port, ep.user, ep.jumps) == ("10.0.0.1", 22, "root", ())
    assert ep.identity_files == (Path("/k"),)
    assert ep.known_hosts_name == "10.0.0.1"
    assert ep.known_hosts == Path("~/.ssh/known_hosts").expanduser()


def test_catch_all_port_and_user_do_not_replace_inventory_defaults(
    config: paramiko.SSHConfig,
) -> None:
    ep = resolve(Host("h", SshConfig(host="10.0.0.1")), config)
    assert (ep.port, ep.user) == (22, "root")
    assert ep.identity_files == (Path("~/.ssh/personal").expanduser(),)
    assert resolve(Host("h", SshConfig(host="plain")), config).user == "other"


def test_missing_ssh_config_is_empty(tmp_path: Path) -> None:
    ep = resolve(Host("h", SshConfig(host="alias")), load_ssh_config(tmp_path / "none"))
    assert ep.address == "alias"
    assert resolve(Host("h", SshConfig(host="a")), load_ssh_config(None)).address == "a"


def test_a_bad_port_in_ssh_config_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("Host x\n  Port twenty\n")
    with pytest.raises(InputError, match="ssh_config Port 'twenty' is not a number"):
        resolve(Host("h", SshConfig(host="x")), load_ssh_config(path))


def test_jump_specs() -> None:
    target = Host(
        "t",
        SshConfig(
            host="t", identity_file="/k", known_hosts="/kh", host_key_policy="accept-new", sudo=True
        ),
    )
    hop = jump_host("admin@gw:2022", target)
    assert (hop.name, hop.ssh.host, hop.ssh.port, hop.ssh.user) == (
        "admin@gw:2022",
        "gw",
        2022,
        "admin",
    )
    assert (hop.ssh.identity_file, hop.ssh.known_hosts, hop.ssh.host_key_policy) == (
        "/k",
        "/kh",
        "accept-new",
    )
    assert (hop.ssh.sudo, hop.ssh.jump) == (False, None)
    assert (jump_host("gw", target).ssh.port, jump_host("gw", target).ssh.user) == (22, "root")
    with pytest.raises(InputError, match="port is not a number"):
        jump_host("gw:ssh", target)
    with pytest.raises(InputError, match="names no host"):
        jump_host("admin@", target)
