"""The timeout layers in a real pytest session (hil/plugin/timeouts.py), through pytester.

Tiny tests that sleep stand in for a slow lab; a session fixture whose
teardown writes a file stands in for the pair's restore.  On the netns lab
(at the end), the restore is the real one: an MTU changed through the journal.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from netnslab import NetnsLab
from test_plugin_hosts import CHANGE_MTU, mtu

from hil.reservation import open_store

pytest_plugins = ["pytester"]

SLEEPERS = """
import os, time, pytest

@pytest.fixture(scope="session")
def pair():
    yield
    with open(os.environ["OUT"], "a") as f:
        f.write("restored\\n")

@pytest.mark.parametrize("n", range(4))
def test_sleep(pair, n):
    with open(os.environ["OUT"], "a") as f:
        f.write(f"test {n}\\n")
    time.sleep({sleep})
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


@pytest.fixture
def out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "out.txt"
    monkeypatch.setenv("OUT", str(path))
    return path


def test_a_session_that_overruns_stops_after_the_test_under_way_restored_and_says_so(
    pytester: pytest.Pytester, out: Path
) -> None:
    # The first test ends at once, well within 2 s however slowly a loaded machine gets
    # there; the second, under way at 2 s, ends 2.5 s later; the other two never start.
    pytester.makepyfile(SLEEPERS.replace("{sleep}", "2.5 if n == 1 else 0"))
    result = run(pytester, "--hil-timeout-session", "2")
    assert out.read_text().splitlines() == ["test 0", "test 1", "restored"]
    assert result.ret == pytest.ExitCode.INTERRUPTED
    said = (
        "timeout (session layer, 2 s: --hil-timeout-session) waiting for its 4 tests: "
        "stopped after test_a_session_that_overruns_stops_after_the_test_under_way_restored_"
        "and_says_so.py::test_sleep[1], 2 not run; the session's teardown restores the pair "
        "as at any end"
    )
    assert f"hil: {said}" in result.outlines
    assert f"! Interrupted: {said} !" in result.outlines


def test_a_session_within_its_bound_runs_every_test(pytester: pytest.Pytester, out: Path) -> None:
    pytester.makepyfile(SLEEPERS.replace("{sleep}", "0"))
    run(pytester, "--hil-timeout-session", "60").assert_outcomes(passed=4)
    assert out.read_text().count("test ") == 4


def test_a_test_past_its_bound_fails_naming_the_layer_and_its_fixtures_still_restore(
    pytester: pytest.Pytester, out: Path
) -> None:
    pytester.makepyfile(SLEEPERS.replace("{sleep}", "30 if n == 1 else 0"))
    result = run(pytester, "--hil-timeout-test", "1")
    result.assert_outcomes(passed=3, failed=1)
    assert out.read_text().splitlines() == ["test 0", "test 1", "test 2", "test 3", "restored"]
    result.stdout.fnmatch_lines(
        [
            "*Timeout (test layer, 1 s) waiting for "
            "*::test_sleep[[]1[]] to finish its call; its fixtures' teardown still runs*"
        ]
    )


