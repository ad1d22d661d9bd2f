"""One registry type for every extension point: named items of one kind, in registration order.

Contract rules, wire rules, CM sequences, races, providers, pull modes, power
modes and undo kinds each live in a :class:`Registry`; so do a run's observers
(:class:`hil.cm.observer.Observers`, by each one's ``name``).  Register by call or as
a decorator, when the item names itself::

    SEQUENCES = Registry[Sequence]("CM sequence", name_of=lambda fn: fn.__name__)

    @SEQUENCES.register
    def close(s, by="active"): ...

    PULL_MODES.register(pull_pdu, name="pdu")      # an item that does not name itself

A name registered twice is an InputError, unless the registry was given a
``same`` that says the second is the first again (a CM sequence whose module
was imported twice).  An unknown name is an
InputError naming the kind and the names known.  Iteration gives the items in
the order they were registered, so a verdict lists its rules in that order.

It sits at the bottom of hil (it needs only :mod:`hil.errors`), so the judge,
host control, the CM runner and the wire judge can all use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from hil.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named items of one ``kind`` (the word the errors use, e.g. "contract rule").

    ``name_of`` names an item registered without a name; ``same(known, new)``
    says whether a second registration under a taken name is the item already
    there, so it is let pass (default: never); ``on_miss`` runs before an
    unknown name is refused (host control loads its entry points there);
    ``hint`` ends that refusal; ``items`` are registered first, by their own
    names.
    """

    def __init__(
        self,
        kind: str,
        *,
        name_of: Callable[[T], str] | None = None,
        same: Callable[[T, T], bool] | None = None,
        on_miss: Callable[[], None] | None = None,
        hint: str = "",
        items: Iterable[T] = (),
    ) -> None:
        self.kind = kind
        self._name_of = name_of
        self._same = same
        self._on_miss = on_miss
        self._hint = hint
        self._items: dict[str, T] = {}
        for item in items:
            self.register(item)

    def register(self, item: T, name: str | None = None) -> T:
        """Add ``item`` under ``name`` (default: its own name); returns it, so it decorates."""
        key = self._key(item, name)
        known = self._items.get(key)
        if known is not None and not (self._same is not None and self._same(known, item)):
            raise InputError(f"{self.kind} {key!r} is registered already{_origin(known)}")
        self._items[key] = item
        return item

    def unregister(self, name: str) -> T:
        """Remove and return the item of ``name`` (a test's own, after the test)."""
        item = self[name]
        del self._items[name]
        return item

    def __getitem__(self, name: str) -> T:
        """The item of ``name``; InputError naming the kind and the known names."""
        if name not in self._items and self._on_miss is not None:
            self._on_miss()
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            hint = f"; {self._hint}" if self._hint else ""
            raise InputError(f"no {self.kind} {name!r} (known: {known}){hint}") from None

    def get(self, name: str) -> T | None:
        """The item of ``name``, or None (no extension is loaded for it)."""
        return self._items.get(name)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._items)

    def items(self) -> tuple[tuple[str, T], ...]:
        """(name, item) pairs, in registration order."""
        return tuple(self._items.items())

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._items)})"

    def _key(self, item: T, name: str | None) -> str:
        if name is not None:
            return name
        if self._name_of is None:
            raise TypeError(f"a {self.kind} is registered with a name: register(item, name=...)")
        return self._name_of(item)


def _origin(item: object) -> str:
    """ ", by module.function" for a function item (what registered it first), else ""."""
    qualname = getattr(item, "__qualname__", None)
    return f", by {getattr(item, '__module__', '?')}.{qualname}" if qualname else ""
