"""``hil reserve|renew|release|status`` through the real ``hil`` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pausing import pause_outside_the_store

from hil.reservation import Claim, Holder, open_store, reserve

HIL = Path(sys.executable).parent / "hil"
INVENTORY = """\
hosts:
  a: {ssh: {host: 127.0.0.1}, tags: [x], rnics: [{name: p0, netdev: lo, driver: siw}]}
  b: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: lo, driver: siw},
                                       {name: p1, netdev: lo2, driver: iw_cxgb4}]}
  c: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: lo, driver: iw_cxgb4}]}
links:
  ab: {ends: ["a:p0", "b:p0"]}
  bc: {ends: ["b:p1", "c:p0"], tags: [chelsio]}
"""

# The store contract runs on both stores elsewhere; CLI behaviour that does
# not depend on the store kind is checked on SQLite only, to save time.
SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def env(tmp_path: Path, store_url: str) -> dict[str, str]:
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(INVENTORY)
    return {**os.environ, "HIL_INVENTORY": str(inventory), "HIL_STORE": store_url}


@pytest.fixture
def hil(env: dict[str, str]) -> Run:
    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(HIL), *args], env=env, text=True, capture_output=True, timeout=timeout
        )

    return run


def _as_a_background_job() -> None:
    # A run started in the background by a non-interactive shell (`cmd &`, as a CI
    # script or the nightly starts one) inherits SIGINT ignored: hil must hear it all
    # the same (hil.cli.interrupts).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def background(env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [str(HIL), *args],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_as_a_background_job,
        )
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate(timeout=10)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_reserve_status_renew_release(hil: Run) -> None:
    lease = json.loads(
        _ok(
            hil(
                "reserve",
                "--require",
                "tag=chelsio",
                "--ttl",
                "60",
                "--holder",
                "ci smoke",
                "--json",
            )
        )
    )
    assert lease["pair"] == "bc" and lease["hosts"] == ["b", "c"]
    assert lease["holder"]["note"] == "ci smoke" and lease["ttl"] == 60
    assert lease["expires"] > lease["acquired"]

    status = json.loads(_ok(hil("status", "--json")))
    assert [le["lease"] for le in status["leases"]] == [lease["lease"]]
    text = _ok(hil("status"))
    assert f"lease {lease['lease']}" in text and "(ci smoke)" in text and "since" in text

    renewed = json.loads(_ok(hil("renew", lease["lease"], "--ttl", "120", "--json")))
    assert renewed["ttl"] == 120 and renewed["expires"] > lease["expires"]

    _ok(hil("release", lease["lease"]))
    _ok(hil("release", lease["lease"]))
    assert "no pair is held" in _ok(hil("status"))
    lost = hil("renew", lease["lease"])
    assert lost.returncode == 3 and "unknown" in lost.stderr


@SQLITE_ONLY
def test_busy_pair_exits_2_naming_the_holder(hil: Run) -> None:
    _ok(hil("reserve", "--pair", "ab", "--holder", "first"))
    busy = hil("reserve", "--pair", "bc")
    assert busy.returncode == 2
    assert busy.stderr.startswith("hil: error: no pair is free: pair bc (b, c) is held by ")
    assert "(first)" in busy.stderr and "Traceback" not in busy.stderr


@SQLITE_ONLY
def test_wait_that_expires_exits_2_with_progress(hil: Run) -> None:
    _ok(hil("reserve", "--pair", "ab", "--holder", "first"))
    waited = hil("reserve", "--pair", "ab", "--wait", "1")
    assert waited.returncode == 2
    assert "hil: waiting for a pair" in waited.stderr
    assert "no pair became free within 1 s" in waited.stderr


@SQLITE_ONLY
@pytest.mark.parametrize(
    "args,message",
    [
        (["reserve", "--pair", "nope"], "no pair 'nope'"),
        (["reserve", "--require", "speed>>1"], "bad requirement 'speed>>1'"),
        (["reserve", "--require", "speed>=100000"], "no pair meets speed>=100000"),
        (["reserve", "--ttl", "0"], "TTL must be more than 0"),
        (["reserve", "--wait", "soon"], "not a number of seconds"),
        (["--inventory", "/nonexistent.yaml", "reserve"], "/nonexistent.yaml"),
        (["--store", "mysql://x/y", "status"], "unsupported reservation store"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(hil: Run, args: list[str], message: str) -> None:
    result = hil(*args)
    assert result.returncode in (1, 3)
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(("hil: error", "hil reserve: error"))


def test_hold_renews_until_sigterm_then_releases(
    hil: Run, background: Callable[..., subprocess.Popen[str]]
) -> None:
    holder = background("reserve", "--pair", "ab", "--ttl", "2", "--hold", "--json")
    assert holder.stdout is not None
    lease = json.loads(holder.stdout.readline())
    time.sleep(2.5)  # past its TTL: only the heartbeat keeps it
    assert hil("reserve", "--pair", "ab").returncode == 2
    holder.send_signal(signal.SIGTERM)
    _, err = holder.communicate(timeout=15)
    assert holder.returncode == 0, err
    assert f"released lease {lease['lease']}" in err
    assert json.loads(_ok(hil("status", "--json")))["leases"] == []


def test_hold_exits_3_when_the_lease_is_taken_over(
    store_url: str, background: Callable[..., subprocess.Popen[str]]
) -> None:
    holder = background("reserve", "--pair", "ab", "--ttl", "1", "--hold", "--json")
    assert holder.stdout is not None
    lease = json.loads(holder.stdout.readline())
    pause_outside_the_store(holder, store_url)  # a frozen runner misses its heartbeats
    try:
        time.sleep(1.3)
        with open_store(store_url) as store:
            thief = reserve(store, [Claim("ab", ("a", "b"))], Holder.current("thief"))
    finally:
        holder.send_signal(signal.SIGCONT)
    _, err = holder.communicate(timeout=15)
    assert holder.returncode == 3
    assert f"hil: error: lease {lease['lease']} on pair ab expired" in err
    assert f"(thief) (lease {thief.id})" in err and "Traceback" not in err


@SQLITE_ONLY
def test_exit_codes_are_in_help(hil: Run) -> None:
    text = _ok(hil("--help"))
    assert "2  busy or timed out" in text
    assert "reserve" in text and "status" in text


@SQLITE_ONLY
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_status_shows_waiters_and_sigint_or_sigterm_leaves_the_queue(
    hil: Run, background: Callable[..., subprocess.Popen[str]], signum: signal.Signals
) -> None:
    _ok(hil("reserve", "--pair", "ab", "--holder", "first"))
    waiter = background("reserve", "--pair", "bc", "--wait", "60", "--holder", "w")
    deadline = time.monotonic() + 20
    while not (waiting := json.loads(_ok(hil("status", "--json")))["waiting"]):
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.1)
    assert [(w["pairs"], w["holder"]["note"]) for w in waiting] == [(["bc"], "w")]
    assert "waiting: " in _ok(hil("status"))
    waiter.send_signal(signum)
    _, err = waiter.communicate(timeout=15)
    assert waiter.returncode == 3 and "hil: interrupted" in err
    assert json.loads(_ok(hil("status", "--json")))["waiting"] == []
