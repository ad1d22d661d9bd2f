"""A revert's window-widening patch, and the two kernels it makes: revert+widen, fixed+widen.

``widen/<fix>.patch`` (the mutant format: hil/lab/patched.py) holds a race's
window open in the kernel when a test turns it on (hil/cm/regressions/widen.py,
docs/regressions.md).  It is built twice, the same diff each time: on top of
the fix's revert (:func:`widened`: the test must fail there) and on the fixed
kernel alone (:func:`fixed_widened`: the test must pass there, its window
reached: the proof that the failure is the missing fix's, not the widening's).
Both are built on the kernel the widening's ``Kernel:`` header names (a bug the
production kernel shows, an oops, needs no debug kernel).  A fix that removed
the code its widening holds open has no fixed+widen kernel (``Fixed-kernel:
none ...``): its test's fixed run is on the plain kernel of the revert's tree.  Kept apart from
:mod:`run` so it can be tested without a lab (tests/bench/test_reverts_widening.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hil.errors import InputError
from hil.lab import patched

WIDEN = Path(__file__).resolve().parent / "widen"


def widening(revert: patched.Patch, where: Path = WIDEN) -> patched.Patch | None:
    """``revert``'s widening patch (``where/<name>.patch``), or None when it has none."""
    path = where / f"{revert.name}.patch"
    if not path.is_file():
        return None
    w = patched.read_patch(path)
    if w.killed_by != revert.killed_by:
        raise InputError(
            f"widening {path}: Killed-by {list(map(str, w.killed_by))} is not its revert's "
            f"{list(map(str, revert.killed_by))}: the same test must run on both kernels"
        )
    return w


def _on_kernel_of(p: patched.Patch, w: patched.Patch) -> tuple[tuple[str, str], ...]:
    """``p``'s header fields with the widening's ``Kernel:`` in place of its own."""
    kernel = [kv for kv in w.extra if kv[0] == "kernel"]
    return tuple(kv for kv in p.extra if kv[0] != "kernel") + tuple(kernel)


def widened(revert: patched.Patch, w: patched.Patch) -> patched.Patch:
    """The revert kernel with its window widened: the revert's diff, then the widening's
    (``patch`` applies a second diff of a file to the first one's result)."""
    return dataclasses.replace(
        revert,
        name=f"{revert.name}-widened",
        diff=revert.diff + w.diff,
        files=tuple(dict.fromkeys(revert.files + w.files)),
        extra=_on_kernel_of(revert, w),
    )


def fixed_widened(w: patched.Patch) -> patched.Patch | None:
    """The fixed kernel with the same widening: the widening's diff alone; None when the
    widening says the fixed kernel has nothing to widen (``Fixed-kernel: none``)."""
    if (w.field("fixed-kernel") or "").startswith("none"):
        return None
    return dataclasses.replace(w, name=f"widen-{w.name}")
