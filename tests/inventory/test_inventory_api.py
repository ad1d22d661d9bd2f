"""The public names of ``hil.inventory`` (other layers code against them)."""

from __future__ import annotations

import hil.inventory


def test_exported_names() -> None:
    assert sorted(hil.inventory.__all__) == sorted(
        [
            "CAPTURE_MODES", "FIRMWARE_POLICIES", "MODULE_PARAMS", "PULL_MODES",
            "REQUIREMENT_KEYS", "CaptureMode", "CaptureSpec", "FirmwarePolicy",
            "Host", "HostKeyPolicy", "IPInterface", "ImpairSpec",
            "Inventory", "Link", "LinkEnd", "ModuleParam", "Pair", "PinnedParam", "Power",
            "PowerAction", "Pull", "PullMode", "Requirement", "Rnic", "Secret", "SshConfig",
            "check_value",
            "inventory_document", "inventory_path", "load", "load_from_args", "module_param",
            "pair_document", "parse_requirement", "parse_requirements", "select",
        ]
    )  # fmt: skip
    for name in hil.inventory.__all__:
        assert getattr(hil.inventory, name) is not None, name
