"""The ``hil_metrics`` fixture: how a test records a metric for the nightly's trends.

    def test_storm(hil_metrics, cm):
        ...
        hil_metrics.record("cycle_rate_per_s", rate, "1/s", n=str(n))
        hil_metrics.percentiles("storm_step_us", {"p50": p50, "p99": p99, "max": mx}, "us",
                                step="connect")

Each call is an Allure step (``metric NAME{labels} = VALUE UNIT``) and lands in
``hil-metrics.json``, from which the pipelines keep the history, draw the
trend charts and flag thresholds (docs/reports.md, "Metrics").
``--hil-metric-label K=V`` (repeatable) labels every metric of the session:
the nightly's kernel matrix gives ``kernel=6.12``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import pytest

from hil.errors import InputError
from hil.report import attach
from hil.report.metrics import RECORDER, Metric, Recorder, check_label


class TestMetrics:
    """What ``hil_metrics`` gives a test: :class:`hil.report.metrics.Recorder`'s methods,
    each value also shown as an Allure step."""

    __test__ = False  # not a test class, for pytest's collection

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def record(self, name: str, value: float, unit: str, **labels: str) -> Metric:
        """One value: ``record("destroy_blocked_us", 812.0, "us", scenario="close")``."""
        return attach.metric(name, value, unit, **labels)

    def percentiles(
        self, name: str, stats: Mapping[str, float], unit: str, **labels: str
    ) -> list[Metric]:
        """Percentiles computed elsewhere, one metric each (label ``stat``)."""
        found = self._recorder.percentiles(name, stats, unit, **labels)
        self._steps(found)
        return found

    def distribution(
        self, name: str, samples: Iterable[float], unit: str, **labels: str
    ) -> list[Metric]:
        """p50, p99 and max of raw samples (label ``stat``)."""
        found = self._recorder.distribution(name, samples, unit, **labels)
        self._steps(found)
        return found

    def coverage(
        self, race: str, counts: Mapping[str, int], wanted: Collection[str], **labels: str
    ) -> list[Metric]:
        """A race sweep's rounds per order and the share of ``wanted`` orders reached."""
        found = self._recorder.coverage(race, counts, wanted, **labels)
        self._steps(found)
        return found

    @staticmethod
    def _steps(found: list[Metric]) -> None:
        for m in found:
            with attach.step(f"metric {m.series} = {m.value:g} {m.unit}", value=m.value):
                pass


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil-report", "hil: Allure reports")
    group.addoption(
        "--hil-metric-label",
        action="append",
        default=[],
        metavar="K=V",
        help="Label every metric of the session (repeatable), e.g. kernel=6.12 for a leg "
        "of a kernel matrix.",
    )


def parse_label(text: str) -> tuple[str, str]:
    """``kernel=6.12`` as (key, value); InputError naming the option otherwise."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InputError(f"--hil-metric-label {text!r}: expected K=V, e.g. kernel=6.12")
    check_label(key.strip(), value.strip())
    return key.strip(), value.strip()


def pytest_configure(config: pytest.Config) -> None:
    try:
        labels = dict(parse_label(t) for t in config.getoption("hil_metric_label"))
    except InputError as e:
        raise pytest.UsageError(str(e)) from None
    RECORDER.run_labels = labels


@pytest.fixture
def hil_metrics() -> TestMetrics:
    """Record metrics of this test (name, value, unit, labels); see this module's doc."""
    return TestMetrics(RECORDER)
