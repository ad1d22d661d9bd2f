"""Filling argument-list templates (checked when loaded: see test_inventory_errors)."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.inventory.templates import fill, uses


def test_fill_replaces_fields_and_keeps_literal_braces() -> None:
    argv = fill(("swctl", "{port}", "{{x}}"), {"port": "Eth1/3"}, "link l1: command template")
    assert argv == ["swctl", "Eth1/3", "{x}"]


def test_fill_names_the_missing_field() -> None:
    with pytest.raises(InputError, match=r"link l1: command template \['swctl', '\{port\}'\] "
                       r"needs field 'port' \(vars: id\)"):  # fmt: skip
        fill(("swctl", "{port}"), {"id": "x"}, "link l1: command template")


def test_uses_finds_a_field() -> None:
    assert uses(("cap", "--out", "{pcap}"), "pcap")
    assert not uses(("cap", "{{pcap}}"), "pcap")
