"""Every command the README and docs/*.md show a user runs here, as written, or is listed.

A doc command is a line of a shell code block (fenced, plain or ``sh``, or
indented) that calls ``hil``, ``pytest``, ``python -m pytest`` or a ``ci/``
script.  Each one either runs, from the repository root, with the venv
activated the way ``ci/install`` leaves it (hil installed editable), against
the example inventory and an empty store:

- ``RUN``: as written (``hil inventory check``, ``hil status``, ...);
- ``COLLECT``: a pytest command, with ``--collect-only`` appended: running a
  test would take a pair of real hosts;

or is listed in ``NOT_RUN`` by its start, with the reason (it needs real
hosts, the virtual lab, or runs everything); a ``hil`` one is then still
parsed by hil's own parser, a ``ci/`` one must exist.  A new doc command that
matches none of them fails ``test_doc_command``.

The venv is used as a user's shell has it: ``hil`` found through an editable
install's import hook, not through a ``sys.path`` entry (``PYTHONPATH=$PWD``
would hide what only an editable install shows: issue 24, the plugin failing
to load with "Module already imported so cannot be rewritten").
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from hil.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
VENV_BIN = Path(sys.executable).parent
EXAMPLE = "inventory/example-lab.yaml"
TIMEOUT = 60.0

FENCE = re.compile(r"^\s*```\s*(\S*)")
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}
# A command word where a shell would run it: at the start (of a crontab line too), after
# `;`, `|`, `(`, `$(`, a quote (`trap 'hil release ...'`) or `do`, past env settings and
# the wrappers the docs use.  Not after a backtick: that is prose quoting a command.
COMMAND = re.compile(
    r"(?:^|[;&|(]\s*|\$\(|'|\b(?:do|then|else|exec)\s+)"
    r"(?:(?:[\d*/,-]+\s+){5}|[A-Z_]+=\S*\s+|flock\s+\S+\s+|nice\s+-n\s+\d+\s+|sh\s+-c\s+')*"
    r"(?:(?:\.venv/bin/)?(?:hil|pytest)(?=[\s')]|$)|(?:\.venv/bin/)?python3?\s+-m\s+pytest\b"
    r"|\.?ci/[\w-]+)"
)
# hil's own messages ("hil report: 41 passed", "hil: holder ...") shown as output.
OUTPUT = re.compile(r"^hil( [\w-]+)?:")
COMMENT = re.compile(r"\s+#\s.*$")
CRON_SCHEDULE = re.compile(r"^(?:[\d*/,-]+\s+){5}")

RUN = "run"
COLLECT = "collect"
HOSTS = "reaches the inventory's hosts over SSH"
LAB = "needs the virtual lab's guests up (tests do not boot one for this)"
LEASE_JOB = "a CI job's lease kept alive around a run, on the lab's PostgreSQL store"
# How each doc command runs here, by its start (the longest that matches).
HOW: dict[str, str] = {
    "hil inventory check ": RUN,
    "hil inventory show inventory/": RUN,
    "hil status": RUN,
    "hil cm list": RUN,
    "pytest ": COLLECT,
    ".venv/bin/python -m pytest ": COLLECT,
}
NOT_RUN: dict[str, str] = {
    "ci/suites": "builds and boots the virtual lab, then runs every suite",
    "ci/tests": "runs the whole tests/ tree and builds the lab kernel",
    "ci/nightly": "runs every suite on a lab (the virtual lab when no inventory is given)",
    "ci/run-suite": "ci/nightly for one suite, on a lab",
    "hil host doctor ": HOSTS,
    "hil inventory check --peers ": HOSTS + " (each peer host's routes)",
    "hil host recover ": HOSTS + " and power-cycles the host",
    "hil lab-check": HOSTS,
    "hil cm run ": HOSTS,
    "hil peer ": HOSTS + " (a pair's DUT and peer)",
    "hil lab ": "builds a kernel or boots, reads or stops the virtual lab",
    'hil inventory show "$(hil lab inventory)"': LAB,
    'hil --inventory "$(hil lab inventory)" ...': LAB + "; a synopsis",
    "export HIL_INVENTORY=$(hil lab inventory)": LAB,
    ".venv/bin/python bench/agent.py ": LAB,
    "hil --inventory /tmp/hil-rstlab/inventory.yaml ": LAB + " booted on a mutant kernel",
    "HIL_LAB_KERNEL_TESTS=1 ": "boots labs on kernels of its own (opt-in lab tests)",
    "*/15 * * * *  hil --inventory /etc/hil/lab.yaml ": "a crontab line for the lab's hosts",
    "hil wire judge ": "judges the doc's own capture files (tests/wire judges real ones)",
    "hil nightly drift ": "reads a nightly's drift history (tests/cli/test_nightly_cmd.py has one)",
    "hil reserve --pair t6-pair-1 --ttl 60 --hold ": "holds a lease until signalled",
    "lease_json=$(hil reserve ": LEASE_JOB,
    "trap 'hil release ": LEASE_JOB,
    "( while sleep 40; do hil renew ": LEASE_JOB,
    'pytest suites/ --hil-inventory "$HIL_INVENTORY" --hil-lease "$lease"': LEASE_JOB,
}
# The inventory file names a doc leaves to the reader; the example inventory stands for them.
PLACEHOLDER = re.compile(r"(?<![\w/.-])(?:inventory/my-lab|inventory/lab|lab)\.yaml")


@dataclass(frozen=True)
class DocCommand:
    """One command line of a doc, its trailing comment stripped."""

    doc: str
    line: str


def blocks(text: str) -> Iterator[list[str]]:
    """The shell code blocks of a Markdown text: fenced (plain or shell) and indented."""
    fence: str | None = None
    block: list[str] = []
    indented, blank_before = False, True
    for line in text.splitlines():
        opening = FENCE.match(line)
        if fence is not None:
            if opening is None:
                block.append(line)
                continue
            if fence in SHELL_LANGUAGES:
                yield block
            fence = None
            continue
        if indented and (opening or (line.strip() and not line.startswith("    "))):
            yield block
            indented = False
        if opening:
            fence, block = opening.group(1), []
        elif line.startswith("    ") and (indented or blank_before):
            block = block if indented else []
            indented = True
            block.append(line[4:])
        blank_before = not line.strip()
    if indented:
        yield block


def logical_lines(block: list[str]) -> Iterator[str]:
    """A block's lines, joined over a trailing backslash or an open quote."""
    line = ""
    for raw in block:
        line = f"{line} {raw.strip()}" if line else raw.strip()
        if line.endswith("\\"):
            line = line[:-1].rstrip()
            continue
        try:
            shlex.split(line, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        yield line
        line = ""


def doc_commands() -> list[DocCommand]:
    """Every command line of the README and docs/*.md, in order."""
    found = []
    for doc in DOCS:
        for block in blocks(doc.read_text()):
            for line in logical_lines(block):
                line = COMMENT.sub("", line.removeprefix("$ "))
                if COMMAND.search(line) and not OUTPUT.match(line):
                    found.append(DocCommand(str(doc.relative_to(REPO)), line))
    return found


def rule(line: str, table: dict[str, str]) -> str | None:
    """The key of ``table`` that ``line`` starts with (the longest), or None."""
    keys = [key for key in table if line == key.rstrip() or line.startswith(key)]
    return max(keys, key=len) if keys else None


def runnable(line: str) -> str | None:
    """The shell command that runs ``line`` here, or None when it is not run."""
    how = rule(line, HOW)
    if how is None or rule(line, NOT_RUN) is not None:
        return None
    line = PLACEHOLDER.sub(EXAMPLE, line)
    return f"{line} --collect-only -q -p no:cacheprovider" if HOW[how] == COLLECT else line


SITECUSTOMIZE = """\
import sys
from importlib.machinery import PathFinder


class _ThisCheckout:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return PathFinder.find_spec(name, [{repo!r}]) if name == "hil" else None


sys.meta_path.insert(0, _ThisCheckout)
"""


def user_env(site: Path, tmp: Path) -> dict[str, str]:
    """A user's environment after `. .venv/bin/activate` and the README's exports.

    ``site`` holds a sitecustomize that finds ``hil`` in this checkout through an
    import hook, as the editable install that ``ci/install`` makes does (the
    venv's own hook may point at another checkout that shares it: README,
    "Layout").
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIL_", "PYTEST_", "PYTHON"))}
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(repo=str(REPO)))
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(VENV_BIN.parent),
        PYTHONPATH=str(site),
        HIL_INVENTORY=EXAMPLE,
        HIL_STORE=str(tmp / "store.db"),
    )
    return env


@dataclass(frozen=True)
class Ran:
    """How a shell command ended."""

    command: str
    returncode: int
    output: str


def run(command: str, cwd: Path, env: dict[str, str]) -> Ran:
    """``command`` run by bash in ``cwd``."""
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return Ran(command, done.returncode, done.stdout + done.stderr)


COMMANDS = doc_commands()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return user_env(tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("state"))


@pytest.fixture(scope="module")
def ran(env: dict[str, str]) -> dict[str, Ran]:
    """Every runnable doc command, run from the repository root, several at a time."""
    commands = sorted({c for c in map(runnable, (d.line for d in COMMANDS)) if c is not None})
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda command: run(command, REPO, env), commands)
        return {r.command: r for r in done}


def test_the_environment_finds_this_checkout_through_an_import_hook(env: dict[str, str]) -> None:
    probe = f"import hil, sys; print(hil.__file__, {str(REPO)!r} in sys.path)"
    out = run(f"python -c {shlex.quote(probe)}", Path("/"), env)
    assert out.output.split() == [str(REPO / "hil" / "__init__.py"), "False"], out.output


def test_the_readme_everyday_commands_are_found() -> None:
    readme = {c.line for c in COMMANDS if c.doc == "README.md"}
    assert {"pytest suites/test_close.py --hil-require driver=iw_cxgb4", "hil status"} <= readme


def checked_without_running(line: str) -> None:
    """A command not run here is at least well formed: hil parses it, a script exists."""
    line = CRON_SCHEDULE.sub("", line)
    words = shlex.split(line) if not re.search(r"[$\[|&>]|\.\.\.", line) else []
    if words and words[0] in ("hil", ".venv/bin/hil"):
        try:
            build_parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"`{line}`: hil does not take it (argparse's message above)")
    for script in re.findall(r"(?<![\w/.-])(\.?ci/[\w-]+)", line):
        assert os.access(REPO / script, os.X_OK), f"`{line}`: no executable {script}"
    if words[:1] == ["ci/run-suite"]:  # SUITE: a path, or NAME of suites/test_NAME.py
        suite = words[1] if len(words) > 1 else ""
        paths = (REPO / suite, REPO / "suites" / f"test_{suite}.py")
        assert suite and any(p.is_file() for p in paths), f"`{line}`: no suite {suite!r}"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.doc}:{c.line[:60]}")
def test_doc_command(command: DocCommand, ran: dict[str, Ran]) -> None:
    shell = runnable(command.line)
    if shell is not None:
        result = ran[shell]
        assert result.returncode == 0, f"{command.doc}: `{shell}`:\n{result.output}"
        return
    listed = rule(command.line, NOT_RUN)
    assert listed is not None, (
        f"{command.doc}: `{command.line}` is neither run nor listed in NOT_RUN with a reason"
    )
    checked_without_running(command.line)


def test_every_listed_command_is_still_in_the_docs() -> None:
    lines = [c.line for c in COMMANDS]
    for table in (HOW, NOT_RUN):
        stale = [key for key in table if not any(rule(line, {key: ""}) for line in lines)]
        assert not stale, f"no doc shows these any more; drop them: {stale}"


@pytest.mark.parametrize("pytest_command", ["pytest", "python -m pytest"])
def test_suites_run_from_outside_the_checkout(
    pytest_command: str, env: dict[str, str], tmp_path: Path
) -> None:
    """A lab's own directory, the suites named by path (docs/plugin.md: any pytest run has it)."""
    command = f"{pytest_command} {REPO}/suites/test_close.py --collect-only -q -p no:cacheprovider"
    result = run(command, tmp_path, env)
    assert result.returncode == 0, result.output
    assert "5 tests collected" in result.output, result.output
