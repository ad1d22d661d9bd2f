"""The kernels of the matrix and the debug lab, for the tests that boot a lab on one.

Each such test boots two guests of its own on a kernel other than the default
(minutes under TCG, more on the debug kernel): .ci/run leaves them out.  They
run when ``HIL_LAB_KERNEL_TESTS=1`` is set (by hand, before a kernel change) and the
kernel is cached (``hil lab kernel --source ...`` / ``--debug``); else they
skip saying which of the two is missing.  ``HIL_LAB_MATRIX_SOURCE`` names the
matrix's other source (default ``6.12``; a tarball path works too).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hil.errors import HilError
from hil.lab import kernel, kernel_source

OPT_IN = "HIL_LAB_KERNEL_TESTS"


def cached_image(source_spec: str | None, debug: bool) -> Path:
    """The cached bzImage of ``source_spec`` (default 6.1) and flavour, or skip saying why."""
    if os.environ.get(OPT_IN) != "1":
        pytest.skip(
            f"boots a lab of its own on another kernel (minutes): .ci/run leaves it out; "
            f"run it with {OPT_IN}=1 (docs/lab-kernel.md, 'Kernel matrix and debug lab')"
        )
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
