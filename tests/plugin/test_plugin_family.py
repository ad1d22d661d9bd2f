"""The plugin's address families: one variant of each CM test per family the reserved
pair offers, the family's id last, through pytester against a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

INVENTORY = """\
hosts:
  h1: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: d0, driver: siw, address: 198.18.0.1/24, address6: "2001:2::1/64"}]}
  h2: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: d0, driver: siw, address: 198.18.0.2/24, address6: "2001:2::2/64"}]}
  h3: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: d0, driver: siw, address: 198.18.1.1/24, address6: "2001:2:0:1::1/64"}]}
  h4: {ssh: {host: 127.0.0.1}, rnics: [{name: p0, netdev: d0, driver: siw, address: 198.18.1.2/24}]}
links:
  dual: {ends: [h1:p0, h2:p0]}
  v4only: {ends: [h3:p0, h4:p0]}
"""  # noqa: E501

TESTS = """
import pytest

def test_cm_like(direction, family, hil_pair):
    pass

@pytest.mark.parametrize("family", ["ipv4"])
def test_pinned(family, hil_pair):
    pass

def test_other(hil_pair):
    pass
"""


def _ids(pytester: pytest.Pytester, tmp_path: Path, *extra: str) -> list[str]:
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(INVENTORY)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess(
        "--hil-inventory", str(inventory), "--hil-store", str(tmp_path / "store.db"),
        "-p", "no:cacheprovider", "-v", *extra,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    return sorted(
        line.split("::")[1].split(" ")[0] for line in result.outlines if " PASSED" in line
    )


def test_a_dual_stack_pair_runs_each_cm_test_on_ipv4_and_ipv6(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    assert _ids(pytester, tmp_path, "--hil-pair", "dual") == [
        "test_cm_like[a-b-ipv4]", "test_cm_like[a-b-ipv6]",
        "test_cm_like[b-a-ipv4]", "test_cm_like[b-a-ipv6]",
        "test_other", "test_pinned[ipv4]",
    ]  # fmt: skip


def test_a_pair_without_ipv6_gets_no_ipv6_variant(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    assert _ids(pytester, tmp_path, "--hil-pair", "v4only") == [
        "test_cm_like[a-b-ipv4]", "test_cm_like[b-a-ipv4]", "test_other", "test_pinned[ipv4]",
    ]  # fmt: skip


def test_the_family_option_keeps_the_families_it_names(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    assert _ids(pytester, tmp_path, "--hil-pair", "dual", "--hil-family", "ipv6") == [
        "test_cm_like[a-b-ipv6]", "test_cm_like[b-a-ipv6]", "test_other", "test_pinned[ipv4]",
    ]  # fmt: skip
