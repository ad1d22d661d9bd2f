"""Which Debian linux-source the lab's guest kernel is built from.

The default is ``linux-source-6.1`` (:data:`DEFAULT_SOURCE`), named rather
than "the newest installed": installing linux-source-6.12 for the kernel
matrix must not change the kernel every lab boots.  ``hil lab kernel
--source`` names another one by package (``linux-source-6.12``), by its
version (``6.12``), or by the path of a tarball (a ``.deb`` unpacked with
``dpkg-deb -x`` rather than installed).
"""

from __future__ import annotations

import gzip
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hil import tools
from hil.errors import InputError, LabError

DEFAULT_SOURCE = "linux-source-6.1"
SRC_DIR = Path("/usr/src")
_VERSION = re.compile(r"\d+\.\d+")
_CHANGELOG_HEAD = re.compile(r"^\S+ \(([^)]+)\)")


@dataclass(frozen=True)
class KernelSource:
    """A Debian linux-source package: its tarball and package version."""

    package: str
    version: str
    tarball: Path

    @property
    def tree_name(self) -> str:
        """The top directory inside the tarball (``linux-source-6.1``)."""
        return self.tarball.name.removesuffix(".tar.xz")

    @property
    def series(self) -> str:
        """The kernel series, ``6.1`` or ``6.12``: what ``hil lab up --kernel`` names."""
        return self.package.removeprefix("linux-source-")


def package_name(spec: str) -> str:
    """``linux-source-6.12`` for ``6.12`` or ``linux-source-6.12``; InputError otherwise."""
    name = spec if spec.startswith("linux-source-") else f"linux-source-{spec}"
    if not _VERSION.fullmatch(name.removeprefix("linux-source-")):
        raise InputError(
            f"kernel source {spec!r}: give a Debian package (linux-source-6.12), its "
            "version (6.12) or the path of a linux-source-X.Y.tar.xz"
        )
    return name


def is_series(spec: str) -> bool:
    """Whether ``spec`` names a kernel source (``6.12``, ``linux-source-6.12``), not a file."""
    return _VERSION.fullmatch(spec.removeprefix("linux-source-")) is not None


def find_source(src_dir: Path = SRC_DIR, spec: str | None = None) -> KernelSource:
    """The kernel source ``spec`` names (default :data:`DEFAULT_SOURCE`), with its version."""
    spec = spec or DEFAULT_SOURCE
    if spec.endswith(".tar.xz"):
        tarball = Path(spec)
        if not tarball.is_file():
            raise InputError(f"kernel source {spec}: no such file")
        package = tarball.name.removesuffix(".tar.xz")
        package_name(package)  # a linux-source-X.Y tarball, or a clear error
        # Not dpkg's version: a tarball given by path need not be the installed
        # package's (an installed one has its changelog beside it all the same).
        return KernelSource(package, _changelog_version(tarball) or _mtime_tag(tarball), tarball)
    package = package_name(spec)
    tarball = src_dir / f"{package}.tar.xz"
    if not tarball.is_file():
        series = package.removeprefix("linux-source-")
        install = (
            "ci/install" if package == DEFAULT_SOURCE else f"ci/install --kernel-sources {series}"
        )
        raise LabError(
            f"no {package} tarball in {src_dir}: install it with "
            f"`apt-get install {package}` (or run {install})"
        )
    version = _package_version(package) or _changelog_version(tarball) or _mtime_tag(tarball)
    return KernelSource(package, version, tarball)


def _package_version(package: str) -> str | None:
    try:
        out = subprocess.run(
            tools.argv("dpkg-query", "-W", "-f=${Version}", package),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _changelog_version(tarball: Path) -> str | None:
    # An unpacked .deb keeps the package's changelog beside its usr/src.
    package = tarball.name.removesuffix(".tar.xz")
    changelog = tarball.parent.parent / "share" / "doc" / package / "changelog.Debian.gz"
    try:
        with gzip.open(changelog, "rt", errors="replace") as f:
            found = _CHANGELOG_HEAD.match(f.readline())
    except (OSError, EOFError):
        return None
    return found.group(1) if found else None


def _mtime_tag(path: Path) -> str:
    # A tarball of no package: its size and mtime stand in for a version.
    st = path.stat()
    return f"local{st.st_size:x}{int(st.st_mtime):x}"
