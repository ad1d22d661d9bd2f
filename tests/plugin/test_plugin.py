"""The pytest plugin, driven through pytester against a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.reservation import Claim, Holder, open_store

pytest_plugins = ["pytester"]

INVENTORY = """\
hosts:
{hosts}
links:
  pair-1:
    ends: [h1:p0, h2:p0]
    tags: [fast]
  pair-2:
    ends: [h3:p0, h4:p0]
"""

HOST = """\
  h{n}:
    ssh: {{host: 127.0.0.1, port: 22}}
    rnics:
      - {{name: p0, netdev: data0, driver: {driver}, fallback: siw, speed: {speed}}}
"""


@pytest.fixture
def lab(tmp_path: Path) -> dict[str, str]:
    """An inventory of two disjoint siw pairs and a fresh SQLite store."""
    hosts = "".join(
        HOST.format(n=n, driver="siw", speed=25000 if n <= 2 else 10000) for n in range(1, 5)
    )
    inv = tmp_path / "lab.yaml"
    inv.write_text(INVENTORY.format(hosts=hosts))
    return {"inventory": str(inv), "store": str(tmp_path / "store.db")}


def args(lab: dict[str, str], *extra: str) -> list[str]:
    return ["--hil-inventory", lab["inventory"], "--hil-store", lab["store"], *extra]


RECORD_PAIR = """
import os, pytest

def test_pair(hil_pair):
    with open(os.environ["OUT"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + " " + hil_pair.pair.name + "\\n")
"""


def test_reserves_shows_header_and_releases(
    pytester: pytest.Pytester, lab: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("OUT", str(out))
    pytester.makepyfile(RECORD_PAIR)
    result = pytester.runpytest_subprocess(*args(lab, "--hil-pair", "pair-2"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["hil: pair pair-2 (h3:p0 <-> h4:p0) reserved, lease *", "hil: holder *pytest*"]
    )
    assert out.read_text().split() == ["main", "pair-2"]
    store = open_store(lab["store"])
    assert store.leases() == []  # released at session end
    store.close()


def test_require_selects_a_matching_pair(
    pytester: pytest.Pytester, lab: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    pytester.makepyfile(RECORD_PAIR)
    result = pytester.runpytest_subprocess(*args(lab, "--hil-require", "speed>=25000"))
    result.assert_outcomes(passed=1)
    assert (tmp_path / "out").read_text().split()[1] == "pair-1"


def test_marker_skips_with_reason(pytester: pytest.Pytester, lab: dict[str, str]) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hil_requires("driver=iw_cxgb4")
        def test_hw(hil_pair):
            pass

        @pytest.mark.hil_requires("driver=siw", "tag=fast")
        def test_soft(hil_pair):
            pass
        """
    )
    result = pytester.runpytest_subprocess(*args(lab, "--hil-pair", "pair-1", "-rs"))
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*pair pair-1 does not meet driver=iw_cxgb4*"])


def test_no_matching_pair_fails_clearly(pytester: pytest.Pytester, lab: dict[str, str]) -> None:
    pytester.makepyfile("def test_x(hil_pair):\n    pass\n")
    result = pytester.runpytest_subprocess(*args(lab, "--hil-require", "driver=iw_cxgb4"))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*hil: no pair from *: *no pair meets driver=iw_cxgb4*"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_busy_pair_fails_then_waits_in_vain(pytester: pytest.Pytester, lab: dict[str, str]) -> None:
    store = open_store(lab["store"])
    held = store.try_acquire([Claim("pair-1", ("h1", "h2"))], Holder.current(note="other"), 60)
    assert held is not None
    pytester.makepyfile("def test_x(hil_pair):\n    pass\n")
    busy = pytester.runpytest_subprocess(*args(lab, "--hil-pair", "pair-1"))
    busy.assert_outcomes(errors=1)
    busy.stdout.fnmatch_lines(["*hil: no pair from *pair-1*other*"])
    waited = pytester.runpytest_subprocess(*args(lab, "--hil-pair", "pair-1", "--hil-wait", "1"))
    waited.assert_outcomes(errors=1)
    waited.stdout.fnmatch_lines(["*hil: no pair from *pair-1*"])
    store.release(held.id)
    store.close()


def test_xdist_workers_hold_different_pairs(
    pytester: pytest.Pytester, lab: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("OUT", str(out))
    pytester.makepyfile(RECORD_PAIR)
    result = pytester.runpytest_subprocess(*args(lab, "-n", "2", "--dist", "each"))
    result.assert_outcomes(passed=2)
    by_worker = dict(line.split() for line in out.read_text().splitlines())
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert sorted(by_worker.values()) == ["pair-1", "pair-2"]


def test_adopted_lease_is_renewed_not_released(
    pytester: pytest.Pytester, lab: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(lab["store"])
    lease = store.try_acquire([Claim("pair-2", ("h3", "h4"))], Holder.current(note="ci"), 60)
    assert lease is not None
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    pytester.makepyfile(RECORD_PAIR)
    result = pytester.runpytest_subprocess(*args(lab, "--hil-lease", lease.id))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["hil: pair pair-2 * adopted, lease *"])
    assert [le.id for le in store.leases()] == [lease.id]
    assert store.get(lease.id).expires >= lease.expires
    store.release(lease.id)
    store.close()


def test_lost_lease_stops_the_run(pytester: pytest.Pytester, lab: dict[str, str]) -> None:
    # The first test hands the pair to another holder behind the session's
    # back; the heartbeat notices and the next test does not run.
    pytester.makepyfile(
        f"""
        import time
        from hil.reservation import Claim, Holder, open_store

        def test_takeover(hil_pair, hil_run):
            store = open_store({lab["store"]!r})
            store.release(hil_pair.lease.id)
            store.try_acquire([Claim("pair-1", ("h1", "h2"))], Holder.current(note="thief"), 60)
            # Until the heartbeat noticed (a fixed 2 s may not be enough on a loaded machine).
            deadline = time.monotonic() + 30
            while hil_run.lease_lost is None and time.monotonic() < deadline:
                time.sleep(0.05)

        def test_never_runs(hil_pair):
            pass
        """
    )
    result = pytester.runpytest_subprocess(*args(lab, "--hil-pair", "pair-1", "--hil-ttl", "1.5"))
    assert result.ret == 3
    result.stdout.fnmatch_lines(["*hil: lease * is unknown to store*reserve the pair again*"])
    assert "test_never_runs PASSED" not in result.stdout.str()


def test_inactive_without_inventory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(hil_pair):\n    pass\n")
    result = pytester.runpytest_subprocess("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no lab inventory: pass --hil-inventory*"])
