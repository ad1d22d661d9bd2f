"""Which kernel source a lab kernel is built from: the default, and the matrix's others."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from hil.errors import InputError, LabError
from hil.lab import kernel_source


def tarball(src: Path, series: str) -> Path:
    path = src / f"linux-source-{series}.tar.xz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really xz")
    return path


def test_the_default_stays_6_1_when_a_newer_source_is_installed(tmp_path: Path) -> None:
    # Installing linux-source-6.12 for the matrix must not change the kernel every lab boots.
    tarball(tmp_path, "6.1")
    tarball(tmp_path, "6.12")
    found = kernel_source.find_source(tmp_path)
    assert (found.package, found.series) == ("linux-source-6.1", "6.1")
    assert found.tarball == tmp_path / "linux-source-6.1.tar.xz"


@pytest.mark.parametrize("spec", ["6.12", "linux-source-6.12"])
def test_a_source_is_named_by_package_or_series(tmp_path: Path, spec: str) -> None:
    tarball(tmp_path, "6.1")
    tarball(tmp_path, "6.12")
    found = kernel_source.find_source(tmp_path, spec)
    assert (found.package, found.tree_name) == ("linux-source-6.12", "linux-source-6.12")


def test_an_unpacked_deb_takes_its_version_from_the_changelog_beside_it(tmp_path: Path) -> None:
    # dpkg-deb -x linux-source-6.12_*.deb ROOT: ROOT/usr/src/... and ROOT/usr/share/doc/...
    path = tarball(tmp_path / "usr" / "src", "6.12")
    doc = tmp_path / "usr" / "share" / "doc" / "linux-source-6.12"
    doc.mkdir(parents=True)
    with gzip.open(doc / "changelog.Debian.gz", "wt") as f:
        f.write("linux-6.12 (6.12.117-1~deb12u1) bookworm-security; urgency=high\n\n  * x\n")
    found = kernel_source.find_source(spec=str(path))
    assert (found.package, found.version) == ("linux-source-6.12", "6.12.117-1~deb12u1")


def test_a_tarball_of_no_package_is_keyed_by_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the installed package's version: a tarball given by path need not be it
    # (the nightly's ci/install --kernel-sources installs linux-source-6.12).
    monkeypatch.setattr(kernel_source, "_package_version", lambda package: "6.12.999-1")
    found = kernel_source.find_source(spec=str(tarball(tmp_path, "6.12")))
    assert found.version.startswith("local")


def test_a_missing_source_names_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(
        LabError,
        match=r"no linux-source-6.12 tarball .*`apt-get install linux-source-6.12` "
        r"\(or run ci/install --kernel-sources 6.12\)$",
    ):
        kernel_source.find_source(tmp_path, "6.12")
    with pytest.raises(LabError, match=r"apt-get install linux-source-6.1` \(or run ci/install\)"):
        kernel_source.find_source(tmp_path)


@pytest.mark.parametrize("spec", ["6", "linux-source-", "latest", "/tmp/linux-6.12.tar.xz"])
def test_a_source_that_names_nothing_is_bad_input(tmp_path: Path, spec: str) -> None:
    if spec.endswith(".tar.xz"):
        spec = str(tmp_path / "linux-6.12.tar.xz")
        Path(spec).write_bytes(b"x")
    with pytest.raises(InputError, match="give a Debian package"):
        kernel_source.find_source(tmp_path, spec)


def test_series_are_told_apart_from_kernel_paths() -> None:
    assert kernel_source.is_series("6.12")
    assert kernel_source.is_series("linux-source-6.1")
    assert not kernel_source.is_series("bzImage")
    assert not kernel_source.is_series("/tmp/6.12/bzImage")
