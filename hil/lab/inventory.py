"""The lab's inventory: ``DIR/inventory.yaml``, in the format of docs/inventory.md.

Hosts are reached on 127.0.0.1 with the lab's key and strictly checked host
keys; hosts are named as the guests (``ID-I``, with the lab's id, see
``network``) and powered through QMP (``power: {mode: qmp}``, see
``hil.lab.power``); each data NIC is an RNIC port ``pK`` (``driver: siw``, the siw
device the lab created, ``fallback: siw``, its IPv4 ``address`` and IPv6
``address6``); each cable is a link ``ID-I-J``
with ``carrier`` (QMP), ``admin`` and ``blackhole`` pulls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hil.lab.bootfiles import CLIENT_KEY, GUEST_SYSCTLS, KNOWN_HOSTS, rdma_device
from hil.lab.network import Cable, CableEnd, Nic, data_nics
from hil.lab.state import LabState

INVENTORY_FILE = "inventory.yaml"
DATA_MTU = 1500
HEADER = "# The virtual lab's inventory, written by `hil lab up`; it is replaced on every up.\n"


def port_name(netdev: str) -> str:
    """The RNIC port name of a data NIC: ``data0`` -> ``p0``."""
    return "p" + netdev.removeprefix("data")


def document(state: LabState, lab_cables: list[Cable]) -> dict[str, Any]:
    """The inventory of a lab as plain YAML-ready data."""
    lab_dir = Path(state.dir)
    hosts = {}
    for g in state.guests:
        hosts[g.name] = {
            "ssh": {
                "host": "127.0.0.1",
                "port": g.ssh_port,
                "user": "root",
                "identity_file": str(lab_dir / CLIENT_KEY),
                "known_hosts": str(lab_dir / KNOWN_HOSTS),
                "host_key_policy": "strict",
                "connect_timeout": 10,
            },
            "python": "/usr/bin/python3",
            "tags": ["virtual", "siw"],
            "sysctls": dict(GUEST_SYSCTLS),
            "rnics": [_rnic(nic) for _, nic in data_nics(g.index, lab_cables)],
            # Cycled through QEMU's monitor, started again from the lab when QEMU is gone.
            "power": {"mode": "qmp", "qmp": g.qmp, "lab": state.dir},
        }
    links = {c.name: _link(state, c) for c in lab_cables}
    return {"version": 1, "hosts": hosts, "links": links}


def _rnic(nic: Nic) -> dict[str, Any]:
    return {
        "name": port_name(nic.netdev),
        "netdev": nic.netdev,
        "driver": "siw",
        "rdma_device": rdma_device(nic.netdev),
        "fallback": "siw",
        "address": nic.address,
        "address6": nic.address6,
        "mtu": DATA_MTU,
    }


def _end(state: LabState, end: CableEnd) -> str:
    # The name the guest was started with (state), as the hosts above.
    return f"{state.guests[end.guest].name}:{port_name(end.nic.netdev)}"


def _link(state: LabState, cable: Cable) -> dict[str, Any]:
    qmp = state.guests[cable.a.guest].qmp
    a, b = _end(state, cable.a), _end(state, cable.b)
    return {
        "ends": [a, b],
        "tags": ["virtual"],
        "pull": [
            {"mode": "carrier", "end": a, "qmp": qmp, "netdev": cable.a.nic.netdev},
            {"mode": "admin", "end": a},
            {"mode": "blackhole", "end": a},
        ],
    }


def write(state: LabState, lab_cables: list[Cable]) -> Path:
    """Write ``DIR/inventory.yaml``; returns its path."""
    path = Path(state.dir) / INVENTORY_FILE
    text = yaml.safe_dump(document(state, lab_cables), sort_keys=False, default_flow_style=False)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(HEADER + text)
    tmp.replace(path)
    return path
