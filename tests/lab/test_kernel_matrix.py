"""The kernel matrix: a lab on the other source's kernel (default linux-source-6.12).

Two guests of its own boot that kernel (``hil lab up --kernel 6.12`` picks
the same cached image); they run it (``uname -r``), have siw, and a CM
connect sequence between them passes (``hil cm run connect``: connect,
data, disconnect, judged by the contract).  The suites on it run through
``ci/nightly --kernels 6.1,6.12``.  Not in .ci/run (kernel_labs.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from kernel_labs import cached_image, matrix_source
from vlab import VirtualLab, booted_lab

from hil.lab import kernel_source
from hil.ssh import SSHPool

pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]

CM_TIMEOUT = 600.0


@pytest.fixture(scope="module")
def matrix_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    with booted_lab(pytestconfig, cached_image(matrix_source(), debug=False)) as lab:
        yield lab


def test_the_guests_run_the_other_kernel_with_siw(matrix_lab: VirtualLab) -> None:
    series = kernel_source.find_source(spec=matrix_source()).series
    with SSHPool(matrix_lab.inventory, ssh_config=None) as pool:
        for name in matrix_lab.inventory.hosts:
            session = pool.get(name)
            release = session.run(["uname", "-r"], timeout=60).stdout.strip()
            assert release.startswith(series + "."), f"{name} runs {release}, not {series}"
            links = session.run(["rdma", "link", "show"], timeout=60).stdout
            assert "siw" in links, f"{name}: no siw device: {links!r}"


def test_a_connect_sequence_passes_on_it(matrix_lab: VirtualLab) -> None:
    argv = [sys.executable, "-m", "hil", "--inventory", str(matrix_lab.inventory.path)]
    out = subprocess.run(
        [*argv, "cm", "run", "connect", "--json"],
        capture_output=True,
        text=True,
        timeout=CM_TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
