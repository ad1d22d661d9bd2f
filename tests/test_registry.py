"""hil.registry.Registry: registration by call or decorator, refusals, order, the miss hook."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hil.errors import InputError
from hil.registry import Registry

Fn = Callable[[], int]


def _named() -> Registry[Fn]:
    return Registry[Fn]("greeting", name_of=lambda fn: fn.__name__)


def test_a_decorator_registers_the_function_under_its_name_and_returns_it() -> None:
    reg = _named()

    @reg.register
    def hello() -> int:
        return 1

    assert reg["hello"] is hello and hello() == 1
    assert "hello" in reg and len(reg) == 1


def test_a_call_registers_under_the_name_given() -> None:
    reg = Registry[Fn]("pull mode")
    reg.register(lambda: 2, name="pdu")
    assert reg["pdu"]() == 2
    with pytest.raises(TypeError, match="register\\(item, name=...\\)"):
        reg.register(lambda: 3)


def test_iteration_follows_registration_order() -> None:
    reg = Registry[str]("word", name_of=str, items=("zebra", "apple"))
    reg.register("mango")
    assert list(reg) == ["zebra", "apple", "mango"]
    assert reg.names() == ("zebra", "apple", "mango")
    assert reg.items()[0] == ("zebra", "zebra")


def test_an_unknown_name_is_an_input_error_naming_the_kind_and_the_known_names() -> None:
    reg = Registry[str]("word", name_of=str, items=("zebra", "apple"), hint="try another")
    with pytest.raises(InputError, match=r"no word 'pear' \(known: apple, zebra\); try another"):
        reg["pear"]
    assert reg.get("pear") is None
    with pytest.raises(InputError, match=r"no word 'x' \(known: none\)"):
        Registry[str]("word")["x"]


def test_a_duplicate_is_refused_naming_what_registered_it_first() -> None:
    reg = _named()

    def hello() -> int:
        return 1

    reg.register(hello)
    with pytest.raises(InputError, match="greeting 'hello' is registered already, by .*hello"):
        reg.register(hello)


def test_same_lets_the_item_already_there_pass_again() -> None:
    reg = Registry[Fn]("greeting", name_of=lambda fn: fn.__name__, same=lambda a, b: a is b)

    def hello() -> int:
        return 1

    reg.register(hello)
    reg.register(hello)

    def other() -> int:
        return 2

    other.__name__ = "hello"
    with pytest.raises(InputError, match="registered already"):
        reg.register(other)


def test_a_miss_runs_the_hook_before_it_refuses() -> None:
    misses: list[str] = []

    def load() -> None:  # as host control loads its entry points, once
        if not misses:
            reg.register("late")
        misses.append("miss")

    reg = Registry[str]("word", name_of=str, on_miss=load)
    assert reg["late"] == "late"
    with pytest.raises(InputError, match="known: late"):
        reg["never"]
    assert len(misses) == 2


def test_unregister_takes_the_item_out() -> None:
    reg = Registry[str]("word", name_of=str, items=("a",))
    assert reg.unregister("a") == "a"
    assert not reg
    with pytest.raises(InputError, match="no word 'a'"):
        reg.unregister("a")
