"""Validate a host's ``power:`` entry: how hil switches it off, on, or cycles it.

Called by ``hil.inventory.loader`` per host; the ``controller`` of a
``command`` entry names another inventory host, checked by
:func:`check_controller` once every host is known.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from hil.inventory.model import POWER_FIELDS, POWER_MODES, Power
from hil.inventory.nodes import (
    NAME,
    NAME_WHAT,
    At,
    boolean,
    choice,
    entries,
    fields,
    file_path,
    given,
    known,
    matching,
)
from hil.inventory.templates import argv_template, template_vars

# Per power mode: (allowed keys, required keys).  ``mode`` defaults to command.
POWER_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "command": (("mode", "controller", "cycle", "on", "off", "vars", "recover"), ("controller",)),
    "qmp": (("mode", "qmp", "lab", "recover"), ("qmp",)),
}


def parse_power(at: At, base: Path) -> Power:
    """The ``power:`` mapping at ``at``; paths in it are relative to ``base``."""
    found = entries(at)
    mode = choice(found["mode"], POWER_MODES) if given(found, "mode") else "command"
    allowed, required = POWER_KEYS[mode]
    f = fields(at, allowed, required)
    recover = boolean(f["recover"]) if given(f, "recover") else True
    if mode == "qmp":
        lab = file_path(f["lab"], base) if given(f, "lab") else None
        return Power(mode="qmp", qmp=file_path(f["qmp"], base), lab=lab, recover=recover)
    variables = template_vars(f["vars"], POWER_FIELDS) if given(f, "vars") else ()
    names = {k for k, _ in variables} | set(POWER_FIELDS)
    actions = {
        a: argv_template(f[a], names, "fields (its vars and host)")
        for a in ("cycle", "on", "off")
        if given(f, a)
    }
    if "cycle" not in actions and not {"on", "off"} <= set(actions):
        raise at.error(
            "a command power entry needs cycle, or both off and on (a cycle is then off, on): "
            "hil's recovery power-cycles the host"
        )
    return Power(
        mode="command",
        controller=matching(f["controller"], NAME, NAME_WHAT),
        vars=variables,
        recover=recover,
        **actions,  # type: ignore[arg-type]
    )


def check_controller(at: At, host: str, power: Power, hosts: Collection[str]) -> None:
    """A command entry's ``controller`` is another host of the inventory."""
    controller = power.controller
    if controller is None:
        return
    where = entries(at)["controller"]
    if controller == host:
        raise where.error(
            f"{host} cannot be its own power controller: a host that is down cannot run the "
            "command that brings it back; name the PDU's or BMC's controller host"
        )
    if controller not in hosts:
        raise where.error(f"no host {controller!r} in this inventory ({known(hosts)})")
