"""``hil cm run close`` on the rst-close mutant: exit 4, the RST named by the wire judge.

Two guests of its own boot the lab kernel patched with
bench/mutants/rst-close.patch (siw closes every connection with a TCP RST
instead of a FIN; the CM events are unchanged, so the contract holds and
only the wire rule ``orderly-close-is-fin`` can tell): ``hil cm run close``
must exit 4 (a rule violated, hil/cli/cm_cmd.py) naming that rule and the
RST, in its text and in its JSON (``ok`` false, the failure in
``failures``).  Not in .ci/run (kernel_labs.py): a build of about 20 s once,
a boot of about 20 s, two closes of about 20-35 s (docs/mutation.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_labs import mutant_image
from vlab import VirtualLab, booted_lab

pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]

CM_TIMEOUT = 600.0  # a TCG pair: setup, agents warm-up, one close
VIOLATION = 4  # hil's exit code for a rule violated (hil --help)
RULE = "orderly-close-is-fin"
# The rule's words for this close (hil/wire/rules.py), as both runs on the mutant's lab
# printed them on 2026-12-05.
BROKEN = "[orderly-close-is-fin] fail: 1 of 1 broken"
RST = "FIN from no side, 1 RST, 0 TERMINATE"


@pytest.fixture(scope="module")
def rst_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    with booted_lab(pytestconfig, mutant_image("rst-close")) as lab:
        yield lab


def _cm_run_close(lab: VirtualLab, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hil", "--inventory", str(lab.inventory.path)]
    argv += ["--store", str(store), "cm", "run", "close", "--pair", lab.pair.name, *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=CM_TIMEOUT, check=False)


def test_the_close_exits_4_naming_the_rst(rst_lab: VirtualLab, tmp_path: Path) -> None:
    out = _cm_run_close(rst_lab, tmp_path / "store.db")
    assert out.returncode == VIOLATION, out.stdout[-3000:] + out.stderr[-3000:]
    assert BROKEN in out.stdout and RST in out.stdout, out.stdout
    assert "contract PASSED" in out.stdout, out.stdout  # the events are right: only the wire


def test_the_json_says_not_ok_with_the_rst_among_the_failures(
    rst_lab: VirtualLab, tmp_path: Path
) -> None:
    out = _cm_run_close(rst_lab, tmp_path / "store.db", "--json")
    assert out.returncode == VIOLATION, out.stdout[-3000:] + out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and doc["outcome"] == "failed", doc["failures"]
    assert not doc["lab_errors"], doc["lab_errors"]
    assert doc["verdict"]["ok"] is True, doc["verdict"]
    failed = {r["rule"] for r in doc["wire"]["results"] if r["outcome"]["status"] == "fail"}
    assert failed == {RULE}, failed
    (failure,) = doc["failures"]
    assert BROKEN in failure and RST in failure, failure
