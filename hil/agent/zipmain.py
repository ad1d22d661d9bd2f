"""The agent zipapp's ``__main__.py`` (hil.agent.build puts this file's text there).

It runs on the host, before anything else of the agent: it checks the python
version, then runs the agent from an unpacked copy of the zipapp beside it,
``DIR/<sha256>/`` next to ``DIR/<sha256>.pyz``.  Python compiles modules
imported from a zip on every start and caches nothing (zipimport writes no
bytecode): pyroute2 alone took 5 s on an idle TCG guest and over 30 s on a
loaded one.  From a directory, Python writes ``__pycache__`` once, so every
later agent of the same build on that host starts warm.  The copy is named
by the archive's content hash and made under a temporary name, then renamed,
so two agents starting at once never see half of one; where it cannot be
made (a read-only or full disk), the agent runs from the zip as before.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import zipfile

if sys.version_info < (3, 9):  # noqa: UP036 - runs on the host's python, any version
    sys.exit("the hil agent needs python >= 3.9 (pyroute2); this is " + sys.version.split()[0])


def unpacked(archive: str) -> str | None:
    """The directory holding ``archive``'s files, made now if missing; None if impossible."""
    if not archive.endswith(".pyz"):
        return None
    target = archive[: -len(".pyz")]
    if os.path.isfile(os.path.join(target, "__main__.py")):
        return target
    tmp = f"{target}.tmp{os.getpid()}"
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
        os.rename(tmp, target)
    except OSError:
        # Another agent renamed its copy first (the target exists now), or
        # the disk refuses: either way ours goes, and what exists is used.
        shutil.rmtree(tmp, ignore_errors=True)
    return target if os.path.isfile(os.path.join(target, "__main__.py")) else None


def run() -> None:
    """Put the unpacked copy (or else the zip) first on sys.path and start the agent."""
    where = unpacked(os.path.abspath(sys.argv[0]))
    if where is not None:
        sys.path[0] = where
    # hil_agent exists only inside the zipapp (hil.agent's remote/ and protocol/ here).
    importlib.import_module("hil_agent.remote.main").main()


if __name__ == "__main__":
    run()
