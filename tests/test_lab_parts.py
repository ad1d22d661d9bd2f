"""The parts ci/tests runs side by side (tests/conftest.py, ``--lab-tests``): every test
falls in exactly one of ``none``, ``steady`` and ``restarts``."""

from __future__ import annotations

from labparts import LAB_PARTS


class Item:
    """A collected test as the parts read it: its markers."""

    def __init__(self, *marks: str) -> None:
        self.marks = set(marks)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.marks else None


def test_none_steady_and_restarts_take_every_test_once() -> None:
    items = {
        "no lab": Item(),
        "lab": Item("lab"),
        "restarts": Item("lab", "restarts_guests"),
        "takes the lab down": Item("lab", "takes_lab_down"),
    }
    parts = {p: {n for n, i in items.items() if LAB_PARTS[p](i)} for p in LAB_PARTS}  # type: ignore[arg-type]
    assert parts["none"] == {"no lab"}
    assert parts["steady"] == {"lab", "takes the lab down"}
    assert parts["restarts"] == {"restarts"}
    assert parts["only"] == parts["steady"] | parts["restarts"]
    assert parts["all"] == set(items)
