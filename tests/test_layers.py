"""The import graph of ``hil``: the layers point down, no cycle anywhere, the judge stands alone.

Every import counts: module level, under ``if TYPE_CHECKING:`` and inside
functions, since each is a dependency for a reader and for the next change.
A package's ``__init__`` is a node of its own: importing ``hil.x.y`` from
outside ``hil.x`` runs ``hil.x``'s ``__init__`` first, and ``from hil.x import
y`` reads the package ``hil.x`` even from inside it (on a package still
initialising, only the ``sys.modules`` fallback of PEP 451's import system makes
that work).  The graph is read from the source with ``ast``; nothing is
imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

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
    "wire",
    "peer",  # hil/peer: scenarios as data and the fuzzer's engine, for run, plugin and cli
    "run",  # hil/run: a pair run and its tests, which capture and judge the wire
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


def _outer_packages(module: str, name: str) -> Iterator[str]:
    """The packages whose ``__init__`` importing ``name`` runs from ``module``.

    Those holding ``module`` itself have run before it (Python imports a
    module's parents first), so only the others count.
    """
    parts = name.split(".")
    for i in range(2, len(parts)):
        package = ".".join(parts[:i])
        if not module.startswith(package + "."):
            yield package


def _named(module: str, package: str, node: ast.stmt) -> list[str]:
    """The hil names one import statement of ``module`` (in ``package``) reads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*up, *([base] if base else [])])
    # "from hil.cm import steps" imports the module hil.cm.steps, and reads the package hil.cm.
    return [base, *(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES)]


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every hil module ``module`` imports, wherever the import statement is."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.stmt):
            continue
        for name in _named(module, package, node):
            if name == "hil" or name.startswith("hil."):
                yield _resolve(name)
                yield from _outer_packages(module, _resolve(name))


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


def test_a_package_init_is_a_node() -> None:
    # hil/ssh/pool.py: "from hil.inventory.model import ..." runs hil/inventory/__init__.py.
    assert {"hil.inventory", "hil.inventory.model"} <= set(GRAPH["hil.ssh.pool"])


def _tangles() -> list[set[str]]:
    """The strongly connected parts of GRAPH with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        for m in GRAPH[n]:
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in stack:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            part = set(stack[stack.index(n) :])
            del stack[stack.index(n) :]
            if len(part) > 1:
                found.append(part)

    for n in sorted(GRAPH):
        if n not in index:
            visit(n)
    return found


def test_no_cycle() -> None:
    rings = [(" -> ".join(_cycle(part) or []), len(part)) for part in _tangles()]
    cycles = [f"{ring} (a ring of {size} modules)" for ring, size in rings]
    assert not cycles, "\n".join(cycles)


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


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_agent_protocol_is_one_stdlib_package_both_ends_import() -> None:
    # The zipapp ships hil/agent/remote and hil/agent/protocol alone (hil/agent/build.py),
    # to a host's python with the stdlib and pyroute2: neither may import more of hil.
    shipped = ("hil.agent.remote", "hil.agent.protocol")
    bad = [
        f"{m} imports {d}"
        for m in GRAPH
        for d in GRAPH[m]
        if (_under(m, "hil.agent.protocol") and not _under(d, "hil.agent.protocol"))
        or (any(_under(m, s) for s in shipped) and not any(_under(d, s) for s in shipped))
        # The controller speaks the protocol; the agent's own code is the host's.
        or (_under(d, "hil.agent.remote") and not _under(m, "hil.agent.remote"))
    ]
    assert not bad, "\n".join(bad)


def test_the_pytest_plugin_reports_only_through_observers() -> None:
    # The report is an observer of runs and tests (hil/run/observer.py) and a pytest plugin
    # of its own (hil-report in pytest11); the hil plugin neither imports nor loads it.
    bad = [
        f"{m} imports {d}"
        for m in GRAPH
        if _under(m, "hil.plugin")
        for d in GRAPH[m]
        if _under(d, "hil.report")
    ]
    named = [
        str(path.relative_to(HIL.parent))
        for module, path in MODULES.items()
        if _under(module, "hil.plugin") and '"hil.report' in path.read_text()
    ]
    assert not bad and not named, bad + named
