"""The netdev checks of a port: a firmware string against the inventory's version."""

from __future__ import annotations

from hil.host.portlink import firmware_ok


def test_exact_firmware_is_the_whole_string_or_its_leading_version() -> None:
    assert firmware_ok("1.27.4.0, TP 0.1.23.2", "1.27.4.0", at_least=False)
    assert firmware_ok("1.27.4.0, TP 0.1.23.2", "1.27.4.0, TP 0.1.23.2", at_least=False)
    assert not firmware_ok("1.27.4.0, TP 0.1.23.2", "1.27.4", at_least=False)


def test_minimum_firmware_compares_numbers_not_text() -> None:
    assert firmware_ok("1.27.10.0, TP 0.1.23.2", "1.27.4.0", at_least=True)  # "10" < "4" as text
    assert not firmware_ok("1.26.9.0", "1.27.4.0", at_least=True)
    assert not firmware_ok("none reported", "1.27.4.0", at_least=True)
