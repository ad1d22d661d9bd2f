"""The quarantine list: its checks, and the marks the report plugin gives listed tests in
real pytest runs writing real allure-pytest results."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from hil.errors import InputError
from hil.report import quarantine, results
from hil.report.categories import KNOWN_FLAKY, category_of

pytest_plugins = ["pytester"]

SUITE = """
import pytest

@pytest.mark.parametrize("direction", ["a-to-b", "b-to-a"])
def test_pull(direction):
    assert direction == "a-to-b", "link did not come back"

def test_close():
    raise RuntimeError("siw said no")

def test_steady():
    pass
"""

GOOD = """
- test: suites/test_link.py::test_pull[b-to-a]
  reason: the link comes back before siw notices
  issue: https://tracker.example/hil/42
  since: 2026-11-20
- test: suites/test_link.py::test_close
  reason: a race in siw's close
  issue: https://tracker.example/hil/43
  since: 2026-11-21
"""


def write(root: Path, text: str) -> Path:
    (root / "suites").mkdir(exist_ok=True)
    (root / "suites" / "test_link.py").write_text(SUITE)
    path = root / "suites" / "known-flaky.yaml"
    path.write_text(text)
    return path


def test_a_good_list_loads(tmp_path: Path) -> None:
    entries = quarantine.load(write(tmp_path, GOOD), tmp_path)
    assert entries[0] == quarantine.Entry(
        "suites/test_link.py::test_pull[b-to-a]",
        "the link comes back before siw notices",
        "https://tracker.example/hil/42",
        dt.date(2026, 11, 20),
    )
    assert quarantine.load(write(tmp_path, "[]\n"), tmp_path) == []


def test_an_entry_without_parameters_covers_every_variant() -> None:
    entry = quarantine.Entry("f.py::test_pull", "r", "i", dt.date(2026, 1, 1))
    assert entry.matches("f.py::test_pull[a]") and entry.matches("f.py::test_pull")
    assert not entry.matches("f.py::test_pull_more")
    exact = quarantine.Entry("f.py::test_pull[a]", "r", "i", dt.date(2026, 1, 1))
    assert exact.matches("f.py::test_pull[a]") and not exact.matches("f.py::test_pull[b]")


def test_an_entry_without_a_family_covers_both_families() -> None:
    entry = quarantine.Entry("f.py::test_pull[a-b]", "r", "i", dt.date(2026, 1, 1))
    assert entry.matches("f.py::test_pull[a-b-ipv4]") and entry.matches("f.py::test_pull[a-b-ipv6]")
    assert not entry.matches("f.py::test_pull[a-b-c]") and not entry.matches(
        "f.py::test_pull[b-a-ipv6]"
    )
    one = quarantine.Entry("f.py::test_pull[a-b-ipv6]", "r", "i", dt.date(2026, 1, 1))
    assert one.matches("f.py::test_pull[a-b-ipv6]") and not one.matches("f.py::test_pull[a-b-ipv4]")


ENTRY = "- test: suites/test_link.py::test_close\n  issue: https://x/1\n  since: 2026-11-21\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (ENTRY, r"entry 1: missing reason"),
        (ENTRY + "  reason: ' '\n", r"entry 1: missing reason"),
        (ENTRY + "  reason: r\n  owner: me\n", r"entry 1: unknown key 'owner'"),
        (
            ENTRY.replace("2026-11-21", "soon") + "  reason: r\n",
            r"entry 1: since 'soon' is not a date \(YYYY-MM-DD\)",
        ),
        (
            ENTRY.replace("test_link.py::", "test_gone.py::") + "  reason: r\n",
            r"entry 1: suites/test_gone.py::test_close: no file suites/test_gone.py under ",
        ),
        (
            ENTRY.replace("test_link.py::test_close", "test_link.py") + "  reason: r\n",
            r"entry 1: test 'suites/test_link.py' is not a pytest node id \(FILE::TEST\)",
        ),
        (
            (ENTRY + "  reason: r\n") * 2,
            r"entry 2: suites/test_link.py::test_close is listed twice",
        ),
        ("test: x\n", r"must be a list of entries \(test, reason, issue, since\)"),
        ("- just a string\n", r"entry 1: must be a mapping with test, reason, issue, since"),
        ("- [unclosed\n", r"not YAML"),
    ],
)
def test_a_bad_entry_is_named(tmp_path: Path, text: str, error: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=rf"^{path}: {error}"):
        quarantine.load(path, tmp_path)


def test_an_unknown_test_in_a_collected_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("test_close", "test_nope"))
    entries = quarantine.load(path, tmp_path)
    ids = ["suites/test_link.py::test_close", "suites/test_link.py::test_pull[b-to-a]"]
    with pytest.raises(InputError, match=r"entry 2: no test suites/test_link.py::test_nope in "):
        quarantine.check_known(entries, ids, [], path)
    # a session that selected single tests of the file cannot tell
    quarantine.check_known(entries, ids, ["suites/test_link.py"], path)
    # nor one that did not collect the file
    quarantine.check_known(entries, ["suites/test_other.py::test_x"], [], path)


def result_of(alluredir: Path, nodeid: str) -> dict[str, Any]:
    for path in alluredir.glob("*-result.json"):
        data: dict[str, Any] = json.loads(path.read_text())
        if results.labels(data).get("nodeid") == [nodeid]:
            return data
    raise AssertionError(f"no result of {nodeid}")


def test_listed_tests_are_tagged_and_their_failures_set_apart(pytester: pytest.Pytester) -> None:
    write(pytester.path, GOOD)
    out = pytester.path / "allure"
    run = pytester.runpytest_subprocess(f"--alluredir={out}", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=2, failed=2)
    pull = result_of(out, "suites/test_link.py::test_pull[b-to-a]")
    assert {"name": "tag", "value": "known-flaky"} in pull["labels"]
    assert pull["links"] == [
        {
            "type": "issue",
            "url": "https://tracker.example/hil/42",
            "name": "known flaky since 2026-11-20: the link comes back before siw notices",
        }
    ]
    assert pull["statusDetails"]["flaky"] is True
    message = pull["statusDetails"]["message"]
    assert message.startswith(
        "known flaky: the link comes back before siw notices "
        "(https://tracker.example/hil/42)\nAssertionError: link did not come back"
    )
    assert category_of("failed", message) == KNOWN_FLAKY
    close = result_of(out, "suites/test_link.py::test_close")
    assert close["status"] == "broken" and close["statusDetails"]["flaky"] is True
    assert category_of("broken", close["statusDetails"]["message"]) == KNOWN_FLAKY
    other = result_of(out, "suites/test_link.py::test_pull[a-to-b]")
    assert "flaky" not in (other.get("statusDetails") or {})
    assert {"name": "tag", "value": "known-flaky"} not in other["labels"]
    read = {r.test: r for r in results.read(out)}
    assert read["suites/test_link.py::test_close"].category == KNOWN_FLAKY
    assert read["suites/test_link.py::test_close"].known_flaky
    assert not read["suites/test_link.py::test_steady"].known_flaky
    # marking again (an xdist worker's session end, then the controller's) changes nothing
    before = pull["statusDetails"]["message"]
    quarantine.flag_results(out)
    assert result_of(out, "suites/test_link.py::test_pull[b-to-a]")["statusDetails"]["message"] == (
        before
    )


def test_a_bad_list_stops_the_session_with_the_entry_named(pytester: pytest.Pytester) -> None:
    write(pytester.path, GOOD.replace("test_pull[b-to-a]", "test_pull[sideways]"))
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        f"ERROR: {pytester.path}/suites/known-flaky.yaml: entry 1: no test suites/test_link.py::"
        "test_pull[sideways] in suites/test_link.py (its tests: test_close, test_pull, test_steady)"
    ) in run.stderr.str().splitlines()
    assert "Traceback" not in run.stderr.str()


def test_deselected_tests_still_count_and_an_explicit_list_must_exist(
    pytester: pytest.Pytester,
) -> None:
    write(pytester.path, GOOD)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "steady").assert_outcomes(
        passed=1
    )
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hil-known-flaky=nope.yaml")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    run.stderr.fnmatch_lines(["ERROR: nope.yaml: cannot read the known-flaky list: *"])


def test_under_xdist_a_bad_list_is_one_clear_error(pytester: pytest.Pytester) -> None:
    write(pytester.path, GOOD.replace("  reason: a race in siw's close\n", ""))
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {pytester.path}/suites/known-flaky.yaml: entry 2: missing reason" in (
        run.stderr.str().splitlines()
    )
    assert "INTERNALERROR" not in run.stdout.str() + run.stderr.str()
