"""``hil host`` and ``hil link`` as a user runs them: the real command against the netns lab.

Each call is a separate ``python -m hil`` process with its own SSH sessions
and agents, as from a shell; messages and exit codes are checked as printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from netnslab.lab import NetnsLab

from hil.reservation import Claim, Holder, open_store

pytestmark = pytest.mark.netns

ROOT = Path(__file__).resolve().parents[2]
LINK = "ns0-ns1"
COMMAND_PULL = """\
      - mode: command
        controller: ns0
        down: [ip, link, set, dev, "{dev}", down]
        up: [ip, link, set, dev, "{dev}", up]
        vars: {dev: data0}
"""


@pytest.fixture
def env(netns_lab: NetnsLab, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The lab's inventory plus a command pull (ns0 as its own switch), and an empty store."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(netns_lab.inventory_path.read_text() + COMMAND_PULL)
    store = tmp_path / "reservations.db"
    yield inventory, store
    # Whatever a failed test left pulled or configured goes back.
    for host in ("ns0", "ns1"):
        hil(inventory, store, "host", "restore", host, "--force")


def hil(
    inventory: Path, store: Path, *argv: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``hil --inventory I --store S ARGV...``."""
    cmd = [sys.executable, "-m", "hil", "--inventory", str(inventory), "--store", str(store), *argv]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed; it must be one line and no traceback."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hil: error: "), done.stderr
    return lines[0]


def test_host_info_shows_kernel_links_addresses_and_rdma(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "info", "ns0", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    data0 = next(li for li in info["links"] if li["name"] == "data0")
    assert "198.18.0.1/24" in data0["addresses"] and data0["carrier"] is True
    assert info["kernel"] and info["rdma"]["available"] is False  # no RDMA in this kernel
    text = hil(*env, "host", "info", "ns0")
    assert text.returncode == 0 and "data0" in text.stdout and "RDMA: unavailable" in text.stdout


def test_host_exec_streams_output_and_exits_with_the_remote_status(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "exec", "ns1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (done.returncode, done.stdout, done.stderr) == (7, "out\n", "err\n")
    assert hil(*env, "host", "exec", "ns1", "--", "true").returncode == 0


def test_host_exec_past_its_timeout_exits_2(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "exec", "--timeout", "1", "ns0", "--", "sleep", "30")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # The SSH layer may warn that it had to signal the command; the error is the last line.
    assert done.stderr.splitlines()[-1].startswith("hil: error: ns0: sleep 30 still ran after 1s")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["host", "info", "nope"], "no host 'nope' (hosts: ns0, ns1)"),
        (["host", "restore", "nope"], "no host 'nope' (hosts: ns0, ns1)"),
        (["host", "setup", "nope"], "no pair 'nope' (pairs: ns0-ns1)"),
        (["link", "pull", "nope"], "no link 'nope' (links: ns0-ns1)"),
        (["link", "pull", LINK, "--mode", "carrier"], "offers no 'carrier' pull"),
        (["link", "pull", LINK, "--mode", "unplug"], "unknown pull mode 'unplug'"),
        (["host", "exec", "ns0"], "give the command after --"),
        (["host", "exec", "ns0", "--timeout", "1", "--", "true"], "--timeout after HOST"),
    ],
)
def test_unknown_names_give_one_line_and_exit_1(
    env: tuple[Path, Path], argv: list[str], message: str
) -> None:
    done = hil(*env, *argv)
    assert done.returncode == 1
    assert message in one_line_error(done)


def test_link_pull_and_restore_by_hand(env: tuple[Path, Path], netns_lab: NetnsLab) -> None:
    done = hil(*env, "link", "pull", LINK, "--mode", "admin")
    assert done.returncode == 0, done.stderr
    state = json.loads(hil(*env, "link", "state", LINK, "--json").stdout)
    assert state["pulled"] == ["admin"] and state["ends"][0]["up"] is False
    again = hil(*env, "link", "pull", LINK, "--mode", "blackhole")
    assert again.returncode == 1 and "already pulled (admin" in one_line_error(again)
    done = hil(*env, "link", "restore", LINK)
    assert done.returncode == 0 and done.stdout.startswith("undone: ns0: set data0 up")
    assert "not pulled: nothing to restore" in hil(*env, "link", "restore", LINK).stdout
    netns_lab.exec(0, ["ping", "-c", "1", "-w", "5", "198.18.0.2"])


def test_host_restore_undoes_a_command_pull_by_hand(
    env: tuple[Path, Path], netns_lab: NetnsLab
) -> None:
    assert hil(*env, "link", "pull", LINK, "--mode", "command").returncode == 0
    assert "state DOWN" in netns_lab.exec(0, ["ip", "link", "show", "data0"]).stdout
    done = hil(*env, "host", "restore", "ns0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "undone: ns0: run the up command of link ns0-ns1\n"
    assert "state DOWN" not in netns_lab.exec(0, ["ip", "link", "show", "data0"]).stdout
    assert "nothing to restore" in hil(*env, "host", "restore", "ns0").stdout


def test_a_held_pair_needs_its_lease(env: tuple[Path, Path]) -> None:
    with open_store(str(env[1])) as store:
        lease = store.try_acquire([Claim(LINK, ("ns0", "ns1"))], Holder.current("test"), 60)
    assert lease is not None
    busy = hil(*env, "link", "pull", LINK)
    assert busy.returncode == 2 and f"pass --lease {lease.id}" in one_line_error(busy)
    assert hil(*env, "host", "restore", "ns1").returncode == 2
    assert hil(*env, "link", "pull", LINK, "--lease", lease.id).returncode == 0
    assert hil(*env, "link", "restore", LINK, "--lease", lease.id).returncode == 0
    assert hil(*env, "link", "pull", LINK, "--lease", "no-such-lease").returncode == 1


def test_host_setup_reserves_sets_up_and_keeps_the_lease(env: tuple[Path, Path]) -> None:
    done = hil(*env, "host", "setup", LINK, "--no-rdma", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["setup"]["reached"] is True and result["setup"]["b"]["netdev"] == "data0"
    busy = hil(*env, "host", "setup", LINK, "--no-rdma")
    assert busy.returncode == 2 and "held by" in one_line_error(busy)
    assert hil(*env, "release", result["lease"]["lease"]).returncode == 0


def test_host_setup_without_rdma_fails_clearly_and_gives_the_pair_back(
    env: tuple[Path, Path],
) -> None:
    done = hil(*env, "host", "setup", LINK)
    assert done.returncode == 3
    assert "ns0: data0 (port p0): cannot create siw device siw_data0" in one_line_error(done)
    with open_store(str(env[1])) as store:
        assert store.leases() == []
