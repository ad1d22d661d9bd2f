"""The import graph of ``hil``: the layers point down, hil/cm has no cycle, the judge stands alone.

Every import counts: module level, under ``if TYPE_CHECKING:`` and inside
functions, since each is a dependency for a reader and for the next change.
The graph is read from the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

HIL = Path(__file__).resolve().parent.parent / "hil"

# The packages of hil, lowest first: a module may import its own package and
# the ones before it, never one after it.
LAYERS = [
    "tools",  # hil/tools.py: the external commands, for everyone
    "errors",
    "registry",  # hil/registry.py: the one registry type of every extension point
    "timeouts",  # hil/timeouts.py: the timeout layers, their defaults and messages
    "inventory",
    "reservation",
    "ssh",
    "agent",
    "judge",
    "host",
    "cm",
    "run",
    "wire",
    "report",
    "lab",
    "plugin",
    "cli",
    "__main__",
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(HIL.rglob("*.py")):
        parts = path.relative_to(HIL.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str:
    """The module ``name`` is, or the nearest package holding it (an attribute of it)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every hil module ``module`` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            # "from hil.cm import steps" imports the module hil.cm.steps.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        for name in names:
            if name == "hil" or name.startswith("hil."):
                yield _resolve(name)


GRAPH = {m: sorted(set(_imports(m, p)) - {m}) for m, p in MODULES.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) == 1:  # hil itself: its docstring and version
        return None
    top = parts[1]
    assert top in LAYERS, f"{module}: package {top} is not in LAYERS (tests/test_layers.py)"
    return top


def _cycle(nodes: set[str]) -> list[str] | None:
    """One import cycle among ``nodes``, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in GRAPH[n]:
            if m not in nodes:
                continue
            if state.get(m) == 1:
                return [*path[path.index(m) :], m]
            if m not in state and (found := visit(m)):
                return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(nodes):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_the_graph_is_read() -> None:
    assert "hil.judge.contract" in GRAPH["hil.cm.session"] or any(
        "hil.judge" in m for m in GRAPH["hil.cm.session"]
    )
    assert "hil.cm.recording" in GRAPH["hil.cm.steps"]


@pytest.mark.parametrize("package", ["hil.cm", "hil.judge", "hil.host", "hil.reservation"])
def test_no_cycle_inside(package: str) -> None:
    nodes = {m for m in MODULES if m == package or m.startswith(package + ".")}
    assert _cycle(nodes) is None, " -> ".join(_cycle(nodes) or [])


def test_the_judge_needs_nothing_but_errors_and_the_registry() -> None:
    bad = {
        (m, d)
        for m in GRAPH
        if m.startswith("hil.judge")
        for d in GRAPH[m]
        if d not in ("hil.errors", "hil.registry") and not d.startswith("hil.judge")
    }
    assert not bad, sorted(bad)


def test_no_import_points_up_a_layer() -> None:
    bad = []
    for module, deps in GRAPH.items():
        here = _layer(module)
        for dep in deps:
            there = _layer(dep)
            if here is None or there is None:
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                bad.append(f"{module} ({here}) imports {dep} ({there})")
    assert not bad, "\n".join(bad)
