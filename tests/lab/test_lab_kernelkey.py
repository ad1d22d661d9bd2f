"""Which kernel is which: the fragments, each base's and flavour's cache key and directories."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hil.lab import kernelkey
from hil.lab.kernel_source import find_source


def test_the_fragment_enables_siw_and_rdma_user_access() -> None:
    text = kernelkey.FRAGMENT.read_text()
    for option in (
        "CONFIG_RDMA_SIW=y",
        "CONFIG_INFINIBAND_USER_ACCESS=y",
        "CONFIG_VIRTIO_NET=y",
        "CONFIG_NET_SCH_NETEM=y",
        "# CONFIG_DRM is not set",
    ):
        assert option in text.splitlines()


def test_cache_key_follows_the_fragment(tmp_path: Path) -> None:
    a = tmp_path / "a.config"
    a.write_text("CONFIG_RDMA_SIW=y\n")
    key_a = kernelkey.config_hash(a)
    assert kernelkey.config_hash(a) == key_a
    a.write_text("CONFIG_RDMA_SIW=y\nCONFIG_DUMMY=y\n")
    assert kernelkey.config_hash(a) != key_a


def test_cache_lives_under_xdg_cache_home_keyed_by_source_version(kernel_cache: Path) -> None:
    source = find_source()
    where = kernelkey.kernel_dir(source)
    assert where.parent == kernel_cache / "kernel"
    assert where.name.startswith(source.version.replace(":", "_"))
    assert where.name.endswith(kernelkey.config_hash())


def test_the_defconfig_key_is_the_one_hil_always_used() -> None:
    # Cached defconfig kernels stay valid: fragment, targets and virtme's version only.
    h = hashlib.sha256(kernelkey.FRAGMENT.read_bytes())
    h.update(b"bzImage")
    h.update(kernelkey._virtme_version().encode())
    assert kernelkey.config_hash(base="defconfig") == h.hexdigest()[:12]


def test_the_default_is_the_minimal_base() -> None:
    assert kernelkey.DEFAULT_BASE == "minimal"
    assert kernelkey.config_hash() == kernelkey.config_hash(base="minimal")


def test_each_base_has_its_own_cache_key_and_tree(kernel_cache: Path) -> None:
    source = find_source()
    assert kernelkey.config_hash(base="minimal") != kernelkey.config_hash(base="defconfig")
    assert kernelkey.kernel_dir(source, base="minimal") != kernelkey.kernel_dir(
        source, base="defconfig"
    )
    default_tree = kernelkey.tree_dir(source, base="defconfig")
    minimal_tree = kernelkey.tree_dir(source, base="minimal")
    assert default_tree.parent.name == source.version.replace(":", "_")
    assert minimal_tree.parent.name == default_tree.parent.name + "-minimal"
    assert kernelkey.tree_dir(source) == kernelkey.tree_dir(source, base=kernelkey.DEFAULT_BASE)


def test_the_minimal_key_follows_minimal_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = kernelkey.config_hash(base="minimal")
    edited = tmp_path / "minimal.config"
    edited.write_text(kernelkey.MINIMAL.read_text() + "CONFIG_DUMMY=y\n")
    monkeypatch.setattr(kernelkey, "MINIMAL", edited)
    assert kernelkey.config_hash(base="minimal") != before


def test_minimal_base_names_what_the_lab_needs() -> None:
    wanted = set(kernelkey.MINIMAL.read_text().splitlines())
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


def test_the_debug_flavour_has_its_own_key_and_tree_and_leaves_the_plain_ones(
    kernel_cache: Path,
) -> None:
    source = find_source()
    assert kernelkey.config_hash(debug=True) != kernelkey.config_hash()
    assert kernelkey.kernel_dir(source, debug=True) != kernelkey.kernel_dir(source)
    assert kernelkey.tree_dir(source, debug=True).parent.name == (
        kernelkey.tree_dir(source).parent.name + "-debug"
    )
    assert kernelkey.cached_kernel(debug=True) is None


def test_the_debug_fragment_names_the_checkers() -> None:
    wanted = set(kernelkey.DEBUG.read_text().splitlines())
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
