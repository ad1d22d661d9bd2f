"""The session's line once the pair is set up: what each host really runs, and a fallback.

The real session output is checked on the virtual lab (tests/run/test_pairrun_lab.py);
this covers the mixed pair and the log record, which the lab cannot show.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from hil.cm.observer import RunInfo
from hil.plugin.session import _ProviderLine
from hil.run.provider import HostProvider, Provider


class Session:
    """Where the observer writes its line (``HilSession.progress``) and finds the run."""

    def __init__(self, provider: Provider) -> None:
        self.run = SimpleNamespace(provider=provider)
        self.lines: list[str] = []

    def progress(self, message: str) -> None:
        self.lines.append(message)


def _host(name: str, driver: str, fallback: bool) -> HostProvider:
    device = "siw_eth1" if driver == "siw" else "cxgb4_0"
    return HostProvider(name, device, driver, fallback, {}, "iw_cxgb4")


def _say(provider: Provider, profile: str, caplog: pytest.LogCaptureFixture) -> str:
    session = Session(provider)
    with caplog.at_level(logging.INFO, logger="hil.plugin.session"):
        _ProviderLine(session).run_started(  # type: ignore[arg-type]
            RunInfo("lab-0-1", ("a", "b"), "L1", provider.driver, profile)
        )
    assert len(session.lines) == 1
    assert [r.getMessage() for r in caplog.records] == [f"hil: {session.lines[0]}"]
    return session.lines[0]


def test_a_siw_fallback_is_said_and_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    provider = Provider((_host("a", "siw", True), _host("b", "siw", True)))
    line = _say(provider, "siw", caplog)
    assert line == (
        "pair lab-0-1 runs siw on both hosts (siw fallback: the inventory says iw_cxgb4); "
        "judged by profile siw"
    )
    assert caplog.records[0].levelno == logging.WARNING


def test_a_mixed_pair_names_each_host(caplog: pytest.LogCaptureFixture) -> None:
    provider = Provider((_host("a", "iw_cxgb4", False), _host("b", "siw", True)))
    line = _say(provider, "iw_cxgb4+siw", caplog)
    assert line == (
        "pair lab-0-1 runs iw_cxgb4 on a and siw on b (siw fallback on b: the inventory "
        "says iw_cxgb4); judged by profile iw_cxgb4+siw"
    )


def test_what_the_inventory_says_is_an_info_line(caplog: pytest.LogCaptureFixture) -> None:
    provider = Provider((_host("a", "iw_cxgb4", False), _host("b", "iw_cxgb4", False)))
    line = _say(provider, "iw_cxgb4", caplog)
    assert line == "pair lab-0-1 runs iw_cxgb4 on both hosts; judged by profile iw_cxgb4"
    assert caplog.records[0].levelno == logging.INFO
