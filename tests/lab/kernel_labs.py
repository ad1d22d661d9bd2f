"""The kernels of the matrix, the debug lab and the mutants, for the tests that boot a lab on one
(and the opt-in of every test that boots a lab of its own: the middlebox lab's too).

Each such test boots two guests of its own on a kernel other than the default
(minutes under TCG, more on the debug kernel): .ci/run leaves them out.  They
run when ``HIL_LAB_KERNEL_TESTS=1`` is set (by hand, before a kernel change) and the
kernel is cached (``hil lab kernel --source ...`` / ``--debug``); else they
skip saying which of the two is missing.  ``HIL_LAB_MATRIX_SOURCE`` names the
matrix's other source (default ``6.12``; a tarball path works too).  A mutant's
kernel (bench/mutants/) is built from the cached default one when needed (about
20 s, docs/mutation.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import siw_faults

from hil.errors import HilError
from hil.lab import kernel, kernel_source

OPT_IN = "HIL_LAB_KERNEL_TESTS"


def opted_in(doc: str, what: str = "on another kernel") -> None:
    """Skip unless ``HIL_LAB_KERNEL_TESTS=1``, naming ``doc`` (where the test's lab is told)
    and ``what`` lab the test boots."""
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(
            f"boots a lab of its own {what} (minutes): .ci/run leaves it out; "
            f"run it with {OPT_IN}=1 ({doc})"
        )


def cached_image(source_spec: str | None, debug: bool) -> Path:
    """The cached bzImage of ``source_spec`` (default 6.1) and flavour, or skip saying why."""
    opted_in("docs/lab-kernel.md, 'Kernel matrix and debug lab'")
    build = f"hil lab kernel{f' --source {source_spec}' if source_spec else ''}"
    build += " --debug" if debug else ""
    try:
        source = kernel_source.find_source(spec=source_spec)
    except HilError as e:
        pytest.skip(f"{e}; then `{build}`")
    image = kernel.cached_kernel(source=source, debug=debug)
    if image is None:
        pytest.skip(f"the kernel is not built: `{build}` (15-40 min on 2 cores)")
    return image


def matrix_source() -> str:
    """The matrix's other kernel source (``HIL_LAB_MATRIX_SOURCE``, default 6.12)."""
    return os.environ.get("HIL_LAB_MATRIX_SOURCE", "6.12")


def mutant_image(name: str) -> Path:
    """The bzImage of mutant ``name`` of bench/mutants/, built from the cached default
    kernel's tree when not cached; skip saying why when not opted in or no default kernel."""
    opted_in("docs/mutation.md, 'One mutant through hil cm run'")
    if kernel.cached_kernel() is None:
        pytest.skip("the lab kernel is not built: `hil lab kernel` (8-15 min on 2 cores)")
    try:
        return siw_faults.build(name)
    except HilError as e:  # a stale patch or a failed make: the mutant is not checked
        pytest.fail(f"mutant {name}'s kernel did not build: {e}")
