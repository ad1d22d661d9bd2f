"""The lab's inventory: ``DIR/inventory.yaml``, in the format of docs/inventory.md.

Hosts are reached on 127.0.0.1 with the lab's key and strictly checked host
keys; hosts are named as the guests (``ID-I``, with the lab's id, see
``network``) and powered through QMP (``power: {mode: qmp}``, see
``hil.lab.power``); each data NIC is an RNIC port ``pK`` (``driver: siw``, the siw
device the lab created, ``fallback: siw``, its IPv4 ``address`` and IPv6
``address6``); each cable is a link ``ID-I-J``
with ``carrier`` (QMP), ``admin`` and ``blackhole`` pulls.  A middlebox lab's
one link ``ID-0-1`` runs through guest ``ID-2``, a host with no RNIC port
(tags ``virtual``, ``middlebox``) that the link names as its impairment point:
``impair: {mode: middlebox, host: ID-2, toward: {ID-0:p0: data0, ID-1:p0:
data1}}`` (docs/impairment.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hil.lab.bootfiles import CLIENT_KEY, GUEST_SYSCTLS, KNOWN_HOSTS, rdma_device
from hil.lab.network import Cable, CableEnd, Link, Nic, data_nics, links
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
        ports = [nic for _, nic in data_nics(g.index, lab_cables) if nic.address is not None]
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
            # A guest without RNIC ports is the middlebox.
            "tags": ["virtual", "siw" if ports else "middlebox"],
            "sysctls": dict(GUEST_SYSCTLS),
            "rnics": [_rnic(nic) for nic in ports],
            # Cycled through QEMU's monitor, started again from the lab when QEMU is gone.
            "power": {"mode": "qmp", "qmp": g.qmp, "lab": state.dir},
        }
    lab_links = links(lab_cables, state.middlebox)
    return {"version": 1, "hosts": hosts, "links": {k.name: _link(state, k) for k in lab_links}}


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


def _link(state: LabState, link: Link) -> dict[str, Any]:
    qmp = state.guests[link.a.guest].qmp
    a, b = _end(state, link.a), _end(state, link.b)
    doc: dict[str, Any] = {
        "ends": [a, b],
        "tags": ["virtual"],
        "pull": [
            {"mode": "carrier", "end": a, "qmp": qmp, "netdev": link.a.nic.netdev},
            {"mode": "admin", "end": a},
            {"mode": "blackhole", "end": a},
        ],
    }
    if link.middlebox is not None:
        to_a, to_b = link.middlebox
        doc["impair"] = {
            "mode": "middlebox",
            "host": state.guests[to_a.guest].name,
            "toward": {a: to_a.nic.netdev, b: to_b.nic.netdev},
        }
    return doc


def write(state: LabState, lab_cables: list[Cable]) -> Path:
    """Write ``DIR/inventory.yaml``; returns its path."""
    path = Path(state.dir) / INVENTORY_FILE
    text = yaml.safe_dump(document(state, lab_cables), sort_keys=False, default_flow_style=False)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(HEADER + text)
    tmp.replace(path)
    return path
