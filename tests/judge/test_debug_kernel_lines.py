"""The kernel-log check fails on each debug checker's report (the debug lab's kernel).

The lines are the first lines of real reports (formats from mm/kasan/report.c,
kernel/locking/lockdep.c, mm/kmemleak.c, lib/refcount.c, lib/debugobjects.c);
the debug lab provokes the real ones in tests/lab/test_debug_lab.py.
"""

from __future__ import annotations

import pytest

from hil.judge.expectations import BAD_KERNEL_LINE


@pytest.mark.parametrize(
    "line",
    [
        "BUG: KASAN: slab-use-after-free in siw_cm_work_handler+0x9c/0x1f30",
        "WARNING: possible circular locking dependency detected",
        "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
        "kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
        "refcount_t: underflow; use-after-free.",
        "refcount_t: decrement hit 0; leaking memory.",
        "ODEBUG: free active (active state 0) object: 0000 object type: work_struct hint: x",
    ],
)
def test_a_debug_checkers_report_fails_the_check(line: str) -> None:
    assert BAD_KERNEL_LINE.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "kmemleak: Kernel memory leak detector initialized (mem pool available: 15739)",
        "siw: device registration error -23",
    ],
)
def test_a_debug_kernels_ordinary_lines_do_not(line: str) -> None:
    assert not BAD_KERNEL_LINE.search(line)
