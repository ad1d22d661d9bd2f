"""An inventory of two siw (or other) hosts with a middlebox and a controller, and its
link's ``impair:`` forms: shared by the inventory's and host control's impairment tests."""

from __future__ import annotations

from pathlib import Path

from hil.inventory import load
from hil.inventory.model import Inventory

MIDDLEBOX = "    impair: {mode: middlebox, host: mb, toward: {a:p0: enp1s0, b:p0: enp2s0}}\n"
COMMAND = """\
    impair:
      mode: command
      controller: ctl
      apply: [impairctl, set, "{port}", "{direction}", "{netem}"]
      clear: [impairctl, clear, "{port}", "{direction}"]
      vars: {port: Eth1/3}
"""


def inventory_text(driver_a: str = "siw", impair: str = "", driver_b: str | None = None) -> str:
    """Hosts ctl, mb, a and b (port p0 on eth1), link ``ab`` with ``impair`` (a YAML line
    or block indented for the link, or "" for none)."""
    return f"""\
hosts:
  ctl: {{ssh: {{host: ctl}}}}
  mb: {{ssh: {{host: mb}}}}
  a:
    ssh: {{host: a}}
    rnics: [{{name: p0, netdev: eth1, driver: {driver_a}, address: 198.18.0.1/24}}]
  b:
    ssh: {{host: b}}
    rnics: [{{name: p0, netdev: eth1, driver: {driver_b or driver_a}, address: 198.18.0.2/24}}]
links:
  ab:
    ends: [a:p0, b:p0]
{impair}"""


def impair_inventory(tmp_path: Path, driver: str = "siw", impair: str = "") -> Inventory:
    """``inventory_text`` written to ``tmp_path/lab.yaml`` and loaded."""
    path = tmp_path / "lab.yaml"
    path.write_text(inventory_text(driver, impair))
    return load(path)
