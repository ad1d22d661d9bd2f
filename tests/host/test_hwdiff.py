"""Hardware evidence over a test: the counters that changed; the text when a source is absent."""

from __future__ import annotations

from hil.host import hwdiff


def test_only_counters_in_both_snapshots_that_changed_are_listed_in_afters_order() -> None:
    before = {"rx": 5, "tx": 9, "gone": 1, "same": 3}
    after = {"tx": 4, "same": 3, "rx": 8, "new": 7}
    changes = hwdiff.diff_counters(before, after)
    assert [(c.name, c.before, c.after, c.delta) for c in changes] == [
        ("tx", 9, 4, -5),  # a reset counter reads as a negative delta
        ("rx", 5, 8, 3),
    ]


def test_an_absent_source_is_printed_with_its_reason() -> None:
    snap = hwdiff.HostSnapshot(
        "h",
        "eth1",
        {},
        "ethtool -S eth1 failed: no such device",
        None,
        "siw has no debugfs files (only iw_cxgb4 has)",
    )
    text = hwdiff.HwEvidence({"h": snap}, {"h": snap}).to_text()
    assert text == (
        "== h (eth1)\n"
        "ethtool -S: absent: ethtool -S eth1 failed: no such device\n"
        "debugfs: absent: siw has no debugfs files (only iw_cxgb4 has)\n"
    )
