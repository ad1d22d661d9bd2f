"""A fuzz finding as an Allure result, beside the night's test results.

``hil peer fuzz --alluredir DIR`` (the nightly's fuzz run:
:mod:`hil.report.pipeline`) writes one result per finding into the results
directory the night's report is generated from: named by the case's scenario,
status ``failed``, a message starting with ``fuzz finding: `` (which puts it in
the **Fuzz findings** category, :mod:`hil.report.categories`, and in no other),
and three attachments: the replay scenario file (``hil peer replay FILE PAIR``
runs it again), the DUT's kernel log lines read after the case (a KASAN report
is among them), and why the case failed (the after-test checks' text, each
kmemleak report).  Allure's result format:
https://allurereport.org/docs/how-it-works-test-result-file/
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hil.report.categories import FUZZ_FINDING_PREFIX
from hil.report.results import KNOWN_KERNEL_LABEL, NODEID_LABEL

SUITE = "hil peer fuzz"
REPLAY = "replay scenario (hil peer replay FILE PAIR)"
KERNEL = "kernel log after the case"
WHY = "why it failed (after-test checks, kmemleak)"


def write_finding(
    alluredir: Path,
    name: str,
    summary: str,
    replay: Path,
    kernel: Sequence[str],
    reasons: Sequence[str],
) -> Path:
    """One failed result for the finding whose replay file is ``replay``: ``summary`` is
    its one line, ``kernel`` the DUT's kernel log lines, ``reasons`` why it failed.
    Returns the result file's path."""
    alluredir.mkdir(parents=True, exist_ok=True)
    why = _attach(alluredir, WHY, "\n".join(reasons) + "\n" if reasons else "(none kept)\n")
    result = _result(alluredir, name, replay, kernel, [why])
    result["status"] = "failed"
    result["statusDetails"] = {"message": f"{FUZZ_FINDING_PREFIX}{summary}", "trace": str(replay)}
    return _write(alluredir, result)


def write_known(
    alluredir: Path, name: str, known: str, replay: Path, kernel: Sequence[str]
) -> Path:
    """One skipped result for a case whose crash a known kernel finding explains (``known``:
    its line, ``known kernel finding ID on HOST: TITLE (UPSTREAM)``): labelled with the
    finding, as a suite test's known finding is (hil.report.testobserver), so the night's
    summary lists it apart and no failure category takes it.  The result file's path."""
    alluredir.mkdir(parents=True, exist_ok=True)
    result = _result(alluredir, name, replay, kernel, [])
    result["status"] = "skipped"
    result["statusDetails"] = {"message": f"crashed the host: {known}", "trace": str(replay)}
    finding = known.removeprefix("known kernel finding ").split(" ", 1)[0]
    result["labels"].append({"name": KNOWN_KERNEL_LABEL, "value": finding})
    return _write(alluredir, result)


def _result(
    alluredir: Path,
    name: str,
    replay: Path,
    kernel: Sequence[str],
    more: list[dict[str, str]],
) -> dict[str, Any]:
    """A result's common part: its name, the time, the labels, the replay file and the
    kernel log attached (then ``more``)."""
    now = int(time.time() * 1000)
    attachments = [
        _attach(alluredir, REPLAY, replay.read_text(), "text/yaml", "yaml"),
        _attach(alluredir, KERNEL, "".join(f"{k}\n" for k in kernel) or "(none)\n"),
        *more,
    ]
    return {
        "uuid": str(uuid.uuid4()),
        "historyId": f"{SUITE}::{name}",
        "name": name,
        "fullName": f"{SUITE}::{name}",
        "stage": "finished",
        "start": now,
        "stop": now,
        "labels": [
            {"name": "suite", "value": SUITE},
            {"name": NODEID_LABEL, "value": f"{SUITE}::{name}"},
        ],
        "attachments": attachments,
    }


def _write(alluredir: Path, result: dict[str, Any]) -> Path:
    path = alluredir / f"{result['uuid']}-result.json"
    path.write_text(json.dumps(result, indent=1))
    return path


def _attach(
    alluredir: Path, name: str, text: str, mime: str = "text/plain", ext: str = "txt"
) -> dict[str, str]:
    source = f"{uuid.uuid4()}-attachment.{ext}"
    (alluredir / source).write_text(text)
    return {"name": name, "source": source, "type": mime}
