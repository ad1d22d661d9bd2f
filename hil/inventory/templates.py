"""Argument-list templates: ``{name}`` fields checked when the inventory is read, filled when run.

The inventory's ``command`` pulls and ``command`` capture points are
argument lists, never shell strings.  ``{name}`` in an argument is replaced
by the value of ``name``; ``{{`` and ``}}`` are literal braces.  Which names
a template may use is fixed when it is read (its ``vars`` and the fields hil
fills in itself), so a typo is an inventory error, not a failed run.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Mapping, Sequence

from hil.errors import InputError
from hil.inventory.nodes import At, entries, known, sequence, text

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def argv_template(at: At, names: Collection[str], what: str = "vars") -> tuple[str, ...]:
    """The non-empty argument list at ``at``, whose ``{name}`` fields are all in ``names``
    (``what`` says what those are, for the error)."""
    items = sequence(at)
    if not items:
        raise at.error("expected a non-empty argument list")
    argv = []
    for item in items:
        arg = text(item)
        for field in _fields(item, arg):
            if field not in names:
                raise item.error(
                    f"template field {{{field}}} is not in {what} ({known(names, what)})"
                )
        argv.append(arg)
    return tuple(argv)


def template_vars(at: At, reserved: Collection[str]) -> tuple[tuple[str, str], ...]:
    """A ``vars:`` mapping; its names may not be one of the ``reserved`` fields hil fills."""
    result = []
    for key, value in entries(at).items():
        if not IDENT.fullmatch(key):
            raise value.error(f"{key!r} is not a variable name (letters, digits, '_')")
        if key in reserved:
            raise value.error(f"{key!r} is filled by hil; name the variable otherwise")
        result.append((key, text(value)))
    return tuple(result)


def uses(templates: Sequence[str], name: str) -> bool:
    """Whether any argument of ``templates`` (already checked) has the field ``{name}``."""
    return any(
        field == name for arg in templates for _, field, _, _ in string.Formatter().parse(arg)
    )


def fill(templates: Sequence[str], fields: Mapping[str, str], what: str) -> list[str]:
    """``templates`` with their fields replaced; InputError naming ``what`` when one is missing."""
    try:
        return [t.format(**fields) for t in templates]
    except (KeyError, IndexError, ValueError) as e:
        raise InputError(
            f"{what} {list(templates)} needs field {e} "
            f"(vars: {', '.join(sorted(fields)) or 'none'})"
        ) from None


def _fields(at: At, arg: str) -> list[str]:
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as e:
        raise at.error(f"bad template {arg!r}: {e} (write {{{{ for a literal brace)") from None
    found = []
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not IDENT.fullmatch(field) or spec or conversion:
            raise at.error(f"template field {{{field}}} must be a plain {{name}}")
        found.append(field)
    return found
