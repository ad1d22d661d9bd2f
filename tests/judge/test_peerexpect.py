"""Peer scenario expectations: every class has an siw entry, every entry its sources,
and every difference from the RFC is marked as a finding."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.judge.peerexpect import RFC, PeerExpect, Scenario, differs
from hil.judge.peerproviders import PROVIDERS, SIW, departures, expect


def test_every_class_has_an_rfc_and_an_siw_entry() -> None:
    assert set(RFC) == set(Scenario)
    assert set(SIW) == set(Scenario)


def test_every_entry_cites_a_source() -> None:
    assert all(r.sources for r in RFC.values())
    for table in PROVIDERS.values():
        for scenario, entry in table.items():
            assert entry.sources, scenario
            assert all(":" in s or "RFC" in s for s in entry.sources), scenario


def test_siw_sources_name_the_kernel_version() -> None:
    for entry in SIW.values():
        assert any("6.1.192" in s for s in entry.sources), entry


def test_cxgb4_entries_are_source_only() -> None:
    assert all(e.source_only for e in PROVIDERS["iw_cxgb4"].values())


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_every_difference_from_the_rfc_is_a_finding(provider: str) -> None:
    for scenario, entry in PROVIDERS[provider].items():
        if differs(RFC[scenario], entry):
            assert entry.finding, f"{provider} {scenario}: {differs(RFC[scenario], entry)}"


def test_differs_names_a_wrong_terminate_and_close() -> None:
    got = PeerExpect((1, 2, 0x02), "none", (), ("x.c:1",))
    found = differs(RFC[Scenario.MESSAGE_TOO_LONG], got)
    assert len(found) == 2 and "TERMINATE (1, 2, 2)" in found[0]


def test_siw_departures_listed() -> None:
    names = {s for s, _ in departures("siw")}
    assert {Scenario.MESSAGE_TOO_LONG, Scenario.ACCESS_RIGHTS, Scenario.PD_LENGTH_OVER_256} <= names


def test_timed_classes_have_bounds() -> None:
    assert SIW[Scenario.INCOMPLETE_REQUEST].bound_s == 5.0
    assert SIW[Scenario.INCOMPLETE_REPLY].bound_s == 10.0


def test_expect_looks_up_and_refuses_unknown_names() -> None:
    assert expect("iw_cxgb4", "invalid_qn").terminate == (1, 2, 0x01)
    with pytest.raises(InputError, match="known: siw, iw_cxgb4"):
        expect("mlx5", "bad_crc")
    with pytest.raises(InputError, match="no expectation for scenario 'mpa_rev1'"):
        expect("iw_cxgb4", "mpa_rev1")


def test_siw_terminates_are_its_wire_layout_with_layer_and_etype_swapped() -> None:
    # siw means LLP/MPA/CRC (2, 0, 2); iwarp.h's bitfields put (0, 2, 2) on the wire.
    crc = expect("siw", "bad_crc")
    assert crc.terminate == (0, 2, 0x02)
    assert "Layer and EType" in crc.finding and any("iwarp.h" in s for s in crc.sources)
    same = expect("siw", "invalid_stag")  # DDP/tagged (1, 1, 0) reads the same either way
    assert same.terminate == (1, 1, 0x00) and not same.finding
