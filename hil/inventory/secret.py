"""A secret from the inventory (an SSH password or key passphrase) that never prints.

The inventory names a secret either as an environment variable
(``{env: NAME}``, preferred: the value stays out of the file) or as literal
text.  ``Secret`` keeps the value out of ``repr``, ``str``, ``dataclasses.asdict``
copies of its holder and any log line: what it shows is ``$NAME`` or
``<secret>``.  Only :meth:`Secret.value` gives the text, at the moment of use.
"""

from __future__ import annotations

import os
import re

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HIDDEN = "<secret>"


class Secret:
    """A literal secret or a reference to an environment variable.

    Deliberately not a dataclass: ``dataclasses.asdict`` of an ``SshConfig``
    would copy a dataclass's fields, the literal value with them.
    """

    __slots__ = ("_literal", "env")

    def __init__(self, *, env: str | None = None, literal: str | None = None) -> None:
        if (env is None) == (literal is None):
            raise ValueError("a Secret is either env or literal")
        if env is not None and not ENV_NAME.fullmatch(env):
            raise ValueError(f"{env!r} is not an environment variable name")
        self.env = env
        self._literal = literal

    def value(self) -> str | None:
        """The secret's text; None when its environment variable is not set."""
        if self.env is None:
            return self._literal
        return os.environ.get(self.env)

    def describe(self) -> str:
        """Where the value comes from, for messages: ``$NAME`` or ``<secret>``."""
        return HIDDEN if self.env is None else f"${self.env}"

    def document(self) -> str | dict[str, str]:
        """The inventory document's form: ``{"env": NAME}``, or ``<secret>`` for a literal."""
        return HIDDEN if self.env is None else {"env": self.env}

    def __repr__(self) -> str:
        return f"Secret({self.describe()})"

    __str__ = describe

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return (self.env, self._literal) == (other.env, other._literal)

    def __hash__(self) -> int:
        return hash((self.env, self._literal))
