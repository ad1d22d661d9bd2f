"""The ``module_param`` Allure label: one per parameter the run pinned, as read back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hil.report import attach, labels


class _Request:
    """What the label needs of a test's request: the session's pair run."""

    def __init__(self, pinned: dict[str, dict[str, str]]) -> None:
        self.run = SimpleNamespace(pinned=pinned)

    def getfixturevalue(self, name: str) -> object:
        assert name == "hil_run"
        return self.run


def _labels(
    monkeypatch: pytest.MonkeyPatch, pinned: dict[str, dict[str, str]]
) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    monkeypatch.setattr(attach, "label", lambda name, value: got.append((name, value)))
    labels.label_module_params(_Request(pinned))  # type: ignore[arg-type]
    return got


def test_each_pinned_parameter_is_one_label(monkeypatch: pytest.MonkeyPatch) -> None:
    both = {"iw_cxgb4.mpa_rev": "1", "iw_cxgb4.ep_timeout_secs": "10"}
    assert _labels(monkeypatch, {"t6a": both, "t6b": dict(both)}) == [
        ("module_param", "iw_cxgb4.ep_timeout_secs=10"),
        ("module_param", "iw_cxgb4.mpa_rev=1"),
    ]


def test_nothing_pinned_no_label(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _labels(monkeypatch, {}) == []
