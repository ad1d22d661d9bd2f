"""hil.peer.vocab: every value the fuzzer draws is one the loader accepts."""

from __future__ import annotations

import random

from hil.peer.vocab import FIELDS


def test_every_boundary_and_drawn_value_is_valid_for_its_field() -> None:
    rng = random.Random(1)
    for frame, fields in FIELDS.items():
        for field in fields.values():
            values = [*field.boundaries(), *(field.draw(rng) for _ in range(20))]
            bad = [(v, field.problem(v)) for v in values if field.problem(v)]
            assert not bad, (frame, field.name, bad)


def test_a_bit_refuses_a_boolean_and_a_hex_string_refuses_half_bytes() -> None:
    assert FIELDS["mpa_request"]["m"].problem(True) == "expected an integer 0..1, got True"
    assert FIELDS["fpdu"]["payload"].problem("abc") is not None
    assert FIELDS["fpdu"]["crc"].problem(7) is None and FIELDS["fpdu"]["crc"].problem("bad") is None
