"""The quarantine list: known-flaky tests that still run and are reported apart.

``suites/known-flaky.yaml`` (or ``--hil-known-flaky FILE``) lists them::

    - test: suites/test_link_pull.py::test_pull[admin-a-to-b]   # a node id; without
      reason: the link comes back before siw notices              # [...] every variant
      issue: https://tracker.example/hil/42
      since: 2026-11-20

The report plugin gives each listed test the Allure tag ``known-flaky`` and
an issue link at collection; after the session, it marks those results
flaky (Allure's bomb icon) and starts a failure's message with ``known
flaky: <reason> (<issue>)``, so the report's **Known flaky** category holds
it and no other category does.  The pipeline counts such failures apart and
they do not fail the nightly (docs/reports.md).  A bad list (not a list of
entries, a missing or empty field, an unknown key, a test id twice, a file
or test that does not exist) stops the session with the entry named.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hil.errors import InputError
from hil.judge.known import covers, no_repeats, yaml_entries, yaml_mapping
from hil.report.categories import KNOWN_FLAKY_PREFIX
from hil.report.results import FAILING, KNOWN_FLAKY_TAG, labels

DEFAULT_LIST = Path("suites") / "known-flaky.yaml"  # under pytest's rootdir
FIELDS = ("test", "reason", "issue", "since")
LINK_NAME = "known flaky since {since}: {reason}"


@dataclass(frozen=True)
class Entry:
    """One quarantined test (or every variant of a parametrized one)."""

    test: str  # a pytest node id, rootdir-relative; without [params] it covers every variant
    reason: str
    issue: str
    since: dt.date

    @property
    def file(self) -> str:
        return self.test.split("::", 1)[0]

    def matches(self, nodeid: str) -> bool:
        """Whether the entry covers the test with this node id."""
        return covers(self.test, nodeid)


LIST_KEY = pytest.StashKey[tuple[Path, list[Entry]]]()  # the loaded list, per process


def load(path: Path, rootdir: Path) -> list[Entry]:
    """The entries of a quarantine list; InputError naming the file and entry when bad."""
    data = yaml_entries(path, "known-flaky list", FIELDS)
    entries = [_entry(path, i, raw, rootdir) for i, raw in enumerate(data, 1)]
    no_repeats(path, [e.test for e in entries])
    return entries


def _entry(path: Path, index: int, raw: Any, rootdir: Path) -> Entry:
    where = f"{path}: entry {index}"
    raw = yaml_mapping(where, raw, FIELDS)
    test = str(raw["test"]).strip()
    if "::" not in test:
        raise InputError(f"{where}: test {test!r} is not a pytest node id (FILE::TEST)")
    since = raw["since"]
    if not isinstance(since, dt.date):
        try:
            since = dt.date.fromisoformat(str(since))
        except ValueError:
            raise InputError(f"{where}: since {since!r} is not a date (YYYY-MM-DD)") from None
    entry = Entry(test, str(raw["reason"]).strip(), str(raw["issue"]).strip(), since)
    if not (rootdir / entry.file).is_file():
        raise InputError(f"{where}: {entry.test}: no file {entry.file} under {rootdir}")
    return entry


def check_known(
    entries: Iterable[Entry], nodeids: Sequence[str], narrowed: Iterable[str], list_path: Path
) -> None:
    """InputError for an entry whose file was collected whole but matches none of its tests.

    ``narrowed``: files the session selected single tests of (``FILE::TEST`` arguments),
    whose other tests were not collected and so cannot be checked.
    """
    skip = set(narrowed)
    for i, entry in enumerate(entries, 1):
        in_file = [n for n in nodeids if n.startswith(entry.file + "::")]
        if in_file and entry.file not in skip and not any(entry.matches(n) for n in in_file):
            shown = ", ".join(sorted({n.split("::", 1)[1].split("[")[0] for n in in_file})[:8])
            raise InputError(
                f"{list_path}: entry {i}: no test {entry.test} in {entry.file} (its tests: {shown})"
            )


def configure(config: pytest.Config) -> None:
    """Load the list once per process: ``--hil-known-flaky`` or, when that is not given,
    ``suites/known-flaky.yaml`` under the rootdir if it exists; UsageError on a bad one."""
    given = config.getoption("hil_known_flaky", None)
    path = Path(given) if given else config.rootpath / DEFAULT_LIST
    if not given and not path.is_file():
        return
    try:
        config.stash[LIST_KEY] = (path, load(path, config.rootpath))
    except InputError as e:
        raise pytest.UsageError(str(e)) from None


def mark_items(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Tag each listed test ``known-flaky`` with its issue link; UsageError for an entry
    that names no collected test."""
    path, entries = config.stash.get(LIST_KEY, (DEFAULT_LIST, []))
    # An xdist worker's UsageError is an INTERNALERROR without its message (and the
    # controller collects nothing): under -n only the list itself is checked.
    if entries and not hasattr(config, "workerinput"):
        narrowed = {str(a).split("::", 1)[0] for a in config.args if "::" in str(a)}
        try:
            check_known(entries, [i.nodeid for i in items], narrowed, path)
        except InputError as e:
            raise pytest.UsageError(str(e)) from None
    for item in items:
        entry = entry_for(entries, item.nodeid)
        if entry is not None:
            item.add_marker(pytest.mark.allure_label(KNOWN_FLAKY_TAG, label_type="tag"))
            item.add_marker(
                pytest.mark.allure_link(entry.issue, link_type="issue", name=link_name(entry))
            )


def entry_for(entries: Iterable[Entry], nodeid: str) -> Entry | None:
    """The entry covering a test, if any."""
    return next((e for e in entries if e.matches(nodeid)), None)


def link_name(entry: Entry) -> str:
    """The issue link's name on a quarantined test: why and since when."""
    return LINK_NAME.format(since=entry.since.isoformat(), reason=entry.reason)


def flag_results(alluredir: Path) -> int:
    """Mark the known-flaky tests' results: flaky, and a failure's message starts with
    ``known flaky: <reason> (<issue>)`` (the category's key).  Idempotent; the count marked."""
    marked = 0
    for path in alluredir.glob("*-result.json"):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        if KNOWN_FLAKY_TAG not in labels(data).get("tag", []):
            continue
        details = data["statusDetails"] = data.get("statusDetails") or {}
        details["flaky"] = True
        message = str(details.get("message") or "")
        if data.get("status") in FAILING and not message.startswith(KNOWN_FLAKY_PREFIX):
            details["message"] = _prefix(data) + message
        path.write_text(json.dumps(data))
        marked += 1
    return marked


def _prefix(data: dict[str, Any]) -> str:
    link = next(
        (x for x in data.get("links") or [] if str(x.get("name", "")).startswith("known flaky")),
        None,
    )
    if link is None:
        return f"{KNOWN_FLAKY_PREFIX}(quarantined)\n"
    reason = str(link["name"]).split(": ", 1)[-1]
    return f"{KNOWN_FLAKY_PREFIX}{reason} ({link.get('url', '')})\n"
