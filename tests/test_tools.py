"""Every command in hil's table (hil/tools.py) is provided by a package ci/install installs.

For each entry: find the file that provides the command (on the system PATH
a host's SSH session has, at the table's path, in the venv for PyPI tools,
in .tools for npm ones), ask ``dpkg -S`` which package owns it, and check
that this is the table's package (or one it depends on directly, as python3
on python3-minimal), and that ``ci/install --list-packages`` lists the
table's package.  A command nobody installs fails here on any machine; only
the entries marked optional (rpm) are skipped where they are absent.
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hil import tools
from hil.agent.remote import tools as remote_tools
from hil.lab import kernel
from hil.tools import Tool

REPO = Path(__file__).resolve().parents[1]
# Where commands are looked up on a host: the system PATH of an SSH session,
# without /usr/local (no package owns what is there).
SYSTEM_PATH = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Merged /usr: dpkg knows a file by the path its package shipped it at.
USR_ALIASES = (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"))
REQUIREMENTS_DOC = REPO / "docs" / "host-control.md"


@functools.cache
def ci_install_packages() -> frozenset[str]:
    """The Debian packages ci/install installs, as it lists them itself."""
    out = subprocess.run(
        [str(REPO / "ci" / "install"), "--list-packages"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return frozenset(out.split())


def locate(t: Tool) -> Path | None:
    """The file hil runs for ``t`` on this machine, or None when there is none."""
    if t.source == "pypi":
        # The venv's bin: where hil looks first (it is often not on PATH).
        candidate = Path(sys.executable).with_name(t.command)
        return candidate if candidate.exists() else None
    if t.source == "npm":
        assert t.path is not None, f"{t.command}: an npm tool needs its path in the repository"
        candidate = REPO / t.path
        return candidate if candidate.exists() else None
    if t.path:
        found = sorted(glob.glob(t.path))
        return Path(found[-1]) if found else None
    for folder in SYSTEM_PATH:
        candidate = Path(folder) / t.command
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def dpkg_owners(path: Path) -> set[str]:
    """Packages that own ``path``, its target, or their pre-merged-/usr names."""
    names = {str(path), os.path.realpath(path)}
    aliases = set()
    for name in names:
        for usr, root in USR_ALIASES:
            if name.startswith(usr):
                aliases.add(root + name[len(usr) :])
            elif name.startswith(root):
                aliases.add(usr + name[len(root) :])
    names |= aliases
    owners: set[str] = set()
    for name in sorted(names):
        done = subprocess.run(
            ["dpkg", "-S", name], capture_output=True, text=True, timeout=30, check=False
        )
        for line in done.stdout.splitlines():
            if line.startswith("diversion by"):
                continue
            pkgs, sep, owned = line.partition(": ")
            if sep and owned == name:
                owners |= {p.strip().split(":")[0] for p in pkgs.split(",")}
    return owners


def direct_dependencies(package: str) -> set[str]:
    """The packages ``package`` Depends or Pre-Depends on (every alternative)."""
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    names = re.split(r"[,|]", done.stdout)
    return {re.sub(r"\(.*?\)|:\w+", "", n).strip() for n in names} - {""}


def installed_debian(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.endswith("install ok installed")


def runtime_dependencies() -> set[str]:
    """The names in pyproject.toml's ``dependencies`` (what ``pip install .`` brings)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {re.split(r"[\s<>=!~\[;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}


def check_debian(t: Tool, path: Path) -> None:
    assert t.package in ci_install_packages(), (
        f"{t.command} ({t.purpose}) comes from the Debian package {t.package}, which ci/install "
        f"does not install: add {t.package} to APT_PACKAGES in ci/install"
    )
    owners = dpkg_owners(path)
    assert owners, (
        f"{t.command}: no Debian package owns {path}; install it with apt "
        f"({t.package}), not by hand"
    )
    provides = t.package in owners or bool(owners & direct_dependencies(t.package))
    assert provides, (
        f"{t.command}: {path} belongs to {', '.join(sorted(owners))}, which {t.package} neither "
        f"is nor depends on; fix the package of {t.command!r} in hil/tools.py"
    )
    assert installed_debian(t.package), f"{t.package} is not installed: run ci/install"


def check_pypi(t: Tool, path: Path) -> None:
    assert t.package.lower() in runtime_dependencies(), (
        f"{t.command} comes from the PyPI package {t.package}, which pyproject.toml's "
        "dependencies do not list"
    )
    dist = importlib.metadata.distribution(t.package)
    files = {os.path.realpath(str(dist.locate_file(f))) for f in dist.files or ()}
    assert os.path.realpath(path) in files, f"{path} is not a file of {t.package}"


def check_npm(t: Tool, path: Path) -> None:
    package_dir = REPO / ".tools" / "node_modules" / t.package
    assert os.path.realpath(path).startswith(str(package_dir.resolve()) + os.sep), (
        f"{path} is not a file of the npm package {t.package}"
    )


@pytest.mark.parametrize("t", tools.TOOLS, ids=[t.command for t in tools.TOOLS])
def test_each_command_comes_from_a_package_ci_install_installs(t: Tool) -> None:
    path = locate(t)
    if path is None:
        if t.optional is not None:
            pytest.skip(f"{t.command} is optional ({t.optional}) and absent here")
        where = {"pypi": "in the venv (pip)", "npm": "in .tools (npm)"}.get(t.source, "")
        pytest.fail(
            f"{t.command} ({t.purpose}) is not installed {where}on this machine: "
            f"ci/install must install {t.package}"
        )
    {"debian": check_debian, "pypi": check_pypi, "npm": check_npm}[t.source](t, path)


def test_the_table_names_each_command_once_with_what_it_is_for() -> None:
    commands = [t.command for t in tools.TOOLS]
    assert len(commands) == len(set(commands))
    for t in tools.TOOLS:
        assert t.where and t.purpose and t.package, t


def test_a_command_the_table_lacks_is_refused_with_what_to_do() -> None:
    with pytest.raises(KeyError, match=r"hil runs 'ifconfig' but hil/tools.py does not list it"):
        tools.argv("ifconfig", "eth0")
    assert tools.argv("ip", "link") == ["ip", "link"]
    assert tools.argv("sshd", "-D") == ["/usr/sbin/sshd", "-D"]  # run from its fixed path


def test_the_agents_own_list_agrees_with_the_table() -> None:
    # The zipapp cannot import hil.tools; what the agent runs by itself must be here too.
    for command, package in remote_tools.COMMANDS.items():
        assert tools.tool(command).package == package
        assert "host" in tools.tool(command).where


def test_the_kernel_build_checks_its_tools_from_the_table() -> None:
    assert set(kernel.BUILD_TOOLS) <= {t.command for t in tools.TOOLS}


def test_the_docs_list_what_hosts_and_the_controller_need() -> None:
    text = REQUIREMENTS_DOC.read_text()
    for where in ("host", "controller"):
        missing = [p for p in tools.packages(where) if f"`{p}`" not in text]
        assert not missing, f"{REQUIREMENTS_DOC.name} does not list the {where} packages {missing}"
