"""hil.peer.builtin: the built-in scenarios, registered by name, each naming its expectation."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.peer.builtin import SCENARIOS
from hil.peer.scenario import Send


def test_the_issue_s_examples_are_built_in_with_their_expectation_classes() -> None:
    # Among them: other modules (hil/peer/builtin_errors.py) register theirs too.
    assert {name: s.expectation for name, s in SCENARIOS.items()}.items() >= {
        "v2-connect-send": "mpa_rev2",
        "mpa-bad-key": "wrong_key",
        "mpa-unknown-revision": "unknown_revision",
        "mpa-pd-too-long": "pd_length_over_rfc_limit",
        "mpa-incomplete-request": "incomplete_request",
        "send-bad-crc": "bad_crc",
        "write-invalid-stag": "invalid_stag",
        "reply-with-first-fpdu": "reply_and_fpdu_one_segment",
        "request-one-byte-segments": "one_byte_segments",
        "first-fpdu-unknown-opcode": "invalid_opcode",
    }.items()


def test_each_built_in_sends_something_and_says_what_it_does() -> None:
    for s in SCENARIOS:
        assert s.description and any(isinstance(step, Send) for step in s.steps), s.name


def test_an_unknown_scenario_name_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"no peer scenario 'nope' \(known: .*mpa-bad-key"):
        SCENARIOS["nope"]
