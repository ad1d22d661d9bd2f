"""The devlink parameters hil knows: one table, read by the inventory and the hosts.

irdma has no module parameters (:mod:`hil.inventory.modparams`); what decides
how an E810 port runs RDMA is its PCI function's devlink parameters, which
``ice`` registers (Linux 6.1 ``drivers/net/ethernet/intel/ice/ice_devlink.c``
``ice_devlink_params``; 6.12 ``ice/devlink/devlink.c`` ``ice_dvl_rdma_params``
and ``ice_dvl_sched_params``).  A link's runs pin them with ``devlink_params:``
(set with ``devlink dev param set ... cmode runtime`` on each irdma end's PCI
function, journaled, restored: :mod:`hil.host.devlinkparams`).  Only runtime
ones can be pinned: a ``permanent`` one is written to the NVM and counts after
a reboot, which no run may do.  i40e (X722) registers none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hil.inventory.nodes import did_you_mean

ValueType = Literal["bool", "string", "u8"]
Cmode = Literal["runtime", "permanent"]
# The RDMA driver whose ends a link's devlink_params apply to: irdma's E810
# functions, whose devlink instance ice registers.
DEVLINK_DRIVER = "irdma"


@dataclass(frozen=True)
class DevlinkParam:
    """One devlink parameter of ``ice``, as its source registers it."""

    name: str
    type: ValueType
    cmode: Cmode  # the one configuration mode ice offers for it
    values: tuple[str, ...]  # what it takes, as devlink prints it ("" for any u8)
    source: str  # kernel series and the table that registers it

    @property
    def runtime(self) -> bool:
        """Whether a run can set it (``cmode runtime``) and a restore undo it."""
        return self.cmode == "runtime"


_RDMA_6_1 = "6.1 ice_devlink.c ice_devlink_params, 6.12 devlink/devlink.c ice_dvl_rdma_params"
_SCHED_6_12 = "6.12 devlink/devlink.c ice_dvl_sched_params (absent in 6.1)"

DEVLINK_PARAMS: dict[str, DevlinkParam] = {
    p.name: p
    for p in (
        # generic, DEVLINK_PARAM_TYPE_BOOL, runtime; exclusive with each other
        # (ice_devlink_enable_roce_validate / ice_devlink_enable_iw_validate)
        DevlinkParam("enable_roce", "bool", "runtime", ("true", "false"), _RDMA_6_1),
        DevlinkParam("enable_iwarp", "bool", "runtime", ("true", "false"), _RDMA_6_1),
        # ice_devlink_local_fwd_validate: one of ice_devlink_local_fwd_mode_names
        DevlinkParam(
            "local_forwarding",
            "string",
            "runtime",
            ("enabled", "disabled", "prioritized"),
            _SCHED_6_12,
        ),
        # ice_devlink_tx_sched_layers_validate: 5 or 9, written to the NVM
        DevlinkParam("tx_scheduling_layers", "u8", "permanent", ("5", "9"), _SCHED_6_12),
    )
}
# Values that switch a feature off go first when a run sets several at once,
# and so come back last on restore (the journal undoes newest first): ice
# refuses enable_iwarp true while enable_roce is on, and the reverse.
OFF_VALUES = ("false", "disabled")


def devlink_param(name: str) -> DevlinkParam:
    """The parameter ``name``; KeyError with a sentence naming the known ones."""
    if name not in DEVLINK_PARAMS:
        raise KeyError(
            f"ice has no devlink parameter {name!r} hil knows "
            f"({did_you_mean(name, DEVLINK_PARAMS)}known: {', '.join(DEVLINK_PARAMS)})"
        )
    return DEVLINK_PARAMS[name]


def check_devlink_value(param: DevlinkParam, value: str) -> str:
    """``value`` as devlink prints it; ValueError saying why a run cannot set ``param`` to it."""
    if not param.runtime:
        raise ValueError(
            f"devlink parameter {param.name} is {param.cmode} only ({param.source}): it is "
            "written to the NVM and counts after a reboot, so a run cannot pin it; set it "
            f"once with `devlink dev param set pci/BDF name {param.name} value V cmode "
            f"{param.cmode}` and reboot"
        )
    if value not in param.values:
        raise ValueError(
            f"devlink parameter {param.name} takes {' or '.join(param.values)}, got {value!r}"
        )
    return value
