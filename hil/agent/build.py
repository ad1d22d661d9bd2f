"""Build the agent zipapp: one file with the agent code and the packages it needs.

The archive holds ``hil_agent/`` (this package's ``remote/``, the agent, and
``protocol/``, the messages both ends import, under an ``__init__.py`` of its
own: ours imports the controller's side), every bundled pure-Python package
(pyroute2, copied from the controller's own environment) and a
``__main__.py`` (``zipmain.py``), so ``python3 agent.pyz`` runs it on any
host with a python3 and nothing installed; it unpacks itself beside the
archive once, so that the host's Python caches its bytecode.  Its bytes
depend only on the sources: entries are sorted and carry a fixed timestamp
and mode, so its sha256 names it, on the controller
(``~/.cache/hil/agent/<sha256>.pyz``) and on the hosts.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from hil.errors import AgentError

# Pure-Python packages the agent imports besides the stdlib.
BUNDLED = ("pyroute2",)
AGENT_PACKAGE = "hil_agent"
# What of this package the agent runs: remote/ imports protocol/ as ..protocol.
SHIPPED = ("remote", "protocol")
# hil_agent/__init__.py: the package only holds the two, and must not import paramiko.
AGENT_INIT = b'"""The hil agent: remote/ runs on this host, protocol/ declares its messages."""\n'
# The zipapp's __main__.py: version check, then run from an unpacked, compiled copy.
MAIN = (Path(__file__).parent / "zipmain.py").read_bytes()
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


@dataclass(frozen=True)
class Bundle:
    """A built agent zipapp: where it is on the controller, its hash and size."""

    path: Path
    sha256: str
    size: int


def cache_dir() -> Path:
    """Where built agents are kept on the controller (XDG cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hil" / "agent"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise AgentError(
            "controller",
            f"cannot bundle {name} into the agent: it is not installed in this "
            "environment (run ci/install)",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(root: Path, prefix: str) -> list[tuple[str, Path]]:
    """(archive name, file) for every source file under ``root``, sans caches."""
    found = []
    for path in root.rglob("*"):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in (".pyc", ".pyo")
        ):
            found.append((f"{prefix}/{path.relative_to(root).as_posix()}", path))
    return found


def _entries() -> list[tuple[str, bytes]]:
    here = Path(__file__).parent
    files = [f for sub in SHIPPED for f in _sources(here / sub, f"{AGENT_PACKAGE}/{sub}")]
    for name in BUNDLED:
        files += _sources(_package_dir(name), name)
    entries = [(arcname, path.read_bytes()) for arcname, path in files]
    entries += [("__main__.py", MAIN), (f"{AGENT_PACKAGE}/__init__.py", AGENT_INIT)]
    return sorted(entries)


def archive_bytes() -> bytes:
    """The zipapp's bytes: sorted entries, fixed timestamps and modes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for arcname, data in _entries():
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=9)
    return buf.getvalue()


@functools.cache
def build() -> Bundle:
    """Build the agent (once per process) and keep it in the local cache."""
    data = archive_bytes()
    digest = hashlib.sha256(data).hexdigest()
    path = cache_dir() / f"{digest}.pyz"
    if not path.is_file() or path.stat().st_size != len(data):
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own per writer (threads of one process build at once too);
        # the rename is atomic, so a concurrent builder never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{digest}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    return Bundle(path=path, sha256=digest, size=len(data))
