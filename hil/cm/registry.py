"""The CM sequences by name: sequences register here; ``CMSession.run`` and ``hil cm list`` look.

A sequence is a function ``(session, **params) -> Timeline`` whose first
docstring line says what it does (``hil cm list`` shows it, with the
parameters and their defaults).  Register one with the decorator::

    from hil.cm.registry import sequence

    @sequence
    def my_race(s: CMSession, rounds: int = 3) -> Timeline:
        '''Race X against Y, ``rounds`` times.'''
        ...

The built-in ones (:mod:`hil.cm.sequences`) are registered once
:mod:`hil.cm.session` is imported; a lab's own register when their module is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hil.judge.timeline import Timeline
from hil.registry import Registry

Sequence = Callable[..., Timeline]
S = TypeVar("S", bound=Sequence)


def _origin(fn: Sequence) -> str:
    return f"{fn.__module__}.{getattr(fn, '__qualname__', fn.__name__)}"


# The same function again (its module imported twice) is no second sequence.
SEQUENCES = Registry[Sequence](
    "CM sequence", name_of=lambda fn: fn.__name__, same=lambda a, b: _origin(a) == _origin(b)
)


def sequence(fn: S) -> S:
    """Register ``fn`` under its name; another function of that name is an error."""
    SEQUENCES.register(fn)
    return fn


def lookup(name: str) -> Sequence:
    """The sequence registered as ``name``; InputError naming the known ones."""
    return SEQUENCES[name]
