"""Module parameters on the virtual lab's real guests (kernel 6.1 with siw built in).

siw has no module parameters in 6.1 (its settings are compile-time constants), so
there is nothing of siw's to pin for real; what runs for real here is the rest:
the table's word for siw against the guests' own sysfs, reading a module the
guest does not have (named with the host), a pair claimed to be Chelsio that
falls back to siw pinning nothing of iw_cxgb4, and a command-line override for a
driver the pair does not use refused before any change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from vlab import VirtualLab, lab_pair_run

from hil import tools
from hil.errors import RemoteError
from hil.host.modparams import read_params
from hil.inventory import load
from hil.inventory.modparams import MODULE_PARAMS
from hil.reservation import open_store
from hil.run import PairRequest, PairRun

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]


def test_the_guests_siw_has_no_module_parameters_and_a_missing_module_is_named(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    assert MODULE_PARAMS["siw"] == {}
    with lab_pair_run(virtual_lab, tmp_path, "modparams lab test") as run:
        assert run.pinned == {}
        for host in run.pair.hosts:
            agent = run.hosts.agent(host.name)
            # The guest runs siw (pair setup chose its siw device), yet sysfs has none of its
            # parameters.
            found = agent.run(tools.argv("stat", "-c", "%a", "/sys/module/siw/parameters"))
            assert found.status != 0, (
                f"{host.name} has /sys/module/siw/parameters: the table is stale"
            )
            assert "No such file or directory" in found.stderr
            assert read_params(agent, host.name, "siw") == {}
            # A driver the guest does not have: named, with the host (pair setup refuses a
            # port that claims it earlier, when its device's driver differs).
            with pytest.raises(RemoteError) as e:
                read_params(agent, host.name, "iw_cxgb4")
            assert str(e.value).startswith(
                f"{host.name}: module iw_cxgb4 is not loaded (/sys/module/iw_cxgb4 does not "
                "exist): load it (modprobe iw_cxgb4)"
            )


def _claiming_chelsio(lab: VirtualLab, path: Path, **port: Any) -> Path:
    """The lab's inventory with its pair's ports claimed to be Chelsio (``port`` changes more),
    pinning iw_cxgb4's ep_timeout_secs; without the lab's blackhole pull, which the
    inventory refuses on a TCP-offloading port."""
    doc: dict[str, Any] = yaml.safe_load(Path(lab.inventory.path).read_text())
    for end in (lab.pair.host_a.name, lab.pair.host_b.name):
        for rnic in doc["hosts"][end]["rnics"]:
            rnic.update(driver="iw_cxgb4", **port)
    link = doc["links"][lab.pair.name]
    link["pull"] = [p for p in link["pull"] if p["mode"] != "blackhole"]
    link["module_params"] = {"iw_cxgb4": {"ep_timeout_secs": 10}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_pair_that_fell_back_to_siw_pins_nothing_of_the_claimed_driver(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    path = _claiming_chelsio(virtual_lab, tmp_path / "fallback.yaml", rdma_device="cxgb4_0")
    pair = virtual_lab.pair
    with open_store(str(tmp_path / "store.db")) as store:
        request = PairRequest(pair=pair.name, holder="modparams lab test")
        with PairRun(load(path), store, request) as run:
            assert {h.driver for h in run.provider.hosts} == {"siw"}
            assert run.pinned == {}


def test_an_override_for_a_driver_the_pair_does_not_use_is_refused(
    virtual_lab: VirtualLab, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hil",
            "--inventory",
            str(virtual_lab.inventory.path),
            "--store",
            str(tmp_path / "store.db"),
            "cm",
            "run",
            "close",
            "--pair",
            virtual_lab.pair.name,
            "--module-param",
            "iw_cxgb4.ep_timeout_secs=10",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert (
        f"module parameter iw_cxgb4.ep_timeout_secs=10 is for iw_cxgb4, but pair "
        f"{virtual_lab.pair.name}'s ports use siw"
    ) in done.stderr
