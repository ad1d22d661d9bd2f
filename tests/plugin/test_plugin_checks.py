"""The plugin's after-test check options and a CM test's fixtures, without a lab.

Any test directory gets them from the installed plugin (moved here from
tests/test_checks.py, which copied the suites' conftest before the plugin
provided them).
"""

from __future__ import annotations

import pytest

from hil.host import evidence

pytest_plugins = ["pytester"]


@pytest.fixture
def test_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytest dir with one test on the pair and nothing of hil's own in it."""
    pytester.makepyfile(
        test_one="""
        import pytest

        @pytest.mark.disruptive
        def test_on_pair(cm, contract):
            pass
    """
    )
    return pytester


def test_a_bad_allow_pattern_is_a_one_line_usage_error(test_dir: pytest.Pytester) -> None:
    result = test_dir.runpytest_subprocess("--hil-kmsg-allow", "(oops", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*kernel log allow pattern '(oops' is not a regular expression*"])
    assert "Traceback" not in result.stderr.str()


def test_without_inventory_a_cm_test_skips_saying_how_to_run(test_dir: pytest.Pytester) -> None:
    result = test_dir.runpytest_subprocess("--strict-markers", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)  # one per direction
    result.stdout.fnmatch_lines(["*no lab inventory: pass --hil-inventory FILE*"])


def test_the_settle_option_defaults_to_the_one_settle_bound(test_dir: pytest.Pytester) -> None:
    result = test_dir.runpytest_subprocess("--help", "-p", "no:cacheprovider")
    text = " ".join(result.stdout.str().split())
    assert f"baseline (default {evidence.SETTLE_S:g})." in text
