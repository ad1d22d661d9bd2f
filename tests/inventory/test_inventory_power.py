"""A host's ``power:`` entry: what loads, what is refused (with its located message)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hil.errors import InventoryError
from hil.inventory import inventory_document, load
from hil.inventory.model import Power

Hil = Callable[..., subprocess.CompletedProcess[str]]

BASE = """\
hosts:
  pdu-ctl:
    ssh: {host: ctl.lab.example}
  a:
    ssh: {host: a.lab.example}
    power:
      controller: pdu-ctl
      cycle: [pductl, cycle, "{outlet}", --name, "{host}"]
      vars: {outlet: "7"}
"""
POWER_BLOCK = BASE[BASE.index("    power:") :]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_command_power_loads_with_its_fields(tmp_path: Path) -> None:
    inv = load(_write(tmp_path, BASE))
    assert inv.hosts["a"].power == Power(
        mode="command",
        controller="pdu-ctl",
        cycle=("pductl", "cycle", "{outlet}", "--name", "{host}"),
        vars=(("outlet", "7"),),
    )
    assert inv.hosts["pdu-ctl"].power is None
    doc = inventory_document(inv)["hosts"]["a"]["power"]
    assert doc == {
        "mode": "command",
        "recover": True,
        "controller": "pdu-ctl",
        "vars": {"outlet": "7"},
        "cycle": ["pductl", "cycle", "{outlet}", "--name", "{host}"],
        "on": None,
        "off": None,
    }
    # Since JSON is YAML, the document loads back as the same inventory.
    again = tmp_path / "again.yaml"
    again.write_text(json.dumps({"hosts": inventory_document(inv)["hosts"]}))
    assert load(again).hosts == inv.hosts


def test_qmp_power_paths_are_taken_from_the_inventory_folder(tmp_path: Path) -> None:
    text = BASE.replace(
        POWER_BLOCK,
        "    power: {mode: qmp, qmp: lab/a.qmp, lab: lab, recover: false}\n",
    )
    power = load(_write(tmp_path, text)).hosts["a"].power
    assert power == Power(
        mode="qmp", qmp=str(tmp_path / "lab/a.qmp"), lab=str(tmp_path / "lab"), recover=False
    )


CYCLE = '      cycle: [pductl, cycle, "{outlet}", --name, "{host}"]\n'
CASES = [
    (
        "no-cycle-nor-off-on",
        CYCLE,
        '      "on": [pductl, "on"]\n',
        "lab.yaml:6: hosts.a.power: a command power entry needs cycle, or both off and on "
        "(a cycle is then off, on): hil's recovery power-cycles the host",
    ),
    (
        "unknown-field",
        '"{outlet}"',
        '"{outlte}"',
        "lab.yaml:8: hosts.a.power.cycle[2]: template field {outlte} is not in fields "
        "(its vars and host) (fields (its vars and host): host, outlet)",
    ),
    (
        "own-controller",
        "controller: pdu-ctl",
        "controller: a",
        "lab.yaml:7: hosts.a.power.controller: a cannot be its own power controller: a host "
        "that is down cannot run the command that brings it back; name the PDU's or BMC's "
        "controller host",
    ),
    (
        "unknown-controller",
        "controller: pdu-ctl",
        "controller: pdu",
        "lab.yaml:7: hosts.a.power.controller: no host 'pdu' in this inventory (hosts: a, pdu-ctl)",
    ),
    (
        "var-named-host",
        'vars: {outlet: "7"}',
        'vars: {outlet: "7", host: x}',
        "lab.yaml:9: hosts.a.power.vars.host: 'host' is filled by hil; name the variable otherwise",
    ),
    (
        "unknown-mode",
        "controller: pdu-ctl",
        "mode: ipmi\n      controller: pdu-ctl",
        "lab.yaml:7: hosts.a.power.mode: 'ipmi' is not one of: command, qmp",
    ),
    (
        "qmp-key-in-command",
        "controller: pdu-ctl",
        "controller: pdu-ctl\n      qmp: x.qmp",
        "lab.yaml:8: hosts.a.power.qmp: unknown key 'qmp' (allowed: controller, cycle, mode, "
        "off, on, recover, vars)",
    ),
    (
        "qmp-without-socket",
        POWER_BLOCK,
        "    power: {mode: qmp, lab: lab}\n",
        "lab.yaml:6: hosts.a.power: missing required key 'qmp'",
    ),
    (
        "recover-not-bool",
        "controller: pdu-ctl",
        "controller: pdu-ctl\n      recover: sometimes",
        "lab.yaml:8: hosts.a.power.recover: expected true or false, got a string 'sometimes'",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_power_entries_are_located(
    tmp_path: Path, hil: Hil, old: str, new: str, message: str
) -> None:
    text = BASE.replace(old, new, 1)
    assert text != BASE
    path = _write(tmp_path, text)
    with pytest.raises(InventoryError) as e:
        load(path)
    assert str(e.value) == f"{tmp_path}/{message}"
    if old == "controller: pdu-ctl":  # one case through the real command: exit 1, one line
        done = hil("inventory", "check", str(path))
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [f"{tmp_path}/{message}"]
