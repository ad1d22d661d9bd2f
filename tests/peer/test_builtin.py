"""hil.peer.builtin: the built-in scenarios, registered by name, each naming its expectation."""

from __future__ import annotations

import pytest

from hil.errors import InputError
from hil.peer.builtin import SCENARIOS
from hil.peer.scenario import Send


def test_the_issue_s_examples_are_built_in_with_their_expectation_classes() -> None:
    assert {name: s.expectation for name, s in SCENARIOS.items()} == {
        "v2-connect-send": "ok",
        "mpa-bad-key": "mpa.bad_key",
        "mpa-unknown-revision": "mpa.bad_revision",
        "mpa-pd-too-long": "mpa.pd_too_long",
        "mpa-incomplete-request": "mpa.timeout",
        "send-bad-crc": "mpa.bad_crc",
        "write-invalid-stag": "ddp.invalid_stag",
        "reply-with-first-fpdu": "ok",
        "request-one-byte-segments": "ok",
    }


def test_each_built_in_sends_something_and_says_what_it_does() -> None:
    for s in SCENARIOS:
        assert s.description and any(isinstance(step, Send) for step in s.steps), s.name


def test_an_unknown_scenario_name_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"no peer scenario 'nope' \(known: .*mpa-bad-key"):
        SCENARIOS["nope"]