def test_a_slow_setup_is_named_as_the_phase_the_test_layer_cut(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import time, pytest

        @pytest.fixture
        def slow():
            time.sleep(30)

        def test_x(slow):
            pass
        """
    )
    result = run(pytester, "--hil-timeout-test", "0.5")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*Timeout (test layer, 0.5 s) waiting for *test_x to finish its setup*"]
    )


def test_a_teardown_gets_a_bound_of_its_own_not_what_the_test_left(
    pytester: pytest.Pytester,
) -> None:
    # The teardown is the restore: 1.5 s of setup and call, then 1.5 s of teardown, each
    # within 2.5 s (with 1 s to spare for a loaded machine), the teardown more than the
    # test left; a teardown that hangs is still cut, naming its phase.
    pytester.makepyfile(
        """
        import time, pytest

        @pytest.fixture
        def restore():
            time.sleep(0.75)
            yield
            time.sleep(1.5)

        def test_x(restore):
            time.sleep(0.75)

        @pytest.fixture
        def hangs():
            yield
            time.sleep(30)

        def test_y(hangs):
            pass
        """
    )
    result = run(pytester, "--hil-timeout-test", "2.5")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*Timeout (test layer, 2.5 s) waiting for *test_y to finish its teardown"]
    )


def test_hil_timeout_test_and_pytest_timeouts_own_option_are_one_not_two(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester, "--hil-timeout-test", "5", "--timeout", "7")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*give --hil-timeout-test or --timeout, not both*"])


def test_a_bad_timeout_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--hil-timeout-session", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*not a number of seconds: 'soon'*"])


def test_the_agent_and_step_options_set_those_layers_for_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        from hil.timeouts import active

        def test_x():
            assert (active().agent_call_s, active().step_slack_s) == (7, 3)
        """
    )
    run(pytester, "--hil-timeout-agent", "7", "--hil-timeout-step-slack", "3").assert_outcomes(
        passed=1
    )


INVENTORY = """\
hosts:
  h1:
    ssh: {host: 127.0.0.1, port: 22}
    rnics: [{name: p0, netdev: data0, driver: siw, speed: 10000}]
  h2:
    ssh: {host: 127.0.0.1, port: 22}
    rnics: [{name: p0, netdev: data0, driver: siw, speed: 10000}]
links:
  pair-1:
    ends: [h1:p0, h2:p0]
"""


def test_a_lab_session_with_no_test_timeout_configured_gets_the_test_layers_default(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(INVENTORY)
    pytester.makepyfile(
        """
        def test_x(request):
            assert request.config.getoption("timeout") == 600
        """
    )
    run(
        pytester, "--hil-inventory", str(inventory), "--hil-store", str(tmp_path / "s.db")
    ).assert_outcomes(passed=1)


# -- on the netns lab: real sshd, agent and netlink; the restore is the journal's ----------

# The session's SSH and agents, set up by the first test that asks for them, outside the
# bound of the test after it: the bound covers setup and call, and connecting to both
# hosts may take a loaded machine most of a bound of a few seconds.
CONNECT_FIRST = """
import pytest

@pytest.mark.timeout(120)
def test_connect(hil_pair, hil_hosts, hil_journal):
    pass
"""


def netns_run(
    pytester: pytest.Pytester, lab: NetnsLab, store: Path, *extra: str
) -> pytest.RunResult:
    return run(
        pytester, "--hil-inventory", str(lab.inventory_path), "--hil-store", str(store), *extra
    )


def test_a_test_past_its_bound_on_a_real_pair_still_restores_it(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    before = mtu(netns_lab)
    test = CHANGE_MTU.format(mtu=before, after="import time; time.sleep(60)")
    pytester.makepyfile(CONNECT_FIRST + test)
    store = tmp_path / "s.db"
    result = netns_run(pytester, netns_lab, store, "--hil-timeout-test", "3")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*Timeout (test layer, 3 s) waiting for *test_change to finish its call*"]
    )
    assert mtu(netns_lab) == before  # undone by the session's teardown
    with open_store(str(store)) as s:
        assert s.leases() == []
        assert s.journal_entries("ns0") == []


def test_a_session_past_its_bound_on_a_real_pair_stops_restored(
    pytester: pytest.Pytester, netns_lab: NetnsLab, tmp_path: Path
) -> None:
    before = mtu(netns_lab)
    test = CHANGE_MTU.format(mtu=before, after="time.sleep(1)")
    pytester.makepyfile(f"import time\n{test}\ntest_again = test_change\n")
    store = tmp_path / "s.db"
    result = netns_run(pytester, netns_lab, store, "--hil-timeout-session", "0.5")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "hil: timeout (session layer, 0.5 s: --hil-timeout-session) waiting for its 2 tests: "
            "stopped after *::test_change, 1 not run; *"
        ]
    )
    assert mtu(netns_lab) == before
    with open_store(str(store)) as s:
        assert s.leases() == []
        assert s.journal_entries("ns0") == []
