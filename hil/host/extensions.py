"""Host control's extension points: where other packages' pull modes and undo kinds come from.

Host control knows how to pull a link administratively, with a nftables
blackhole and with a command template, and how to undo agent calls and SSH
commands.  Anything else (the virtual lab's QMP carrier pull, a lab's
power-switch pull) registers itself, so that host control never imports the
package that provides it::

    from hil.host.journal import register_undo_kind
    from hil.host.linkctl import register_pull_mode

    def register() -> None:                  # named in pyproject.toml, see below
        register_undo_kind("pdu", undo_pdu_port)
        register_pull_mode("pdu", pull_pdu_port)

A package makes its ``register`` function known under the entry point group
``hil.host`` (``[project.entry-points."hil.host"] mylab = "mylab.pulls:register"``);
host control calls every one of them the first time it meets a mode or kind
it does not know, so a journal entry left by a dead run can be undone by a
fresh process that never imported the package.
"""

from __future__ import annotations

import logging
import operator
import threading
from importlib.metadata import entry_points
from typing import TypeVar

from hil.registry import Registry

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "hil.host"

_loaded = False
_lock = threading.Lock()


def load_extensions() -> None:
    """Call every ``hil.host`` entry point's register function, once per process."""
    global _loaded
    with _lock:
        if _loaded:
            return
        _loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()()
            except Exception as e:  # noqa: BLE001 -- one broken extension must not hide the rest
                log.warning(
                    "host-control extension %s (%s) failed to register: %s", ep.name, ep.value, e
                )


T = TypeVar("T")


class ExtensionRegistry(Registry[T]):
    """Named extensions of one sort; a name nobody registered loads the extensions first.

    An unknown name is an InputError as ``no {kind} {name!r} (known: ...); is
    the package that {provider} installed here?``.  The same function registered
    again (an entry point and a direct call) is let pass.
    """

    def __init__(self, kind: str, provider: str) -> None:
        super().__init__(
            kind,
            same=operator.is_,
            on_miss=load_extensions,
            hint=f"is the package that {provider} installed here?",
        )
