"""The declarations (hil/agent/protocol/) against the agent that serves them,
and the package that names them: each public name declared in one module."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import types
import typing
from collections.abc import Callable
from typing import Any

from hil.agent import protocol
from hil.agent.remote import librdmacm, main
from hil.agent.remote.cm import worker


def _assert_takes_and_returns(fn: Callable[..., object], spec: protocol.Spec[Any, Any]) -> None:
    """``fn``'s parameters (but ``timeout``, filled from the request) are the params
    TypedDict's keys, required where it has no default, of the declared types; its
    return annotation is the declared reply."""
    hints = typing.get_type_hints(fn)
    params = {
        n: p for n, p in inspect.signature(fn).parameters.items() if n not in ("self", "timeout")
    }
    params_td: type = spec.params  # a TypedDict class
    declared = protocol.fields(params_td)
    assert set(params) == set(declared), spec
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    assert required == set(spec.params.__required_keys__), spec
    for name in params:
        assert hints[name] == declared[name], (spec, name)
    assert hints["return"] == spec.reply, spec


def test_every_agent_method_is_declared_and_every_declaration_is_served() -> None:
    assert set(main.METHODS) == set(protocol.METHOD_NAMES) == set(protocol.METHODS)
    assert all(spec.name == name for name, spec in protocol.METHODS.items())
    for name, spec in protocol.METHODS.items():
        _assert_takes_and_returns(main.METHODS[name], spec)


def test_every_cm_operation_is_declared_and_every_declaration_is_served() -> None:
    assert set(worker.OPS) == set(protocol.CM_OP_NAMES) == set(protocol.CM_OPS)
    for name, spec in protocol.CM_OPS.items():
        assert spec.name == name
        _assert_takes_and_returns(getattr(worker.Worker, name), spec)


def test_event_types_are_librdmacm_s_in_enum_order() -> None:
    assert librdmacm.EVENT_NAMES == protocol.CM_EVENT_TYPES
    assert protocol.CM_EVENT_TYPES.index("ESTABLISHED") == 9  # RDMA_CM_EVENT_ESTABLISHED
    assert protocol.CM_EVENT_TYPES[-1] == "TIMEWAIT_EXIT"  # 15


def _own_names(module: types.ModuleType) -> set[str]:
    """The public names ``module`` binds itself (classes, functions, assignments)."""
    own: set[str] = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            own.add(node.name)
        elif isinstance(node, ast.Assign):
            own |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    return {n for n in own if not n.startswith("_")}


# The peer's frame codec: imported by module name (protocol/__init__.py says why).
CODECS = ("crc32c", "ddp", "fpdu", "frames", "mpa", "rdmap")


def test_the_package_names_every_declaration_each_from_one_module() -> None:
    modules = [
        importlib.import_module(f"{protocol.__name__}.{m.name}")
        for m in pkgutil.iter_modules(protocol.__path__)
        if m.name not in CODECS
    ]
    exported = [name for m in modules for name in m.__all__]
    assert len(exported) == len(set(exported))  # one place for each name
    for m in modules:
        # The generic Spec's type variables are no declaration.
        assert set(m.__all__) == _own_names(m) - {"P", "R"}, m.__name__
        assert all(getattr(protocol, name) is getattr(m, name) for name in m.__all__)
