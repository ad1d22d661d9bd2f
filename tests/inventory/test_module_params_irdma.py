"""irdma's (empty) module parameter table, and the source facts hil's irdma support rests on,
checked against the Linux 6.1 and 6.12 trees the lab extracts (skipped when one is absent)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hil.inventory.modparams import MODULE_PARAMS, module_param
from hil.lab.kernelkey import cache_root

# Where each series keeps ice's devlink parameters.
ICE_DEVLINK = {"6.1": "ice/ice_devlink.c", "6.12": "ice/devlink/devlink.c"}


def _tree(series: str) -> Path:
    """An extracted linux-source-SERIES's drivers/ (``hil lab kernel --source`` leaves one)."""
    found = sorted((cache_root() / "kernel/build").glob(f"*/linux-source-{series}/drivers"))
    found = [d for d in found if (d / "infiniband/hw/irdma").is_dir()]
    if not found:
        pytest.skip(f"no extracted linux-source-{series} with irdma under {cache_root()}/kernel")
    return found[0]


def test_irdma_has_no_parameters_and_says_why() -> None:
    assert MODULE_PARAMS["irdma"] == {}
    with pytest.raises(KeyError, match="enable_iwarp, which hil checks"):
        module_param("irdma", "roce_ena")


@pytest.mark.parametrize("series", ["6.1", "6.12"])
def test_the_irdma_facts_hold_in_the_source(series: str) -> None:
    drivers = _tree(series)
    irdma = "".join(f.read_text() for f in sorted((drivers / "infiniband/hw/irdma").glob("*.c")))
    assert "module_param" not in irdma  # the table is complete: none
    assert "node_desc" not in irdma  # known by its parent driver (hil/host/rdmadev.py)
    assert "IW_F_NO_PORT_MAP" not in irdma  # iw_cm maps its ports: iwpmd needed
    assert "dev.parent = &pcidev->dev;" in irdma  # the RDMA device's parent: the PCI function
    assert re.search(r"\{\s*\.name = \"ice\.iwarp\", \}", irdma)
    ice = (drivers / "net/ethernet/intel" / ICE_DEVLINK[series]).read_text()
    for generic in ("ENABLE_ROCE", "ENABLE_IWARP"):
        assert f"DEVLINK_PARAM_GENERIC({generic}, BIT(DEVLINK_PARAM_CMODE_RUNTIME)" in ice
    assert "cannot enable iWARP and RoCEv2 simultaneously" in ice
