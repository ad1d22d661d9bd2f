"""Stand-in suites run night after night through the real pipeline (``hil.report.pipeline``,
what ci/nightly runs): the files of a suite, and a file whose text changes each night."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from hil.report import pipeline

needs_allure = pytest.mark.skipif(
    not pipeline.DEFAULT_ALLURE.exists(),
    reason="needs the Allure generator in .tools (ci/install installs it)",
)


def run_nights(
    work: Path,
    files: Mapping[str, str],
    night_file: str,
    nights: Sequence[str],
    argv: Sequence[str] = (),
) -> tuple[Path, list[int]]:
    """Write ``files`` into ``work/suites``, then run the pipeline once per night with
    ``night_file`` holding that night's text; (reports dir, exit codes)."""
    suites = work / "suites"
    suites.mkdir()
    for name, text in files.items():
        (suites / name).write_text(text)
    reports = work / "reports"
    codes = []
    for night in nights:
        (suites / night_file).write_text(night)
        args = [str(suites), "--reports", str(reports), *argv]
        codes.append(pipeline.main([*args, "--", "-q", f"--rootdir={work}"]))
    return reports, codes
