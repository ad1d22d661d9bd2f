"""A link's ``devlink_params``: what loads (YAML booleans as devlink prints them, the JSON
document round trip), and each refusal with its located message; the table checked against
the 6.1 and 6.12 ice sources the lab extracts (skipped when one is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import InventoryError
from hil.inventory import inventory_document, load
from hil.inventory.devlinkparams import DEVLINK_PARAMS
from hil.inventory.model import PinnedDevlink
from hil.lab.kernelkey import cache_root

BASE = """\
hosts:
  a:
    ssh: {host: a.lab.example}
    rnics:
      - {name: p0, netdev: ens1f0, driver: irdma, rdma_device: irdma0}
  b:
    ssh: {host: b.lab.example}
    rnics:
      - {name: p0, netdev: ens1f0, driver: irdma, rdma_device: irdma0}
      - {name: p1, netdev: eth2, driver: siw}
  c:
    ssh: {host: c.lab.example}
    rnics:
      - {name: p0, netdev: eth1, driver: siw}
links:
  e810:
    ends: [a:p0, b:p0]
    devlink_params: {enable_roce: false, enable_iwarp: true, local_forwarding: disabled}
  sw:
    ends: [c:p0, b:p1]
"""
PINNED = "devlink_params: {enable_roce: false, enable_iwarp: true, local_forwarding: disabled}"
WHERE = "lab.yaml:18: links.e810.devlink_params"

CASES = [
    (
        "permanent",
        "local_forwarding: disabled",
        "tx_scheduling_layers: 5",
        f"{WHERE}.tx_scheduling_layers: devlink parameter tx_scheduling_layers is permanent "
        "only (6.12 devlink/devlink.c ice_dvl_sched_params (absent in 6.1)): it is written to "
        "the NVM and counts after a reboot, so a run cannot pin it; set it once with `devlink "
        "dev param set pci/BDF name tx_scheduling_layers value V cmode permanent` and reboot",
    ),
    (
        "unknown",
        "enable_iwarp: true",
        "enable_iw: true",
        f"{WHERE}.enable_iw: ice has no devlink parameter 'enable_iw' hil knows (did you mean "
        f"'enable_iwarp'? known: {', '.join(DEVLINK_PARAMS)})",
    ),
    (
        "bad-value",
        "local_forwarding: disabled",
        "local_forwarding: sometimes",
        f"{WHERE}.local_forwarding: devlink parameter local_forwarding takes enabled or "
        "disabled or prioritized, got 'sometimes'",
    ),
    (
        "bool-as-word",
        "enable_iwarp: true",
        "enable_iwarp: yes please",
        f"{WHERE}.enable_iwarp: devlink parameter enable_iwarp takes true or false, "
        "got 'yes please'",
    ),
    (
        "no-irdma-end",
        "    ends: [c:p0, b:p1]\n",
        "    ends: [c:p0, b:p1]\n    devlink_params: {enable_iwarp: true}\n",
        "lab.yaml:21: links.sw.devlink_params: devlink_params are set on irdma ports' PCI "
        "functions; this link's ports run siw",
    ),
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(text)
    return path


def test_devlink_params_load_as_devlink_prints_them(tmp_path: Path) -> None:
    inv = load(_write(tmp_path, BASE))
    assert inv.links["e810"].devlink_params == (
        PinnedDevlink("enable_roce", "false"),
        PinnedDevlink("enable_iwarp", "true"),
        PinnedDevlink("local_forwarding", "disabled"),
    )
    assert inv.pair("e810").devlink_params["enable_iwarp"] == "true"
    assert inv.links["sw"].devlink_params == ()


def test_the_document_loads_back_into_the_same_pins(tmp_path: Path) -> None:
    doc = inventory_document(load(_write(tmp_path, BASE)))
    assert doc["links"]["e810"]["devlink_params"] == {
        "enable_roce": False,
        "enable_iwarp": True,
        "local_forwarding": "disabled",
    }


@pytest.mark.parametrize(
    ("old", "new", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_pin_is_refused_where_it_is(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in BASE
    with pytest.raises(InventoryError) as e:
        load(_write(tmp_path, BASE.replace(old, new, 1)))
    assert str(e.value).endswith(message)


@pytest.mark.parametrize(
    ("series", "table"),
    [("6.1", "ice/ice_devlink.c"), ("6.12", "ice/devlink/devlink.c")],
)
def test_the_table_holds_in_the_source(series: str, table: str) -> None:
    found = sorted((cache_root() / "kernel/build").glob(f"*/linux-source-{series}/drivers"))
    source = [d / "net/ethernet/intel" / table for d in found]
    source = [s for s in source if s.is_file()]
    if not source:
        pytest.skip(f"no extracted linux-source-{series} with ice under {cache_root()}/kernel")
    ice = source[0].read_text()
    for generic in ("ENABLE_ROCE", "ENABLE_IWARP"):
        assert f"DEVLINK_PARAM_GENERIC({generic}, BIT(DEVLINK_PARAM_CMODE_RUNTIME)" in ice
    sched = ('"local_forwarding"', '"tx_scheduling_layers"', "DEVLINK_PARAM_CMODE_PERMANENT")
    assert all((s in ice) == (series == "6.12") for s in sched)
    if series == "6.12":
        for mode in DEVLINK_PARAMS["local_forwarding"].values:
            assert f'"{mode}"' in ice
