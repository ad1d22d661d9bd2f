"""Known kernel findings in the after-test checks (:mod:`hil.judge.known`).

``--hil-known-kernel-findings FILE`` names the list; without it,
``suites/known-kernel-findings.yaml`` under the rootdir when it exists.  A bad
list stops the session with the entry named.  The after-test checks
(:mod:`hil.plugin.fixtures`) judge each test's kernel log without the reports
that are known findings of that test on the pair's kernel; each such report
is attached to the test (``known kernel finding ID on HOST``), gives it the
Allure label ``known_kernel_finding`` (the nightly's summary lists them:
:func:`hil.report.flaky.known_kernel_lines`) and a link to where it is filed,
and does not fail it.  Any other report in the same log still does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hil.errors import InputError
from hil.judge import known
from hil.judge.checks import CheckResult, Known
from hil.plugin import kernel, option_group
from hil.report import attach
from hil.report.results import KNOWN_KERNEL_LABEL

if TYPE_CHECKING:
    from hil.run import PairRun

DEFAULT_LIST = Path("suites") / "known-kernel-findings.yaml"  # under pytest's rootdir
FINDINGS_KEY = pytest.StashKey[tuple[known.KnownFinding, ...]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--hil-known-kernel-findings",
        metavar="FILE",
        help="The known kernel findings (reported apart, not failing the test that is "
        f"known to show them; default {DEFAULT_LIST} under the rootdir, when it exists).",
    )


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("hil_known_kernel_findings", None)
    path = Path(given) if given else config.rootpath / DEFAULT_LIST
    if not given and not path.is_file():
        return
    try:
        config.stash[FINDINGS_KEY] = known.load(path, config.rootpath)
    except InputError as e:
        raise pytest.UsageError(str(e)) from None


def scope(request: pytest.FixtureRequest, run: PairRun) -> Known | None:
    """The known findings for this test on the pair's kernels; None when there are none."""
    findings = request.config.stash.get(FINDINGS_KEY, ())
    if not findings:
        return None
    return Known(findings, request.node.nodeid, kernel.releases(request.config, run))


def report(node: pytest.Item, result: CheckResult) -> None:
    """Attach each known finding the checks told apart, label the test with its id."""
    for match in result.known:
        name = f"known kernel finding {match.finding.id} on {match.report.host}"
        head = f"{match.line()}\nstatus: {match.finding.status}\n\n"
        attach.note(name, head + match.report.text())
        attach.label(KNOWN_KERNEL_LABEL, match.finding.id)
        attach.link(match.finding.upstream, f"known kernel finding {match.finding.id}")
        node.add_report_section("teardown", name, match.report.text())
