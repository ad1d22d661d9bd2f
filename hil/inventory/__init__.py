"""The lab inventory: hosts, their RNIC ports, links between them, and pairs.

``load(path)`` reads and validates a YAML inventory (docs/inventory.md);
``select(inventory, requirements)`` picks the pairs that satisfy
requirements such as ``speed>=25000``.
"""

from hil.inventory.document import inventory_document, pair_document
from hil.inventory.loader import inventory_path, load, load_from_args
from hil.inventory.model import (
    CAPTURE_MODES,
    FIRMWARE_POLICIES,
    PULL_MODES,
    CaptureMode,
    CaptureSpec,
    FirmwarePolicy,
    Host,
    HostKeyPolicy,
    ImpairSpec,
    Inventory,
    IPInterface,
    Link,
    LinkEnd,
    Pair,
    PinnedParam,
    Power,
    PowerAction,
    Pull,
    PullMode,
    Rnic,
    SshConfig,
)
from hil.inventory.modparams import MODULE_PARAMS, ModuleParam, check_value, module_param
from hil.inventory.require import (
    REQUIREMENT_KEYS,
    Requirement,
    parse_requirement,
    parse_requirements,
    select,
)
from hil.inventory.secret import Secret

__all__ = [
    "CAPTURE_MODES",
    "FIRMWARE_POLICIES",
    "MODULE_PARAMS",
    "PULL_MODES",
    "REQUIREMENT_KEYS",
    "CaptureMode",
    "CaptureSpec",
    "ImpairSpec",
    "FirmwarePolicy",
    "Host",
    "HostKeyPolicy",
    "IPInterface",
    "Inventory",
    "Link",
    "LinkEnd",
    "ModuleParam",
    "Pair",
    "PinnedParam",
    "Power",
    "PowerAction",
    "Pull",
    "PullMode",
    "Requirement",
    "Rnic",
    "Secret",
    "SshConfig",
    "check_value",
    "inventory_document",
    "inventory_path",
    "load",
    "load_from_args",
    "module_param",
    "pair_document",
    "parse_requirement",
    "parse_requirements",
    "select",
]
