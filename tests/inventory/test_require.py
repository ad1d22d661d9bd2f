"""Requirements: parsing ``KEY OP VALUE`` and selecting pairs with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import RequirementError
from hil.inventory import Inventory, Requirement, load, parse_requirement, select

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example-lab.yaml"


@pytest.fixture(scope="module")
def example() -> Inventory:
    return load(EXAMPLE)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("speed>=25000", Requirement("speed", ">=", "25000")),
        ("driver=iw_cxgb4", Requirement("driver", "=", "iw_cxgb4")),
        (" tag = t6 ", Requirement("tag", "=", "t6")),
        ("mtu<9000", Requirement("mtu", "<", "9000")),
        ("mtu>1500", Requirement("mtu", ">", "1500")),
        ("speed<=40000", Requirement("speed", "<=", "40000")),
        ("driver!=siw", Requirement("driver", "!=", "siw")),
        ("link=t6-pair-1", Requirement("pair", "=", "t6-pair-1")),
        ("pull=blackhole", Requirement("pull", "=", "blackhole")),
        ("firmware=1.27.4.0", Requirement("firmware", "=", "1.27.4.0")),
    ],
)
def test_parse(text: str, parsed: Requirement) -> None:
    assert parse_requirement(text) == parsed


def test_str_round_trips() -> None:
    assert str(parse_requirement(" speed >= 25000")) == "speed>=25000"


HELP = (
    "(keys: pair, host, tag, pull, driver, rdma_device, speed, mtu, firmware, fallback, link; "
    "operators: = != >= <= > <)"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("speed", f"bad requirement 'speed': write KEY OP VALUE {HELP}"),
        ("=siw", f"bad requirement '=siw': write KEY OP VALUE {HELP}"),
        ("colour=red", f"bad requirement 'colour=red': unknown key 'colour' {HELP}"),
        ("driver=", "bad requirement 'driver=': no value after '='"),
        ("speed>=fast", "bad requirement 'speed>=fast': 'fast' is not a whole number"),
        ("speed>=25G", "bad requirement 'speed>=25G': '25G' is not a whole number"),
        (
            "driver>=siw",
            "bad requirement 'driver>=siw': '>=' compares numbers (speed, mtu); "
            "use = or != for driver",
        ),
        (
            "pull=unplug",
            "bad requirement 'pull=unplug': no pull mode 'unplug' "
            "(modes: admin, blackhole, carrier, command)",
        ),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(RequirementError) as caught:
        parse_requirement(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("requirements", "pairs"),
    [
        ([], ["t6-pair-1", "t5-pair-1", "e810-pair-1", "siw-pair-1"]),
        (["driver=iw_cxgb4"], ["t6-pair-1", "t5-pair-1"]),
        (["driver!=iw_cxgb4"], ["e810-pair-1", "siw-pair-1"]),
        (["driver=irdma"], ["e810-pair-1"]),
        (["speed>=25000"], ["t6-pair-1", "t5-pair-1", "e810-pair-1"]),
        (["speed>25000"], ["t5-pair-1", "e810-pair-1"]),
        (["speed<25000"], ["siw-pair-1"]),
        (["speed=10000"], ["siw-pair-1"]),
        (["speed!=10000"], ["t6-pair-1", "t5-pair-1", "e810-pair-1"]),
        (["mtu>=9000"], ["t6-pair-1", "e810-pair-1"]),
        (["mtu<=1500", "driver=iw_cxgb4"], ["t5-pair-1"]),
        (["tag=t6"], ["t6-pair-1"]),  # link tag and both hosts' tag
        (["tag=chelsio"], ["t6-pair-1", "t5-pair-1"]),  # link tag only
        (["tag=rack4"], ["t5-pair-1"]),  # both hosts' tag only
        (["tag!=chelsio"], ["e810-pair-1", "siw-pair-1"]),
        (["host=t5-b"], ["t5-pair-1"]),
        (["host!=t5-b"], ["t6-pair-1", "e810-pair-1", "siw-pair-1"]),
        (["pair=siw-pair-1"], ["siw-pair-1"]),
        (["link!=siw-pair-1"], ["t6-pair-1", "t5-pair-1", "e810-pair-1"]),
        (["pull=command"], ["t6-pair-1", "t5-pair-1", "e810-pair-1"]),
        (["pull=blackhole"], ["siw-pair-1"]),
        (["pull=carrier"], []),
        (["pull!=command"], ["siw-pair-1"]),
        (["fallback=siw"], ["siw-pair-1"]),
        (["rdma_device=cxgb4_0"], ["t6-pair-1", "t5-pair-1"]),
        (["firmware=1.26.6.0"], ["t5-pair-1"]),
        (["driver=iw_cxgb4", "speed<=25000", "pull=admin"], ["t6-pair-1"]),
        (["driver=siw", "speed>=25000"], []),
    ],
)
def test_select_on_example(example: Inventory, requirements: list[str], pairs: list[str]) -> None:
    assert [p.name for p in select(example, requirements)] == pairs


def test_select_takes_parsed_requirements(example: Inventory) -> None:
    req = parse_requirement("speed>=40000")
    assert [p.name for p in select(example, [req])] == ["t5-pair-1", "e810-pair-1"]


MIXED = """\
hosts:
  a:
    ssh: {host: a.example}
    tags: [fast, odd]
    rnics: [{name: p0, netdev: eth0, driver: siw, speed: 25000}]
  b:
    ssh: {host: b.example}
    tags: [fast]
    rnics: [{name: p0, netdev: eth0, driver: iw_cxgb4}]
links:
  l: {ends: [a:p0, b:p0]}
"""


@pytest.fixture
def mixed(tmp_path: Path) -> Inventory:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    return load(path)


@pytest.mark.parametrize(
    ("requirement", "selected"),
    [
        # Port properties must hold on both ends.
        ("driver=siw", False),
        ("driver=iw_cxgb4", False),
        ("driver!=rxe", True),
        # b's speed is unknown: no speed requirement can hold, not even !=.
        ("speed>=1", False),
        ("speed!=1", False),
        # A host tag counts only when both hosts carry it.
        ("tag=fast", True),
        ("tag=odd", False),
        ("host=a", True),
        ("host=b", True),
        ("host=c", False),
    ],
)
def test_both_ends_must_meet_port_requirements(
    mixed: Inventory, requirement: str, selected: bool
) -> None:
    assert bool(select(mixed, [requirement])) is selected


def test_select_rejects_bad_requirement_strings(example: Inventory) -> None:
    with pytest.raises(RequirementError, match="unknown key 'sped'"):
        select(example, ["sped>=1"])
