"""irdma's device on the recorded E810 host: its PCI function, its transport, the fix for RoCE."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hosts import e810_hosts

from hil.errors import RemoteError
from hil.host.irdmadev import pci_function, roce_refusal, switch_to_iwarp

NODE_TYPE = "/sys/class/infiniband/irdma0/node_type"


def test_an_iwarp_device_and_its_pci_function(tmp_path: Path) -> None:
    agent = e810_hosts(tmp_path).recorded("e810a")
    assert pci_function(agent, "e810a", "irdma0") == "0000:17:00.0"
    assert roce_refusal(agent, "e810a", "irdma0") == ""  # type: ignore[arg-type]


def test_roce_is_switched_by_disabling_roce_first() -> None:
    commands = switch_to_iwarp("0000:17:00.1").split("; ")
    assert commands == [
        "devlink dev param set pci/0000:17:00.1 name enable_roce value false cmode runtime",
        "devlink dev param set pci/0000:17:00.1 name enable_iwarp value true cmode runtime",
    ]


def test_a_node_type_neither_rnic_nor_ca_is_not_iwarp(tmp_path: Path) -> None:
    agent = e810_hosts(tmp_path).recorded("e810a")
    agent.write(NODE_TYPE, "6: unspecified\n")
    why = roce_refusal(agent, "e810a", "irdma0")  # type: ignore[arg-type]
    assert why.startswith("irdma0 on e810a runs not iWARP (node_type '6: unspecified'")


def test_a_device_without_a_parent_is_named(tmp_path: Path) -> None:
    agent = e810_hosts(tmp_path).recorded("e810a")
    with pytest.raises(RemoteError, match="cannot tell the PCI function under irdma9"):
        pci_function(agent, "e810a", "irdma9")
