"""A link's ``impair:``: its modes, its defaults, and the forms refused with a located
message (through the loader and the real ``hil inventory check``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from impair_inventory import COMMAND, MIDDLEBOX, inventory_text

from hil.errors import InventoryError
from hil.inventory import ImpairSpec, load
from hil.inventory.document import inventory_document
from hil.inventory.model import LinkEnd

Hil = Callable[..., subprocess.CompletedProcess[str]]


def _inventory(driver_a: str = "siw", impair: str = "") -> str:
    # Port b stays siw: the refusals name the first offloaded end, a:p0.
    return inventory_text(driver_a, impair, driver_b="siw")


def _load(tmp_path: Path, text: str) -> ImpairSpec:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return load(path).link("ab").impair


def test_a_siw_link_is_impaired_by_netem_on_its_ends_by_default(tmp_path: Path) -> None:
    assert _load(tmp_path, _inventory()) == ImpairSpec(mode="netem")


def test_an_offloaded_link_has_no_impairment_point_by_default(tmp_path: Path) -> None:
    assert _load(tmp_path, _inventory("iw_cxgb4")) == ImpairSpec(mode="none")


def test_a_middlebox_names_its_netdev_toward_each_end(tmp_path: Path) -> None:
    spec = _load(tmp_path, _inventory("iw_cxgb4", MIDDLEBOX))
    assert spec.host == "mb"
    assert spec.netdev_toward(LinkEnd("a", "p0")) == "enp1s0"
    assert spec.netdev_toward(LinkEnd("b", "p0")) == "enp2s0"


def test_a_command_keeps_its_templates(tmp_path: Path) -> None:
    spec = _load(tmp_path, _inventory("irdma", COMMAND))
    assert spec.controller == "ctl"
    assert spec.apply == ("impairctl", "set", "{port}", "{direction}", "{netem}")
    assert dict(spec.vars) == {"port": "Eth1/3"}


@pytest.mark.parametrize("impair", [MIDDLEBOX, COMMAND, "    impair: none\n"])
def test_the_json_form_loads_back_as_the_same_impairment(tmp_path: Path, impair: str) -> None:
    first = tmp_path / "lab.yaml"
    first.write_text(_inventory("iw_cxgb4", impair))
    inv = load(first)
    again = tmp_path / "again.yaml"
    doc = inventory_document(inv)
    again.write_text(yaml.safe_dump({k: doc[k] for k in ("hosts", "links")}))
    assert load(again).link("ab").impair == inv.link("ab").impair


@pytest.mark.parametrize(
    ("driver", "impair", "message"),
    [
        (
            "iw_cxgb4",
            "    impair: netem\n",
            "impair mode 'netem' cannot impair this link: a:p0 uses iw_cxgb4, whose RNIC runs "
            "TCP itself (iw_cxgb4 opens each connection by a CPL_ACT_OPEN_REQ to the adapter, "
            "drivers/infiniband/hw/cxgb4/cm.c send_connect), so its iWARP segments never pass "
            "the host's qdiscs and netem there changes nothing; put a Linux host on the cable "
            "instead: impair: {mode: middlebox, host: HOST, toward: {END_A: NETDEV, "
            "END_B: NETDEV}}",
        ),
        (
            "irdma",
            "    impair: {mode: netem}\n",
            "a:p0 uses irdma, whose RNIC runs TCP itself (irdma sends its SYN through its own "
            "ILQ queue on the device",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: middlebox, host: a, toward: {a:p0: x0, b:p0: x1}}\n",
            "middlebox 'a' is one of the link's ends; a middlebox is a third host bridging "
            "a:p0 and b:p0",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: middlebox, host: mb, toward: {a:p0: x0}}\n",
            "middlebox 'mb' names no netdev toward b:p0: it must bridge both ends of the link",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: middlebox, host: mb, toward: {a:p0: x0, c:p0: x1}}\n",
            "'c:p0' is not an end of this link: middlebox 'mb' must bridge its two ends",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: middlebox, host: mb, toward: {a:p0: x0, b:p0: x0}}\n",
            "middlebox 'mb' faces both ends on x0",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: middlebox, host: nosuch, toward: {a:p0: x0, b:p0: x1}}\n",
            "no host 'nosuch' in this inventory",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: command, controller: ctl, apply: [x, '{direction}'], "
            "clear: [y, '{direction}']}\n",
            "apply must pass the impairment: {netem}",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: command, controller: ctl, apply: [x, '{direction}', '{netem}'], "
            "clear: [y]}\n",
            "clear must name {direction}",
        ),
        (
            "iw_cxgb4",
            "    impair: {mode: command, controller: ctl, apply: [x, '{direction}', '{nete}'], "
            "clear: [y, '{direction}']}\n",
            "template field {nete} is not in fields",
        ),
        ("iw_cxgb4", "    impair: {mode: tap}\n", "'tap'"),
    ],
)
def test_bad_impairments_are_refused_with_a_located_message(
    tmp_path: Path, driver: str, impair: str, message: str
) -> None:
    with pytest.raises(InventoryError) as info:
        _load(tmp_path, _inventory(driver, impair))
    assert "links.ab.impair" in str(info.value)
    assert message in str(info.value)


def test_the_check_command_refuses_host_netem_on_an_iw_cxgb4_port(tmp_path: Path, hil: Hil) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(_inventory("iw_cxgb4", "    impair: netem\n"))
    got = hil("inventory", "check", str(path))
    assert got.returncode == 1
    assert "lab.yaml:13: links.ab.impair: impair mode 'netem' cannot impair" in got.stderr
    assert "mode: middlebox" in got.stderr
    assert "Traceback" not in got.stderr
