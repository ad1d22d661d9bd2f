"""Loading a bench script (bench/ is no package) as a module for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str, relpath: str) -> ModuleType:
    """``bench/relpath`` as module ``name``, registered in sys.modules first: a
    dataclass looks its module up while it is built.  bench/ goes on the path, as
    for a script run there (its helpers: benchmain, labrun)."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / relpath)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
