"""A lab directory's lock and files: what ``up``, ``down`` and ``status`` hold and clean.

One lab per directory: the lock file serialises commands on it.  The lab's
files are recognised by name (:data:`_OURS`), so a teardown removes them and
nothing else found in the directory.
"""

from __future__ import annotations

import fcntl
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hil.errors import HilError, LabError
from hil.lab import guests, network
from hil.lab.kernel import Progress
from hil.lab.state import boot_id, load

LOCK_FILE = ".lock"

# The files a lab makes in its directory (see bootfiles, guests, state,
# inventory): per guest NAME.d, .log, .pid and .qmp, whatever lab id the name
# carries (the directory's id now, or none for a lab named before ids).
_OURS = re.compile(
    rf"(?:{network.GUEST_NAME.pattern})\.(d|log|pid|qmp)"
    r"|lab\.(json|tmp)|inventory\.(yaml|tmp)|known_hosts|id_ed25519(\.pub)?"
)


@contextmanager
def locked(lab_dir: Path) -> Iterator[None]:
    """Hold ``lab_dir``'s lock (made when missing); LabError at once when another command has it."""
    lab_dir.mkdir(parents=True, exist_ok=True)
    with open(lab_dir / LOCK_FILE, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(
                f"{lab_dir}: another `hil lab` command is working on this lab; "
                "wait for it, or use another --dir"
            ) from None
        yield


def teardown(lab_dir: Path, say: Progress, keep: tuple[str, ...] = ()) -> None:
    """Stop every recorded guest (if this boot's) and remove the lab's files but ``keep``."""
    try:
        state = load(lab_dir)
    except LabError:
        state = None  # unreadable state: nothing we can safely signal
    errors = []
    if state is not None and state.boot_id == boot_id():
        for g in state.guests:
            try:
                guests.stop(g)
            except HilError as e:
                errors.append(str(e))
        if state.guests:
            say(f"lab: stopped {', '.join(g.name for g in state.guests)}")
    _remove_files(lab_dir, {LOCK_FILE, *keep})
    if errors:
        raise LabError(f"{lab_dir}: could not stop every guest: " + "; ".join(errors))


def _remove_files(lab_dir: Path, keep: set[str]) -> None:
    """Remove what the lab made in ``lab_dir``, and nothing else found there."""
    for entry in lab_dir.iterdir():
        if entry.name in keep or not _OURS.fullmatch(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_dir(lab_dir: Path) -> None:
    """Remove the lock file and ``lab_dir`` itself, unless someone put other files there."""
    (lab_dir / LOCK_FILE).unlink(missing_ok=True)
    try:
        lab_dir.rmdir()
    except OSError:
        pass  # someone put other files there: leave them and the dir
