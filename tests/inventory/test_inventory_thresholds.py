"""The inventory's ``thresholds:``: what loads, and each refusal with its located message."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import InventoryError
from hil.inventory import load
from hil.inventory.thresholds import Threshold

BASE = """\
hosts:
  a:
    ssh: {host: a.lab.example}
thresholds:
"""


def _load(tmp_path: Path, section: str) -> tuple[Threshold, ...]:
    path = tmp_path / "lab.yaml"
    path.write_text(BASE + section)
    return load(path).thresholds


def test_thresholds_load_with_their_place(tmp_path: Path) -> None:
    got = _load(
        tmp_path,
        "  connect_us: {stat: p99, above: 50000, rise: 50}\n"
        '  "detection_us{scenario=link-pull-admin}": {above: 5.0e+6}\n'
        "  storm_rate_per_s: {below: 100, fall: 30}\n",
    )
    where = f"{tmp_path / 'lab.yaml'}"
    assert got == (
        Threshold("connect_us", "p99", above=50000, rise=50, source=f"{where}:5"),
        Threshold("detection_us{scenario=link-pull-admin}", above=5e6, source=f"{where}:6"),
        Threshold("storm_rate_per_s", below=100, fall=30, source=f"{where}:7"),
    )


def test_no_section_no_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(BASE.replace("thresholds:\n", ""))
    assert load(path).thresholds == ()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("  connect_us: {}\n", "give at least one of above, below, rise, fall"),
        ("  connect_us: {stat: p95, above: 1}\n", "connect_us.stat"),
        ("  connect_us: {over: 1}\n", "unknown key 'over'"),
        ("  connect_us: {above: fast}\n", "connect_us.above"),
        ("  connect_us: {rise: -5}\n", "connect_us.rise"),
        ("  'a b': {above: 1}\n", "is not a metric name or series key"),
    ],
)
def test_bad_thresholds_are_located(tmp_path: Path, section: str, message: str) -> None:
    with pytest.raises(InventoryError, match=message) as caught:
        _load(tmp_path, section)
    assert ":5: " in str(caught.value)
