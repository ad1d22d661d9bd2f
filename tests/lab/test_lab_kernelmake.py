"""The build's steps: config checks, ccache, a debug configure; the real build: test_virtual_lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from hil.errors import LabError
from hil.lab import kernelkey, kernelmake


def test_unmet_options_lists_what_kconfig_dropped() -> None:
    fragment = "CONFIG_A=y\n# comment\nCONFIG_B=y\n# CONFIG_C is not set\n"
    assert kernelmake.unmet_options(fragment, "CONFIG_A=y\n# CONFIG_B is not set\n") == [
        "CONFIG_B=y"
    ]
    assert kernelmake.unmet_options(fragment, "CONFIG_A=y\nCONFIG_B=y\n") == []


def test_ccache_only_in_trees_configured_for_it(tmp_path: Path) -> None:
    # A defconfig tree built with plain gcc would recompile everything under another CC.
    assert kernelmake.make_vars(tmp_path) == []
    (tmp_path / kernelmake.CCACHE_MARK).touch()
    assert kernelmake.make_vars(tmp_path) == ["CC=ccache gcc"]
    env = kernelmake.ccache_env(tmp_path)
    assert env["CCACHE_DIR"] == str(kernelkey.cache_root() / "kernel" / "ccache")
    assert env["CCACHE_BASEDIR"] == str(tmp_path)


def test_a_debug_build_configures_with_all_three_fragments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "linux-source-6.1"
    tree.mkdir()
    ran: list[list[str]] = []

    def configure(argv: list[str], *args: object, **kwargs: object) -> None:
        ran.append(argv)
        # What Kconfig would leave: everything asked for but KASAN (as if a dependency lacked).
        allconfig = (tmp_path / "allconfig").read_text()
        (tree / ".config").write_text(allconfig.replace("CONFIG_KASAN=y", ""))

    monkeypatch.setattr(kernelmake, "_run", configure)
    with pytest.raises(LabError, match=r"lacks CONFIG_KASAN=y .* or debug.config"):
        kernelmake.configure(tree, kernelkey.FRAGMENT, "minimal", True, lambda _: None)
    allconfig = (tmp_path / "allconfig").read_text()
    assert kernelkey.MINIMAL.read_text() in allconfig
    assert kernelkey.FRAGMENT.read_text() in allconfig
    assert kernelkey.DEBUG.read_text() in allconfig
    assert ran[0][-1] == "allnoconfig"
