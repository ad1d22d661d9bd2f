"""The public surface of hil.agent: what other parts of hil import."""

from __future__ import annotations

import dataclasses
import inspect

import hil.agent
from hil.agent import types


def test_exported_names_exist_and_nothing_else_is_advertised() -> None:
    assert sorted(hil.agent.__all__) == sorted(set(hil.agent.__all__))
    for name in hil.agent.__all__:
        assert getattr(hil.agent, name) is not None, name


def test_results_are_frozen_dataclasses() -> None:
    for _, cls in inspect.getmembers(types, inspect.isclass):
        if cls.__module__ == types.__name__:
            assert dataclasses.is_dataclass(cls) and vars(cls)["__dataclass_params__"].frozen, cls


def test_every_typed_method_has_a_docstring() -> None:
    for name, fn in inspect.getmembers(hil.agent.Agent, inspect.isfunction):
        if not name.startswith("_"):
            assert fn.__doc__, name
