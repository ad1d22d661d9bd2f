"""Kernel cache keys, config checks, missing tools; the real build is in test_virtual_lab."""

from __future__ import annotations

import fcntl
import hashlib
import time
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.lab import kernel


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "hil"


def test_the_fragment_enables_siw_and_rdma_user_access() -> None:
    text = kernel.FRAGMENT.read_text()
    for option in (
        "CONFIG_RDMA_SIW=y",
        "CONFIG_INFINIBAND_USER_ACCESS=y",
        "CONFIG_VIRTIO_NET=y",
        "CONFIG_NET_SCH_NETEM=y",
        "# CONFIG_DRM is not set",
    ):
        assert option in text.splitlines()


def test_unmet_options_lists_what_kconfig_dropped() -> None:
    fragment = "CONFIG_A=y\n# comment\nCONFIG_B=y\n# CONFIG_C is not set\n"
    assert kernel.unmet_options(fragment, "CONFIG_A=y\n# CONFIG_B is not set\n") == ["CONFIG_B=y"]
    assert kernel.unmet_options(fragment, "CONFIG_A=y\nCONFIG_B=y\n") == []


def test_cache_key_follows_the_fragment(tmp_path: Path) -> None:
    a = tmp_path / "a.config"
    a.write_text("CONFIG_RDMA_SIW=y\n")
    key_a = kernel.config_hash(a)
    assert kernel.config_hash(a) == key_a
    a.write_text("CONFIG_RDMA_SIW=y\nCONFIG_DUMMY=y\n")
    assert kernel.config_hash(a) != key_a


def test_cache_lives_under_xdg_cache_home_keyed_by_source_version(cache: Path) -> None:
    source = kernel.find_source()
    where = kernel.kernel_dir(source)
    assert where.parent == cache / "kernel"
    assert where.name.startswith(source.version.replace(":", "_"))
    assert where.name.endswith(kernel.config_hash())


def test_a_cached_kernel_is_returned_at_once(cache: Path) -> None:
    image = kernel.kernel_dir(kernel.find_source()) / "bzImage"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"cached")
    started = time.monotonic()
    assert kernel.ensure_kernel() == image
    assert kernel.cached_kernel() == image
    assert time.monotonic() - started < 2


def test_missing_build_tools_name_the_debian_packages(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(kernel, "_configkernel", lambda: None)
    with pytest.raises(LabError) as e:
        kernel.ensure_kernel()
    message = str(e.value)
    for package in ("build-essential", "bc", "flex", "bison", "dwarves", "virtme-ng"):
        assert package in message
    assert "ci/install" in message


def test_no_linux_source_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="apt-get install linux-source-6.1"):
        kernel.find_source(tmp_path)


def test_a_build_held_by_another_process_is_waited_for_with_a_limit(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel, "BUILD_TIMEOUT", 0.5)
    monkeypatch.setattr(kernel, "PROGRESS_EVERY", 0.1)
    lock = cache / "kernel" / ".build.lock"
    lock.parent.mkdir(parents=True)
    said: list[str] = []
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LabError, match="another build held .* for over"):
            kernel.ensure_kernel(progress=said.append)
    assert said == ["lab kernel: another build is running; waiting for it to finish"]


def test_the_defconfig_key_is_the_one_hil_always_used() -> None:
    # Cached defconfig kernels stay valid: fragment, targets and virtme's version only.
    h = hashlib.sha256(kernel.FRAGMENT.read_bytes())
    h.update(b"bzImage")
    h.update(kernel._virtme_version().encode())
    assert kernel.config_hash(base="defconfig") == h.hexdigest()[:12]


def test_the_default_is_the_minimal_base() -> None:
    assert kernel.DEFAULT_BASE == "minimal"
    assert kernel.config_hash() == kernel.config_hash(base="minimal")


def test_each_base_has_its_own_cache_key_and_tree(cache: Path) -> None:
    source = kernel.find_source()
    assert kernel.config_hash(base="minimal") != kernel.config_hash(base="defconfig")
    assert kernel.kernel_dir(source, base="minimal") != kernel.kernel_dir(source, base="defconfig")
    default_tree = kernel.tree_dir(source, base="defconfig")
    minimal_tree = kernel.tree_dir(source, base="minimal")
    assert default_tree.parent.name == source.version.replace(":", "_")
    assert minimal_tree.parent.name == default_tree.parent.name + "-minimal"
    assert kernel.tree_dir(source) == kernel.tree_dir(source, base=kernel.DEFAULT_BASE)


