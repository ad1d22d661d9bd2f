"""``hil nightly drift`` on a hand-made drift history: what it prints, its exit, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hil.cli import main
from hil.report import drift, drift_history

KEY = "suites/test_close.py::test_x reject a REJECTED"


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["nightly", "drift", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def keep(reports: Path, pair: str, *statuses: str, firmware: tuple[str, ...] = ()) -> None:
    for run_no, status in enumerate(statuses, 1):
        fw = firmware[run_no - 1] if firmware else "1.0"
        rec = drift.NightRecord(
            run_no,
            f"2026-12-0{run_no}T02:00:00Z",
            pair,
            {"status": {KEY: status}},
            {"a.data0.firmware": fw},
        )
        drift_history.save(reports / "drift" / pair, rec, 7)


def test_the_newest_night_against_the_ones_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keep(tmp_path, "t6-pair-1", "-104", "-104", "-111", firmware=("1.0", "1.0", "1.1"))
    keep(tmp_path, "vpair", "0", "0")
    code, out, _ = run(capsys, "--history", tmp_path)
    assert code == 4
    assert out.splitlines() == [
        "drift: t6-pair-1: 1 changed against the 2 nights before, 1 past a fail threshold",
        f"  FAILS status: {KEY}: -104 -> -111 (no night of 2 before had it)",
        "  on the pair since the night before:",
        "    a.data0.firmware: 1.0 -> 1.1",
        "drift: vpair: 0 changed against the night before, 0 past a fail threshold",
    ]
    code, out, _ = run(capsys, "--history", tmp_path / "drift", "--pair", "vpair", "--json")
    assert code == 0
    assert json.loads(out) == {
        "pair": "vpair", "nights": 1, "changes": [], "stack": [], "skipped": [],
    }  # fmt: skip
    code, _, _ = run(capsys, "--history", tmp_path, "--threshold", "status=flag")
    assert code == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--history", "{tmp}/nope"], "--history {tmp}/nope: no such directory"),
        (["--history", "{tmp}/empty"], "--history {tmp}/empty: no history yet (the nightly"),
        (["--history", "{tmp}", "--pair", "x"], "--pair x: no history in {tmp}/drift (pairs: p1)"),
        (["--history", "{tmp}", "--nights", "0"], "--nights must be at least 1, not 0"),
        (
            ["--history", "{tmp}", "--threshold", "bound=2"],
            "drift threshold 'bound=2': bound takes",
        ),
    ],
)
def test_bad_input_gets_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    keep(tmp_path, "p1", "0")
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, *(a.format(tmp=tmp_path) for a in argv))
    assert code == 1 and out == ""
    assert err.startswith(f"hil: error: {message.format(tmp=tmp_path)}"), err
