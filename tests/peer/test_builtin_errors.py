"""hil.peer.builtin_errors: the DDP/RDMAP error, peer-TERMINATE and several-FPDUs scenarios,
registered, and each one's frames put on the wire as the DUT would get them (the peer
against a peer on 127.0.0.1, the second peer standing for the DUT)."""

from __future__ import annotations

from typing import Any

import pytest
from peer_loopback import CLEAN, Steps, run_both

from hil.judge.peerexpect import Scenario as Expectation
from hil.peer.builtin import SCENARIOS
from hil.peer.builtin_errors import (
    NO_REMOTE_READ,
    NO_REMOTE_WRITE,
    ONE_FAMILY,
    RECV_BYTES,
    SEGMENT_SENDS,
)
from hil.peer.scenario import Dut, Expect, Send, Sleep, resolve, to_agent

# Step keys that say how a frame goes out, not what it holds.
_HOW = {"step", "frame", "coalesce_with_next", "segments"}
# A region as a DUT's reg_mr shares it (siw: an STag of key 0, a user address).
REGION = {"stag": 0x1200, "base": 0x7F00_0000_1000, "len": 4096}


def test_each_is_registered_with_an_expectation_class_and_runs_on_one_family() -> None:
    assert ONE_FAMILY == {
        "send-invalid-qn",
        "send-msn-too-high",
        "send-msn-reused",
        "send-too-long",
        "fpdu-invalid-opcode",
        "read-beyond-ird",
        "peer-terminate",
        "fpdus-one-segment",
        "write-past-region-end",
        "write-stag-next-to-valid",
        "write-no-remote-write",
        "read-no-remote-read",
    }
    for name in ONE_FAMILY:
        assert Expectation(SCENARIOS[name].expectation), name


def _as_the_dut_gets_them(name: str) -> tuple[Steps, Steps]:
    """The scenario's peer side without the DUT's steps and its expected reaction, and a
    passive peer that answers the request and expects each FPDU with its overrides."""
    steps = resolve(to_agent(SCENARIOS[name]), REGION)
    sends = [s for s in steps if s["step"] == "send"]
    request, fpdus = sends[0], sends[1:]
    active: Steps = [
        request,
        {"step": "expect", "frame": "mpa_reply"},
        *fpdus,
        {"step": "send", "frame": "fin"},
    ]
    expects = [
        {"step": "expect", "frame": "fpdu", "fields": {k: v for k, v in s.items() if k not in _HOW}}
        for s in fpdus
    ]
    passive: Steps = [
        {"step": "expect", "frame": "mpa_request", "fields": {"c": 1, "rev": 2}},
        {"step": "send", "frame": "mpa_reply"},
        *expects,
        {"step": "expect", "frame": "fin"},
    ]
    return active, passive


@pytest.mark.parametrize("name", sorted(ONE_FAMILY))
def test_the_dut_gets_each_frame_with_its_overrides(name: str) -> None:
    active, passive = _as_the_dut_gets_them(name)
    outcomes, _ = run_both(active, passive)
    assert outcomes == [CLEAN, CLEAN]


def test_too_long_is_one_byte_past_the_receive_in_two_segments_of_one_message() -> None:
    sends = [s for s in SCENARIOS["send-too-long"].steps if isinstance(s, Send)][1:]
    first, last = (dict(s.fields) for s in sends)
    sizes = [len(str(f["payload"])) // 2 for f in (first, last)]
    assert (first["l"], last["l"], last["mo"]) == (0, 1, sizes[0])
    assert sum(sizes) == RECV_BYTES + 1


def test_the_error_scenarios_wait_for_a_terminate_then_a_close() -> None:
    # read-beyond-ird only waits: READ Responses may come first (builtin_errors).
    judged_on_the_record = {
        "peer-terminate",
        "fpdus-one-segment",
        "read-beyond-ird",
        "read-no-remote-read",
    }
    for name in ONE_FAMILY:
        steps = SCENARIOS[name].steps
        waits = [s.frame for s in steps if isinstance(s, Expect) and s.frame != "mpa_reply"]
        assert ("fpdu" not in waits) if name in judged_on_the_record else waits == ["fpdu", "close"]
    assert isinstance(SCENARIOS["read-beyond-ird"].steps[-1], Sleep)


def test_several_fpdus_are_each_received() -> None:
    recvs = [s for s in SCENARIOS["fpdus-one-segment"].steps if isinstance(s, Dut)]
    got = [dict(s.args).get("payload") for s in recvs if s.action == "recv"]
    assert got == list(SEGMENT_SENDS) and len(set(got)) == 3
    assert all(SEGMENT_SENDS[0].startswith(str(p)) for p in got)


def _region_and_tagged_frame(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The scenario's reg_mr args and its one tagged FPDU, the region's values put in."""
    steps = SCENARIOS[name].steps
    [region] = [dict(s.args) for s in steps if isinstance(s, Dut) and s.action == "reg_mr"]
    resolved = resolve(to_agent(SCENARIOS[name]), REGION)
    [frame] = [s for s in resolved if s.get("opcode") in ("write", "read_request")]
    return region, frame


def test_the_write_past_the_end_has_its_last_byte_one_past_the_region() -> None:
    _, write = _region_and_tagged_frame("write-past-region-end")
    end = REGION["base"] + REGION["len"]
    assert write["stag"] == REGION["stag"]
    assert int(str(write["to"])) + len(str(write["payload"])) // 2 == end + 1


def test_the_stag_next_to_a_valid_one_keeps_its_index_and_changes_its_key() -> None:
    _, write = _region_and_tagged_frame("write-stag-next-to-valid")
    assert (int(str(write["stag"])) >> 8, write["to"]) == (REGION["stag"] >> 8, REGION["base"])


def test_the_access_scenarios_lack_only_the_right_they_use() -> None:
    region, write = _region_and_tagged_frame("write-no-remote-write")
    assert region["access"] == NO_REMOTE_WRITE and "remote_write" not in NO_REMOTE_WRITE
    assert (write["stag"], write["to"]) == (REGION["stag"], REGION["base"])
    region, read = _region_and_tagged_frame("read-no-remote-read")
    assert region["access"] == NO_REMOTE_READ and "remote_read" not in NO_REMOTE_READ
    assert (read["source_stag"], read["source_to"], read["size"]) == (
        REGION["stag"],
        REGION["base"],
        3,
    )
