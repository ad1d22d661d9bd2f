"""Two virtual labs on one machine are independent (marker ``lab``).

Lab A is the session's lab (``virtual_lab``); this module boots lab B in a
directory of its own while A runs, and stops it at the end, also on failure.
Every host and pair name carries its lab's id, so with one reservation store
shared by both labs (the default store, as a developer and a CI job on one
machine share it) a lease on A's pair leaves B's pair free, and a CM
sequence runs on each lab's pair at the same time.

Cost: one more two-guest boot (TCG: ~20-60 s) and two ``hil cm run connect``
side by side (see docs/virtual-lab.md, "Tests").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vlab import VirtualLab, booted_lab

from hil.lab import network
from hil.reservation import Claim, Holder, open_store, reserve
from hil.ssh import SSHPool

# A's lab may be booted (and the kernel built, ~15 min on 2 cores) by this module.
pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]

CM_TIMEOUT = 600.0  # one connect sequence with four TCG guests sharing two cores
# The agent's handshake with four guests and a third lab (ci/suites') on two cores: 30 s,
# the default bound, was once too short in .ci/run (stop 44); what --timeout-agent is for.
AGENT_S = "120"
HOLDER = "tests/lab: lab A's run"


@pytest.fixture(scope="module")
def lab_b(
    pytestconfig: pytest.Config,
    virtual_lab: VirtualLab,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[VirtualLab]:
    """A second lab, up while the session's lab (A) runs; down at the module's end.

    It boots a copy of A's kernel given as ``--kernel`` would give it: what a
    fault kernel's lab does, without building one.  The copy's directory has
    the name of A's kernel directory, so the machine's cached KVM probe answer
    (per kernel directory) applies to it, as it does to the same kernel.
    """
    kernel = Path(virtual_lab.state.kernel)
    copy = tmp_path_factory.mktemp("kernel") / kernel.parent.name / "bzImage"
    copy.parent.mkdir()
    shutil.copyfile(kernel, copy)
    with booted_lab(pytestconfig, image=copy) as lab:
        yield lab


@pytest.fixture
def default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the default reservation store (no --store, no HIL_STORE) a fresh file, for this
    process and the ``hil`` commands it runs; returns its path."""
    monkeypatch.delenv("HIL_STORE", raising=False)
    monkeypatch.delenv("HIL_INVENTORY", raising=False)
    # The default store lives under XDG_STATE_HOME: a private one keeps the
    # user's own store (and its leases) out of the test.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "hil" / "reservations.db"


def lab_status(lab: VirtualLab) -> dict[str, Any]:
    """``hil lab status --json`` of ``lab``."""
    out = subprocess.run(
        [sys.executable, "-m", "hil", "lab", "status", "--dir", str(lab.dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    status: dict[str, Any] = json.loads(out.stdout)
    return status


def cm_run(lab: VirtualLab, *select: str) -> subprocess.Popen[str]:
    """Start ``hil --inventory LAB cm run connect SELECT --json`` on the default store."""
    argv = [
        sys.executable,
        "-m",
        "hil",
        "--inventory",
        str(lab.inventory.path),
        "cm",
        "run",
        "connect",
        *select,
        "--timeout-agent",
        AGENT_S,
        "--json",
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = CM_TIMEOUT) -> tuple[int, str, str]:
    """Wait for a started ``hil`` command (killed at ``timeout``); its status, stdout, stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args!r} ran over {timeout:.0f} s:\n{err}")
    return proc.returncode, out, err


def test_two_labs_run_at_once_and_share_no_name(virtual_lab: VirtualLab, lab_b: VirtualLab) -> None:
    status = {lab.dir: lab_status(lab) for lab in (virtual_lab, lab_b)}
    assert all(s["healthy"] for s in status.values()), status
    ids = [status[lab.dir]["lab_id"] for lab in (virtual_lab, lab_b)]
    assert ids == [network.lab_id(virtual_lab.dir), network.lab_id(lab_b.dir)]
    assert ids[0] != ids[1]
    for lab, lab_id in zip((virtual_lab, lab_b), ids, strict=True):
        names = [*lab.inventory.hosts, *lab.inventory.links]
        assert all(n.startswith(f"{lab_id}-") for n in names), names
        assert [g["name"] for g in status[lab.dir]["guests"]] == list(lab.inventory.hosts)
    assert not set(virtual_lab.inventory.hosts) & set(lab_b.inventory.hosts)
    assert virtual_lab.pair.name != lab_b.pair.name
    # The guests call themselves what the inventory calls them (A's: test_virtual_lab).
    with SSHPool(lab_b.inventory, ssh_config=None) as pool:
        for name in lab_b.inventory.hosts:
            assert pool.get(name).run(["hostname"], timeout=60).stdout.strip() == name


def test_lab_b_boots_the_kernel_it_was_given(virtual_lab: VirtualLab, lab_b: VirtualLab) -> None:
    status = lab_status(lab_b)
    given = lab_b.state.kernel
    assert Path(given).parent.parent != Path(virtual_lab.state.kernel).parent.parent
    assert (status["kernel"], status["kernel_default"]) == (given, False)
    assert lab_status(virtual_lab)["kernel_default"] is True
    for guest in lab_b.state.guests:
        assert given.encode() in Path(f"/proc/{guest.pid}/cmdline").read_bytes().split(b"\0")


def test_a_lease_on_lab_a_leaves_lab_b_free_and_each_runs_a_sequence(
    virtual_lab: VirtualLab, lab_b: VirtualLab, default_store: Path
) -> None:
    a, b = virtual_lab.pair, lab_b.pair
    with open_store(None) as store:
        lease = reserve(
            store,
            [Claim(a.name, (a.host_a.name, a.host_b.name))],
            Holder.current(HOLDER),
            ttl=CM_TIMEOUT * 2,
        )
        try:
            # The store is shared: a second taker of A's pair is refused, naming us, while
            # B's pair is free: a sequence on each lab's pair, side by side, A's under the
            # lease we hold, B's under one it takes from the same store.  All three at once:
            # the refusal needs only our lease, held throughout (one process start less).
            taker = cm_run(virtual_lab, "--pair", a.name)
            runs = [cm_run(virtual_lab, "--lease", lease.id), cm_run(lab_b, "--pair", b.name)]
            code, _, err = finish(taker)
            results = [finish(p) for p in runs]
        finally:
            store.release(lease.id)
        assert code == 2 and HOLDER in err and lease.id in err, err
        assert store.leases() == []  # B's run released what it took
    assert default_store.exists()
    for (code, out, err), pair in zip(results, (a, b), strict=True):
        doc = json.loads(out) if out.strip().startswith("{") else {}
        # What failed is in the JSON (its stderr names only the pair): say it.
        why = "\n".join(doc.get("failures", ()))
        assert code == 0, f"{pair.name}: exit {code}\n{err}\n{why}"
        assert doc["lease"]["pair"] == pair.name
        assert doc["verdict"]["ok"], doc["verdict"]
        established = {e["side"] for e in doc["timeline"]["events"] if e["type"] == "ESTABLISHED"}
        assert established == {"a", "b"}, doc["timeline"]["events"]
    assert json.loads(results[0][1])["lease"]["lease"] == lease.id
