"""Broken inventories: each gives one located message, exit 1 and no traceback.

Every case edits a valid base inventory in one place and states the exact
message, ``file:line: yaml.path: message``, that the loader must give; each
is checked in-process and through the real ``hil inventory check`` command.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hil.errors import InventoryError
from hil.inventory import load

Hil = Callable[..., subprocess.CompletedProcess[str]]  # the ``hil`` fixture: run the CLI

BASE = """\
hosts:
  bastion:
    ssh:
      host: bastion.lab.example
  ctl:
    ssh: {host: ctl.lab.example, jump: bastion}
  a:
    ssh:
      host: a.lab.example
      jump: bastion
    tags: [x]
    rnics:
      - name: p0
        netdev: eth1
        driver: siw
        address: 198.18.0.1/24
        mtu: 1500
        speed: 10000
  b:
    ssh:
      host: b.lab.example
    tags: [x]
    rnics:
      - name: p0
        netdev: eth1
        driver: siw
        address: 198.18.0.2/24
        mtu: 1500
links:
  l1:
    ends: [a:p0, b:p0]
    pull:
      - mode: admin
      - mode: command
        controller: ctl
        down: [swctl, "{port}", down]
        up: [swctl, "{port}", up]
        vars: {port: Eth1/1}
"""

HOSTS = "hosts: a, b, bastion, ctl"
VARS = "        vars: {port: Eth1/1}\n"
CAPTURE_COMMAND = """\
    capture:
      mode: command
      controller: ctl
      start: [cap, start, "{tool}", "{id}"]
      stop: [cap, stop, "{id}"]
      fetch: [cap, get, "{id}", "{pcap}"]
      vars: {tool: t1}