def test_the_minimal_key_follows_minimal_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = kernel.config_hash(base="minimal")
    edited = tmp_path / "minimal.config"
    edited.write_text(kernel.MINIMAL.read_text() + "CONFIG_DUMMY=y\n")
    monkeypatch.setattr(kernel, "MINIMAL", edited)
    assert kernel.config_hash(base="minimal") != before


def test_minimal_base_names_what_the_lab_needs() -> None:
    wanted = set(kernel.MINIMAL.read_text().splitlines())
    for option in (
        "CONFIG_64BIT=y",
        "CONFIG_9P_FS=y",
        "CONFIG_OVERLAY_FS=y",
        "CONFIG_VIRTIO_PCI=y",
        "CONFIG_SERIAL_8250_CONSOLE=y",
        "CONFIG_MAGIC_SYSRQ=y",
        "CONFIG_DEBUG_FS=y",
        "CONFIG_SECCOMP_FILTER=y",
        "CONFIG_NETFILTER_INGRESS=y",  # blackhole pulls: nft netdev ingress/egress hooks
        "CONFIG_NETFILTER_EGRESS=y",
        'CONFIG_CMDLINE="no_timer_check"',  # no IO-APIC timer panic on a loaded TCG host
    ):
        assert option in wanted
    assert not [ln for ln in wanted if ln.startswith("CONFIG_DEBUG_INFO")]  # the slow part


def test_ccache_only_in_trees_configured_for_it(tmp_path: Path) -> None:
    # A defconfig tree built with plain gcc would recompile everything under another CC.
    assert kernel.make_vars(tmp_path) == []
    (tmp_path / kernel.CCACHE_MARK).touch()
    assert kernel.make_vars(tmp_path) == ["CC=ccache gcc"]
    env = kernel.ccache_env(tmp_path)
    assert env["CCACHE_DIR"] == str(kernel.cache_root() / "kernel" / "ccache")
    assert env["CCACHE_BASEDIR"] == str(tmp_path)


def test_the_debug_flavour_has_its_own_key_and_tree_and_leaves_the_plain_ones(
    cache: Path,
) -> None:
    source = kernel.find_source()
    assert kernel.config_hash(debug=True) != kernel.config_hash()
    assert kernel.kernel_dir(source, debug=True) != kernel.kernel_dir(source)
    assert kernel.tree_dir(source, debug=True).parent.name == (
        kernel.tree_dir(source).parent.name + "-debug"
    )
    assert kernel.cached_kernel(debug=True) is None


def test_the_debug_flavour_is_built_on_the_minimal_base_only() -> None:
    with pytest.raises(InputError, match="minimal base only"):
        kernel.ensure_kernel(base="defconfig", debug=True)


def test_the_debug_fragment_names_the_checkers() -> None:
    wanted = set(kernel.DEBUG.read_text().splitlines())
    for option in (
        "CONFIG_KASAN=y",
        "CONFIG_DEBUG_KMEMLEAK=y",
        "# CONFIG_DEBUG_KMEMLEAK_AUTO_SCAN is not set",  # scanned after each test instead
        "CONFIG_PROVE_LOCKING=y",
        "CONFIG_DEBUG_OBJECTS=y",
        "CONFIG_NET_DEV_REFCNT_TRACKER=y",
        "CONFIG_LKDTM=y",  # provokes each report on the real kernel in a test
    ):
        assert option in wanted


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

    monkeypatch.setattr(kernel, "_run", configure)
    with pytest.raises(LabError, match=r"lacks CONFIG_KASAN=y .* or debug.config"):
        kernel._configure(tree, kernel.FRAGMENT, "minimal", True, lambda _: None)
    allconfig = (tmp_path / "allconfig").read_text()
    assert kernel.MINIMAL.read_text() in allconfig
    assert kernel.FRAGMENT.read_text() in allconfig
    assert kernel.DEBUG.read_text() in allconfig
    assert ran[0][-1] == "allnoconfig"
