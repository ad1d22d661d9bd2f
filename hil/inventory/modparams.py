"""The module parameters hil knows: one table, read by the inventory and the hosts.

Each entry is a kernel module parameter as its driver declares it
(``module_param(name, type, perm)``), in the Linux 6.1 sources hil's lab
builds (``drivers/infiniband/hw/cxgb4/cm.c`` and ``device.c``).  ``perm``
decides whether hil may pin it: ``0644`` is writable through
``/sys/module/DRIVER/parameters/NAME`` while the module runs; ``0444`` or
``0`` only takes a value when the module loads (``modprobe DRIVER NAME=V``
or ``options`` in ``/etc/modprobe.d``), so a run cannot set it.

siw has no module parameters: in 6.1 its settings (``mpa_crc_required``,
``peer_to_peer``, ``try_gso`` ... in ``drivers/infiniband/sw/siw/siw_main.c``,
``rtr_type`` in ``siw_cm.c``) are ``const`` globals fixed at build time.

irdma has none either: ``drivers/infiniband/hw/irdma`` declares no
``module_param`` in 6.1 or 6.12 (Intel's out-of-tree irdma has some, such as
``roce_ena``).  What decides how it runs is ice's devlink parameters
(``enable_iwarp``, ``enable_roce``), which ``hil host doctor`` checks and
compares between the hosts (:mod:`hil.host.irdmachecks`) and a link pins with
``devlink_params`` (:mod:`hil.inventory.devlinkparams`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hil.errors import InputError
from hil.inventory.model import PinnedParam
from hil.inventory.nodes import did_you_mean

# The kernel's param types that the table's parameters use (``module_param``'s
# second argument); all of them are ``int`` so far.
ParamType = Literal["int"]
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class ModuleParam:
    """One parameter of a kernel module, as its source declares it."""

    driver: str
    name: str
    type: ParamType
    runtime: bool  # perm 0644: writable in sysfs while the module runs
    default: str  # the initial value in the source, as sysfs prints it
    source: str  # the file that declares it, under drivers/infiniband/

    @property
    def path(self) -> str:
        """Where the running module shows (and, if ``runtime``, takes) its value."""
        return f"/sys/module/{self.driver}/parameters/{self.name}"


def _params(driver: str, source: str, runtime: bool, **defaults: str) -> dict[str, ModuleParam]:
    return {
        name: ModuleParam(driver, name, "int", runtime, default, source)
        for name, default in defaults.items()
    }


_CXGB4_CM = "hw/cxgb4/cm.c"
_CXGB4_DEVICE = "hw/cxgb4/device.c"

# driver -> parameter name -> parameter.  A driver with an empty mapping is
# known to have no parameters (siw), which is not the same as unknown.
MODULE_PARAMS: dict[str, dict[str, ModuleParam]] = {
    "iw_cxgb4": {
        **_params(
            "iw_cxgb4",
            _CXGB4_CM,
            True,
            nocong="0",
            enable_ecn="0",
            dack_mode="0",
            c4iw_max_read_depth="32",
            enable_tcp_timestamps="0",
            enable_tcp_sack="0",
            enable_tcp_window_scaling="1",
            peer2peer="1",
            p2p_type="1",  # FW_RI_INIT_P2PTYPE_READ_REQ
            ep_timeout_secs="60",
            mpa_rev="2",
            markers_enabled="0",
            crc_enabled="1",
            rcv_win="262144",
            snd_win="131072",
        ),
        **_params(
            "iw_cxgb4", _CXGB4_DEVICE, True, allow_db_fc_on_t5="0", allow_db_coalescing_on_t5="0"
        ),
        **_params("iw_cxgb4", _CXGB4_DEVICE, False, c4iw_wr_log="0", c4iw_wr_log_size_order="12"),
    },
    "siw": {},
    "irdma": {},
}
# Why a driver with an empty mapping has no parameters, for the message that refuses one.
NO_PARAMS_WHY: dict[str, str] = {
    "siw": "its settings are compile-time constants",
    "irdma": "the in-tree driver declares none; its RDMA mode is ice's devlink parameter "
    "enable_iwarp, which hil checks (hil host doctor) and a link pins with devlink_params",
}


def module_param(driver: str, name: str) -> ModuleParam:
    """The parameter ``name`` of ``driver``; KeyError with a sentence saying what is known."""
    if driver not in MODULE_PARAMS:
        raise KeyError(
            f"hil knows no module parameters of driver {driver!r} "
            f"(known drivers: {', '.join(sorted(MODULE_PARAMS))})"
        )
    params = MODULE_PARAMS[driver]
    if not params:
        raise KeyError(f"{driver} has no module parameters ({NO_PARAMS_WHY[driver]})")
    if name not in params:
        hint = did_you_mean(name, params)
        raise KeyError(
            f"{driver} has no module parameter {name!r} "
            f"({hint}parameters: {', '.join(sorted(params))})"
        )
    return params[name]


def check_settable(param: ModuleParam) -> None:
    """ValueError unless a run can set ``param`` (its sysfs file is writable).

    A load-only parameter's sysfs file is read-only, and its value only counts
    when the module loads, so it is refused with how to set it instead.
    """
    if not param.runtime:
        raise ValueError(
            f"{param.driver}.{param.name} can only change at module load (it is read-only in "
            f"sysfs, see drivers/infiniband/{param.source}): set it with `modprobe "
            f"{param.driver} {param.name}=VALUE` or an `options {param.driver} "
            f"{param.name}=VALUE` line in /etc/modprobe.d, then reload {param.driver}"
        )


def check_value(param: ModuleParam, value: str) -> str:
    """``value`` as sysfs prints it; ValueError saying why ``param`` cannot take it."""
    check_settable(param)
    try:
        number = int(value, 10)
    except ValueError:
        raise ValueError(f"{param.driver}.{param.name} is an {param.type}, got {value!r}") from None
    if not INT_MIN <= number <= INT_MAX:
        raise ValueError(
            f"{param.driver}.{param.name}: {number} is out of range {INT_MIN}..{INT_MAX}"
        )
    return str(number)


def parse_override(text: str) -> PinnedParam:
    """A command-line ``DRIVER.NAME=VALUE`` (``--hil-module-param``); InputError if it is not
    a known parameter that a run can set to that value."""
    what, eq, value = text.partition("=")
    driver, dot, name = what.partition(".")
    if not (eq and dot and driver and name and value):
        raise InputError(
            f"module parameter {text!r} is not DRIVER.NAME=VALUE (like iw_cxgb4.ep_timeout_secs=10)"
        )
    try:
        return PinnedParam(driver, name, check_value(module_param(driver, name), value.strip()))
    except KeyError as e:
        raise InputError(f"module parameter {text!r}: {e.args[0]}") from None
    except ValueError as e:
        raise InputError(f"module parameter {text!r}: {e}") from None


def overridden(
    params: Iterable[PinnedParam], overrides: Iterable[PinnedParam]
) -> tuple[PinnedParam, ...]:
    """``params`` with each ``overrides`` entry replacing the one of its driver and name
    (or added after them)."""
    result = {(p.driver, p.name): p for p in params}
    for p in overrides:
        result[(p.driver, p.name)] = p
    return tuple(result.values())