"""
RNIC_ALLOWED = (
    "address, address6, driver, fallback, firmware, mtu, name, netdev, rdma_device, speed"
)

# (id, text to replace in BASE (first occurrence), replacement, expected message)
CASES = [
    (
        "bad-ip",
        "198.18.0.1/24",
        "198.18.1.300/24",
        "lab.yaml:16: hosts.a.rnics[0].address: '198.18.1.300/24' is not an IP network",
    ),
    (
        "address-without-prefix",
        "198.18.0.1/24",
        "198.18.0.1",
        (
            "lab.yaml:16: hosts.a.rnics[0].address: '198.18.0.1' has no prefix length "
            "(write ADDRESS/PREFIX, like 198.18.0.1/24)"
        ),
    ),
    (
        "address6-not-an-address",
        "address: 198.18.0.1/24\n",
        "address: 198.18.0.1/24\n        address6: fd00::zz/64\n",
        (
            "lab.yaml:17: hosts.a.rnics[0].address6: 'fd00::zz/64' is not an IPv6 address "
            "with prefix (like fd00::1/64)"
        ),
    ),
    (
        "address6-ipv4",
        "address: 198.18.0.1/24\n",
        "address: 198.18.0.1/24\n        address6: 198.18.0.5/24\n",
        (
            "lab.yaml:17: hosts.a.rnics[0].address6: '198.18.0.5/24' is an IPv4 address; "
            "address6 takes an IPv6 one (like fd00::1/64), address the IPv4 one"
        ),
    ),
    (
        "address6-without-prefix",
        "address: 198.18.0.1/24\n",
        "address: 198.18.0.1/24\n        address6: fd00::1\n",
        (
            "lab.yaml:17: hosts.a.rnics[0].address6: 'fd00::1' has no prefix length "
            "(write ADDRESS/PREFIX, like fd00::1/64)"
        ),
    ),
    (
        "address6-beside-ipv6-address",
        "address: 198.18.0.1/24\n",
        "address: fd00::9/64\n        address6: fd00::1/64\n",
        (
            "lab.yaml:17: hosts.a.rnics[0].address6: address fd00::9/64 is IPv6 already; "
            "address6 is the IPv6 address beside an IPv4 address: give address an IPv4 "
            "address or drop address6"
        ),
    ),
    (
        "address6-twice-on-a-host",
        "        speed: 10000\n",
        (
            "        speed: 10000\n        address6: fd00::1/64\n"
            "      - {name: p1, netdev: eth2, driver: siw, address6: 'fd00::1/128'}\n"
        ),
        (
            "lab.yaml:20: hosts.a.rnics[1].address6: fd00::1 is already the address6 of "
            "port 'p0' of this host; each port needs its own address"
        ),
    ),
    (
        "unknown-key",
        "speed: 10000",
        "sped: 10000",
        (
            "lab.yaml:18: hosts.a.rnics[0].sped: unknown key 'sped' "
            f"(did you mean 'speed'? allowed: {RNIC_ALLOWED})"
        ),
    ),
    (
        "unknown-top-key",
        "links:",
        "link:",
        (
            "lab.yaml:29: link: unknown key 'link' (did you mean 'links'? "
            "allowed: hosts, links, thresholds, version)"
        ),
    ),
    (
        "duplicate-key",
        "    tags: [x]\n",
        "    tags: [x]\n    tags: [y]\n",
        "lab.yaml:12: hosts.a.tags: duplicate key 'tags' (first at line 11)",
    ),
    (
        "duplicate-host",
        "  b:\n",
        "  a:\n",
        "lab.yaml:19: hosts.a: duplicate key 'a' (first at line 7)",
    ),
    (
        "dangling-end-host",
        "ends: [a:p0, b:p0]",
        "ends: [a:p0, c:p0]",
        f"lab.yaml:31: links.l1.ends[1]: no host 'c' in this inventory ({HOSTS})",
    ),
    (
        "dangling-end-port",
        "ends: [a:p0, b:p0]",
        "ends: [a:p0, b:p1]",
        "lab.yaml:31: links.l1.ends[1]: host 'b' has no RNIC port 'p1' (ports: p0)",
    ),
    (
        "end-not-host-port",
        "ends: [a:p0, b:p0]",
        "ends: [a:p0, b]",
        "lab.yaml:31: links.l1.ends[1]: 'b' is not HOST:PORT (like t6-a:p0)",
    ),
    (
        "three-ends",
        "ends: [a:p0, b:p0]",
        "ends: [a:p0, b:p0, ctl:p0]",
        "lab.yaml:31: links.l1.ends: a link has exactly two ends, got 3",
    ),
    (
        "same-host-link",
        "ends: [a:p0, b:p0]",
        "ends: [a:p0, a:p0]",
        "lab.yaml:31: links.l1.ends: both ends are on host 'a'; a link joins two hosts",
    ),
    (
        "port-on-two-links",
        "        vars: {port: Eth1/1}\n",
        "        vars: {port: Eth1/1}\n  l2:\n    ends: [b:p0, a:p0]\n",
        (
            "lab.yaml:40: links.l2.ends[0]: RNIC port b:p0 is on two links, 'l1' (line 31) "
            "and 'l2'; a port takes one cable"
        ),
    ),
    (
        "jump-unknown-host",
        "jump: bastion}",
        "jump: bastoin}",
        f"lab.yaml:6: hosts.ctl.ssh.jump: no host 'bastoin' in this inventory ({HOSTS})",
    ),
    (
        "jump-loop",
        "      host: bastion.lab.example\n",
        "      host: bastion.lab.example\n      jump: ctl\n",
        "lab.yaml:5: hosts.bastion.ssh.jump: jump hosts loop: bastion -> ctl -> bastion",
    ),
    (
        "bad-pull-mode",
        "mode: admin",
        "mode: unplug",
        (
            "lab.yaml:33: links.l1.pull[0].mode: 'unplug' is not one of: "
            "admin, blackhole, carrier, command"
        ),
    ),
    (
        "pull-end-not-on-link",
        "      - mode: admin\n",
        "      - mode: admin\n        end: ctl:p0\n",
        "lab.yaml:34: links.l1.pull[0].end: 'ctl:p0' is not an end of this link (ends: a:p0, b:p0)",
    ),
    (
        "pull-key-of-other-mode",
        "      - mode: admin\n",
        "      - mode: admin\n        qmp: /run/q.sock\n",
        "lab.yaml:34: links.l1.pull[0].qmp: unknown key 'qmp' (allowed: end, mode)",
    ),
    (
        "duplicate-pull-mode",
        "      - mode: command\n",
        "      - mode: admin\n      - mode: command\n",
        "lab.yaml:34: links.l1.pull[1]: duplicate pull mode 'admin' (first at line 33)",
    ),
    (
        "carrier-without-netdev",
        "      - mode: admin\n",
        "      - mode: carrier\n        qmp: /run/q.sock\n",
        "lab.yaml:33: links.l1.pull[0]: missing required key 'netdev'",
    ),
    (
        "command-without-up",
        '        up: [swctl, "{port}", up]\n',
        "",
        "lab.yaml:34: links.l1.pull[1]: missing required key 'up'",
    ),
    (
        "template-field-not-in-vars",
        '"{port}", down',
        '"{prot}", down',
        "lab.yaml:36: links.l1.pull[1].down[1]: template field {prot} is not in vars (vars: port)",
    ),
    (
        "template-unbalanced-brace",
        '"{port}", down',
        '"{port", down',
        (
            "lab.yaml:36: links.l1.pull[1].down[1]: bad template '{port': expected '}' before "
            "end of string (write {{ for a literal brace)"
        ),
    ),
    (
        "controller-unknown",
        "controller: ctl",
        "controller: switch",
        f"lab.yaml:35: links.l1.pull[1].controller: no host 'switch' in this inventory ({HOSTS})",
    ),
    (
        "capture-host-unknown",
        VARS,
        VARS + "    capture: {mode: host, host: tap-1, netdev: eth3}\n",
        f"lab.yaml:39: links.l1.capture.host: no host 'tap-1' in this inventory ({HOSTS})",
    ),
    (
        "capture-host-without-netdev",
        VARS,
        VARS + "    capture:\n      mode: host\n      host: ctl\n",
        "lab.yaml:39: links.l1.capture: missing required key 'netdev'",
    ),
    (
        "capture-bad-mode",
        VARS,
        VARS + "    capture: {mode: mirror}\n",
        "lab.yaml:39: links.l1.capture.mode: 'mirror' is not one of: ends, host, command, none",
    ),
    (
        "capture-bad-word",
        VARS,
        VARS + "    capture: off\n",
        "lab.yaml:39: links.l1.capture: expected a string, got a boolean 'off'",
    ),
    (
        "capture-key-of-another-mode",
        VARS,
        VARS + "    capture: {mode: none, netdev: eth3}\n",
        "lab.yaml:39: links.l1.capture.netdev: unknown key 'netdev' (allowed: mode)",
    ),
    (
        "capture-command-field-unknown",
        VARS,
        VARS + CAPTURE_COMMAND.replace('[cap, stop, "{id}"]', '[cap, stop, "{session}"]'),
        (
            "lab.yaml:43: links.l1.capture.stop[2]: template field {session} is not in fields "
            "(fields: id, link, tool)"
        ),
    ),
    (
        "capture-command-pcap-outside-fetch",
        VARS,
        VARS + CAPTURE_COMMAND.replace('[cap, stop, "{id}"]', '[cap, stop, "{pcap}"]'),
        (
            "lab.yaml:43: links.l1.capture.stop[2]: template field {pcap} is not in fields "
            "(fields: id, link, tool)"
        ),
    ),
    (
        "capture-command-fetch-without-pcap",
        VARS,
        VARS + CAPTURE_COMMAND.replace('"{pcap}"]', "/tmp/x.pcap]"),
        "lab.yaml:44: links.l1.capture.fetch: fetch must write the capture to {pcap} (a file "
        "on the controller hil then copies and removes)",
    ),
    (
        "capture-command-var-named-like-a-field",
        VARS,
        VARS + CAPTURE_COMMAND.replace("{tool: t1}", "{tool: t1, pcap: x}"),
        "lab.yaml:45: links.l1.capture.vars.pcap: 'pcap' is filled by hil; name the variable "
        "otherwise",
    ),
    (
        "capture-command-controller-unknown",
        VARS,
        VARS + CAPTURE_COMMAND.replace("controller: ctl", "controller: cap-ctl"),
        f"lab.yaml:41: links.l1.capture.controller: no host 'cap-ctl' in this inventory ({HOSTS})",
    ),
    (
        "wrong-type-mtu",
        "mtu: 1500",
        "mtu: big",
        "lab.yaml:17: hosts.a.rnics[0].mtu: expected an integer, got a string 'big'",
    ),
    (
        "wrong-type-rnics",
        (
            "    rnics:\n      - name: p0\n        netdev: eth1\n        driver: siw\n"
            "        address: 198.18.0.1/24\n        mtu: 1500\n        speed: 10000\n"
        ),
        "    rnics: eth1\n",
        "lab.yaml:12: hosts.a.rnics: expected a list, got a string 'eth1'",
    ),
    (
        "wrong-type-tags",
        "    tags: [x]\n",
        "    tags: x\n",
        "lab.yaml:11: hosts.a.tags: expected a list, got a string 'x'",
    ),
    (
        "bad-mtu",
        "mtu: 1500",
        "mtu: 20",
        "lab.yaml:17: hosts.a.rnics[0].mtu: 20 is out of range 68..65535",
    ),
    (
        "bad-ssh-port",
        "      host: a.lab.example\n",
        "      host: a.lab.example\n      port: 70000\n",
        "lab.yaml:10: hosts.a.ssh.port: 70000 is out of range 1..65535",
    ),
    (
        "bad-host-key-policy",
        "      host: a.lab.example\n",
        "      host: a.lab.example\n      host_key_policy: accept-all\n",
        "lab.yaml:10: hosts.a.ssh.host_key_policy: 'accept-all' is not one of: strict, accept-new",
    ),
    (
        "missing-ssh-host",
        "      host: b.lab.example\n",
        "      port: 22\n",
        "lab.yaml:20: hosts.b.ssh: missing required key 'host'",
    ),
    (
        "ssh-host-like-an-option",
        "host: b.lab.example",
        "host: -oProxyCommand=touch",
        (
            "lab.yaml:21: hosts.b.ssh.host: '-oProxyCommand=touch' is not a host name, "
            "address or ssh alias"
        ),
    ),
    (
        "netdev-like-an-option",
        "        netdev: eth1\n        driver: siw\n        address: 198.18.0.2/24\n",
        "        netdev: -all\n        driver: siw\n        address: 198.18.0.2/24\n",
        "lab.yaml:25: hosts.b.rnics[0].netdev: '-all' is not a network interface name",
    ),
    (
        "missing-netdev",
        "        netdev: eth1\n        driver: siw\n        address: 198.18.0.2/24\n",
        "        driver: siw\n        address: 198.18.0.2/24\n",
        "lab.yaml:24: hosts.b.rnics[0]: missing required key 'netdev'",
    ),
    (
        "duplicate-port-name",
        "        mtu: 1500\n        speed: 10000\n",
        (
            "        mtu: 1500\n        speed: 10000\n      - name: p0\n        netdev: eth2\n"
            "        driver: siw\n"
        ),
        "lab.yaml:19: hosts.a.rnics[1]: duplicate RNIC port name 'p0' (first at line 13)",
    ),
    (
        "bad-fallback",
        "        speed: 10000\n",
        "        speed: 10000\n        fallback: rxe\n",
        "lab.yaml:19: hosts.a.rnics[0].fallback: 'rxe' is not one of: siw",
    ),
    (
        "bad-sysctl-name",
        "    tags: [x]\n",
        "    tags: [x]\n    sysctls: {../../etc/passwd: 1}\n",
        (
            "lab.yaml:12: hosts.a.sysctls['../../etc/passwd']: '../../etc/passwd' is not a "
            "sysctl name (like net.ipv4.tcp_retries2)"
        ),
    ),
    (
        "bad-host-name",
        "  b:\n",
        "  b c:\n",
        (
            "lab.yaml:19: hosts['b c']: 'b c' is not a valid name (letters, digits, '_', '.', '-'; "
            "starting with a letter or digit)"
        ),
    ),
    (
        "yaml-syntax-error",
        "    tags: [x]\n",
        "    tags: [x\n",
        (
            "lab.yaml:12: invalid YAML: expected ',' or ']', but got ':' "
            "(while parsing a flow sequence started at line 11)"
        ),
    ),
    (
        "unsupported-version",
        "hosts:\n",
        "version: 2\nhosts:\n",
        "lab.yaml:1: version: unsupported version 2 (this hil reads version 1)",
    ),
    (
        "root-not-a-mapping",
        BASE,
        "- a\n- b\n",
        "lab.yaml:1: expected a mapping, got a list",
    ),
    (
        "empty-file",
        BASE,
        "# nothing yet\n",
        "lab.yaml:1: the file is empty (expected hosts: and links:)",
    ),
]


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    assert old in BASE, f"test case edits text that is not in BASE: {old!r}"
    path = tmp_path / "lab.yaml"
    path.write_text(BASE.replace(old, new, 1))
    return path


def test_base_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(BASE)
    inv = load(path)
    assert sorted(inv.hosts) == ["a", "b", "bastion", "ctl"]
    assert list(inv.links) == ["l1"]


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_broken_inventory_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, message: str
) -> None:
    _broken(tmp_path, old, new)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InventoryError) as caught:
        load("lab.yaml")
    assert str(caught.value) == message
    assert caught.value.file == "lab.yaml"


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_broken_inventory_through_cli(
    tmp_path: Path, hil: Hil, old: str, new: str, message: str
) -> None:
    _broken(tmp_path, old, new)
    done = hil("inventory", "check", "lab.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == message + "\n"
    assert done.stdout == ""
    assert "Traceback" not in done.stderr


CABLED = """\
hosts:
  a:
    ssh: {host: a.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
      - {name: p1, netdev: eth2, driver: siw}
  b:
    ssh: {host: b.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
  c:
    ssh: {host: c.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
      - {name: p1, netdev: eth2, driver: siw}
links:
  l1:
    ends: [a:p0, b:p0]
  l2:
    ends: [a:p1, c:p0]
"""


def test_both_ends_of_a_link_with_one_address6_are_refused(tmp_path: Path) -> None:
    six = "        address6: fd00::1/64\n"
    text = BASE.replace("        speed: 10000\n", "        speed: 10000\n" + six)
    (tmp_path / "lab.yaml").write_text(text.replace("198.18.0.2/24\n", "198.18.0.2/24\n" + six))
    with pytest.raises(InventoryError) as caught:
        load(tmp_path / "lab.yaml")
    assert str(caught.value).endswith(
        ":33: links.l1.ends: both ends have the address6 fd00::1; each end of a link needs its own"
    )


def test_two_links_on_one_host_through_two_ports_are_valid(tmp_path: Path) -> None:
    # One cable per port, not per host: host a is on both links.
    path = tmp_path / "lab.yaml"
    path.write_text(CABLED)
    inv = load(path)
    assert [(str(k.a), str(k.b)) for k in inv.links.values()] == [
        ("a:p0", "b:p0"),
        ("a:p1", "c:p0"),
    ]


def test_port_on_two_links_names_both_with_their_lines(tmp_path: Path, hil: Hil) -> None:
    # The shared port is the second end of the later link, written far from the first.
    path = tmp_path / "lab.yaml"
    path.write_text(CABLED + "  l3:\n    tags: [spare]\n    ends:\n      - c:p1\n      - a:p0\n")
    message = (
        "lab.yaml:25: links.l3.ends[1]: RNIC port a:p0 is on two links, 'l1' (line 18) "
        "and 'l3'; a port takes one cable"
    )
    with pytest.raises(InventoryError) as caught:
        load(path)
    assert str(caught.value) == str(path.parent / message)
    done = hil("inventory", "check", "lab.yaml", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", message + "\n")
