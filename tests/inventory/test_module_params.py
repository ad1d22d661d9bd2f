"""A link's ``module_params`` and a host's ``firmware_policy``: what loads, and each
refusal with its located message; the command-line override ``DRIVER.NAME=VALUE``;
the ``blackhole`` pull refused on a port whose RNIC offloads TCP."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from labtree import lab_tree

from hil.errors import InputError, InventoryError
from hil.inventory import inventory_document, load
from hil.inventory.model import PinnedParam
from hil.inventory.modparams import MODULE_PARAMS, overridden, parse_override

Hil = Callable[..., subprocess.CompletedProcess[str]]

BASE = """\
hosts:
  a:
    ssh: {host: a.lab.example}
    firmware_policy: exact
    rnics:
      - name: p0
        netdev: eth1
        driver: iw_cxgb4
        firmware: 1.27.4.0
  b:
    ssh: {host: b.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: iw_cxgb4}
  c:
    ssh: {host: c.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
      - {name: p1, netdev: eth2, driver: siw}
  d:
    ssh: {host: d.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
links:
  t6:
    ends: [a:p0, b:p0]
    module_params:
      iw_cxgb4: {ep_timeout_secs: 10, mpa_rev: 2}
  sw:
    ends: [c:p0, d:p0]
"""

CXGB4_PARAMS = ", ".join(sorted(MODULE_PARAMS["iw_cxgb4"]))
LOAD_ONLY = (
    "iw_cxgb4.c4iw_wr_log can only change at module load (it is read-only in sysfs, see "
    "drivers/infiniband/hw/cxgb4/device.c): set it with `modprobe iw_cxgb4 c4iw_wr_log=VALUE` "
    "or an `options iw_cxgb4 c4iw_wr_log=VALUE` line in /etc/modprobe.d, then reload iw_cxgb4"
)
NO_POLICY = (
    "firmware_policy says how to compare a port's firmware with what the card runs, but no "
    "RNIC port of this host names firmware; add firmware to a port or drop firmware_policy"
)

BLACKHOLE = (
    "pull mode 'blackhole' cannot pull this link: b:p0 uses iw_cxgb4, whose RNIC runs TCP "
    "itself (offloaded), so host filters (nftables) never see its iWARP traffic and the "
    "connection stays up; use 'admin' (the port's netdev set down) or 'command' (the switch "
    "port taken down)"
)

# (id, text to replace in BASE (first occurrence), replacement, expected message)
CASES = [
    (
        "blackhole-on-an-offloading-port",
        "    ends: [a:p0, b:p0]\n",
        "    ends: [a:p0, b:p0]\n    pull:\n      - mode: admin\n"
        "      - {mode: blackhole, end: b:p0}\n",
        f"lab.yaml:28: links.t6.pull[1]: {BLACKHOLE}",
    ),
    (
        "blackhole-on-the-default-end",
        "    ends: [a:p0, b:p0]\n",
        "    ends: [a:p0, b:p0]\n    pull: [{mode: blackhole}]\n",
        f"lab.yaml:26: links.t6.pull[0]: {BLACKHOLE.replace('b:p0', 'a:p0')}",
    ),
    (
        "load-only",
        "ep_timeout_secs: 10",
        "c4iw_wr_log: 1",
        f"lab.yaml:27: links.t6.module_params.iw_cxgb4.c4iw_wr_log: {LOAD_ONLY}",
    ),
    (
        "unknown-parameter",
        "ep_timeout_secs: 10",
        "ep_timeout: 10",
        (
            "lab.yaml:27: links.t6.module_params.iw_cxgb4.ep_timeout: iw_cxgb4 has no module "
            f"parameter 'ep_timeout' (did you mean 'ep_timeout_secs'? parameters: {CXGB4_PARAMS})"
        ),
    ),
    (
        "driver-not-on-the-link",
        "      iw_cxgb4: {",
        "      siw: {",
        "lab.yaml:27: links.t6.module_params.siw: driver 'siw' is not the driver of this "
        "link's ports (iw_cxgb4)",
    ),
    (
        "driver-without-parameters",
        "    ends: [c:p0, d:p0]\n",
        "    ends: [c:p0, d:p0]\n    module_params: {siw: {mpa_crc_required: 1}}\n",
        "lab.yaml:30: links.sw.module_params.siw.mpa_crc_required: siw has no module parameters "
        "(its settings are compile-time constants)",
    ),
    (
        "not-an-integer",
        "ep_timeout_secs: 10",
        "ep_timeout_secs: ten",
        "lab.yaml:27: links.t6.module_params.iw_cxgb4.ep_timeout_secs: iw_cxgb4.ep_timeout_secs "
        "is an int: expected an integer, got a string 'ten'",
    ),
    (
        "a-boolean",
        "mpa_rev: 2",
        "mpa_rev: true",
        "lab.yaml:27: links.t6.module_params.iw_cxgb4.mpa_rev: iw_cxgb4.mpa_rev is an int: "
        "expected an integer, got a boolean 'true'",
    ),
    (
        "out-of-range",
        "ep_timeout_secs: 10",
        "ep_timeout_secs: 4294967296",
        "lab.yaml:27: links.t6.module_params.iw_cxgb4.ep_timeout_secs: 4294967296 is out of "
        "range -2147483648..2147483647",
    ),
    (
        "params-not-a-mapping",
        "      iw_cxgb4: {ep_timeout_secs: 10, mpa_rev: 2}",
        "      iw_cxgb4: [ep_timeout_secs]",
        "lab.yaml:27: links.t6.module_params.iw_cxgb4: expected a mapping, got a list",
    ),
    (
        "policy-without-firmware",
        "    ssh: {host: b.lab.example}\n",
        "    ssh: {host: b.lab.example}\n    firmware_policy: min\n",
        f"lab.yaml:12: hosts.b.firmware_policy: {NO_POLICY}",
    ),
    (
        "unknown-policy",
        "firmware_policy: exact",
        "firmware_policy: newer",
        "lab.yaml:4: hosts.a.firmware_policy: 'newer' is not one of: exact, min, record",
    ),
    (
        "min-needs-a-version",
        "firmware_policy: exact\n    rnics:\n      - name: p0\n        netdev: eth1\n"
        "        driver: iw_cxgb4\n        firmware: 1.27.4.0",
        "firmware_policy: min\n    rnics:\n      - name: p0\n        netdev: eth1\n"
        "        driver: iw_cxgb4\n        firmware: T6-fw-latest",
        "lab.yaml:9: hosts.a.rnics[0].firmware: firmware_policy min compares dotted version "
        "numbers (like 1.27.4.0), got 'T6-fw-latest'",
    ),
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_module_params_and_firmware_policy_load(tmp_path: Path) -> None:
    inv = load(_write(tmp_path, BASE.replace("mpa_rev: 2", "mpa_rev: 0x1")))
    pair = inv.pair("t6")
    assert pair.module_params == {"iw_cxgb4": {"ep_timeout_secs": "10", "mpa_rev": "1"}}
    assert pair.link.module_params == (
        PinnedParam("iw_cxgb4", "ep_timeout_secs", "10"),
        PinnedParam("iw_cxgb4", "mpa_rev", "1"),
    )
    assert (inv.hosts["a"].firmware_policy, inv.hosts["b"].firmware_policy) == ("exact", "exact")
    assert inv.pair("sw").module_params == {}


@pytest.mark.parametrize("policy", ["exact", "min", "record"])
def test_each_firmware_policy_loads(tmp_path: Path, policy: str) -> None:
    inv = load(
        _write(tmp_path, BASE.replace("firmware_policy: exact", f"firmware_policy: {policy}"))
    )
    assert inv.hosts["a"].firmware_policy == policy


def test_the_document_loads_back_with_module_params_and_policy(tmp_path: Path) -> None:
    inv = load(_write(tmp_path, BASE.replace("firmware_policy: exact", "firmware_policy: record")))
    doc = inventory_document(inv)
    assert doc["links"]["t6"]["module_params"] == {
        "iw_cxgb4": {"ep_timeout_secs": 10, "mpa_rev": 2}
    }
    assert (doc["hosts"]["a"]["firmware_policy"], doc["hosts"]["b"]["firmware_policy"]) == (
        "record",
        None,  # no port of b names firmware: the policy means nothing there
    )
    again = tmp_path / "again.yaml"
    again.write_text(json.dumps({"hosts": doc["hosts"], "links": doc["links"]}))
    back = load(again)
    assert back.links == inv.links and back.hosts["a"] == inv.hosts["a"]


@pytest.mark.parametrize(("case", "old", "new", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused(tmp_path: Path, case: str, old: str, new: str, message: str) -> None:
    assert old in BASE, case
    path = _write(tmp_path, BASE.replace(old, new, 1))
    with pytest.raises(InventoryError) as e:
        load(path)
    assert str(e.value) == f"{tmp_path}/{message}"


def test_a_load_only_parameter_is_refused_by_inventory_check(tmp_path: Path, hil: Hil) -> None:
    path = _write(tmp_path, BASE.replace("ep_timeout_secs: 10", "c4iw_wr_log: 1"))
    done = hil("inventory", "check", str(path))
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        == f"{tmp_path}/lab.yaml:27: links.t6.module_params.iw_cxgb4.c4iw_wr_log: {LOAD_ONLY}"
    )
    assert "Traceback" not in done.stderr


def test_blackhole_on_a_host_tcp_port_loads(tmp_path: Path) -> None:
    text = BASE.replace(
        "    ends: [c:p0, d:p0]\n", "    ends: [c:p0, d:p0]\n    pull: [{mode: blackhole}]\n"
    )
    assert load(_write(tmp_path, text)).links["sw"].pull("blackhole").end is not None


def test_inventory_check_refuses_blackhole_on_a_t6_port(tmp_path: Path, hil: Hil) -> None:
    text = BASE.replace(
        "    ends: [a:p0, b:p0]\n",
        "    ends: [a:p0, b:p0]\n    pull: [{mode: blackhole, end: b:p0}]\n",
    )
    done = hil("inventory", "check", str(_write(tmp_path, text)))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == f"{tmp_path}/lab.yaml:26: links.t6.pull[0]: {BLACKHOLE}"


# -- the command-line override --------------------------------------------------------------


def test_an_override_is_parsed_and_replaces_the_links_value() -> None:
    assert parse_override("iw_cxgb4.ep_timeout_secs=5") == PinnedParam(
        "iw_cxgb4", "ep_timeout_secs", "5"
    )
    link = (
        PinnedParam("iw_cxgb4", "ep_timeout_secs", "10"),
        PinnedParam("iw_cxgb4", "mpa_rev", "2"),
    )
    over = (parse_override("iw_cxgb4.ep_timeout_secs=5"), parse_override("iw_cxgb4.dack_mode=1"))
    assert overridden(link, over) == (
        PinnedParam("iw_cxgb4", "ep_timeout_secs", "5"),
        PinnedParam("iw_cxgb4", "mpa_rev", "2"),
        PinnedParam("iw_cxgb4", "dack_mode", "1"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "ep_timeout_secs=5",
            "module parameter 'ep_timeout_secs=5' is not DRIVER.NAME=VALUE "
            "(like iw_cxgb4.ep_timeout_secs=10)",
        ),
        ("iw_cxgb4.mpa_rev=", "module parameter 'iw_cxgb4.mpa_rev=' is not DRIVER.NAME=VALUE"),
        ("iw_cxgb4.c4iw_wr_log=1", f"module parameter 'iw_cxgb4.c4iw_wr_log=1': {LOAD_ONLY}"),
        (
            "iw_cxgb4.mpa_rev=two",
            "module parameter 'iw_cxgb4.mpa_rev=two': iw_cxgb4.mpa_rev is an int, got 'two'",
        ),
        (
            "mlx5.x=1",
            "module parameter 'mlx5.x=1': hil knows no module parameters of driver 'mlx5'",
        ),
    ],
)
def test_a_bad_override_is_refused(text: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_override(text)
    assert str(e.value).startswith(message)


def test_every_parameter_in_the_table_is_declared_in_the_driver_source() -> None:
    """The table against the sources hil's lab kernel is built from, when they are here
    (either flavour's tree: the default lab's minimal one, or the debug one)."""
    source = lab_tree() / "drivers/infiniband"
    for params in MODULE_PARAMS.values():
        for p in params.values():
            text = (source / p.source).read_text()
            perm = "0644" if p.runtime else "0444"
            assert f"module_param({p.name}, {p.type}, {perm});" in text, p
    siw = "".join(f.read_text() for f in (source / "sw/siw").glob("*.c"))
    assert "module_param" not in siw  # siw: no parameters (compile-time constants)
    declared = sum(
        (source / "hw/cxgb4" / f).read_text().count("module_param(") for f in ("cm.c", "device.c")
    )
    assert declared == len(MODULE_PARAMS["iw_cxgb4"])


def test_every_module_parameter_a_profile_reads_is_in_the_table() -> None:
    # The judge may import nothing but errors, so a provider's settings name
    # their sysfs paths themselves; they must be the ones the table knows.
    from hil.judge.profiles import PROVIDERS

    paths = {p.path for params in MODULE_PARAMS.values() for p in params.values()}
    read = [w for spec in PROVIDERS for w in spec.settings.values()]
    assert [w for w in read if w.startswith("/sys/module/") and w not in paths] == []
    assert any(w.startswith("/sys/module/") for w in read)
