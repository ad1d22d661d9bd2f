"""Reading an Allure results directory: what the report's tests and the plugin's lab tests
check in it.  Imported as ``allureresults`` here and as ``tests.report.allureresults``
from other test directories, so it imports nothing from tests/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NAME = "hardware evidence (ethtool -S, debugfs)"
JSON_NAME = "hardware evidence (json)"


def results(alluredir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]


def all_attachments(alluredir: Path, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The attachments of a test and of its fixtures' set-up and tear-down (containers)."""
    blocks: list[dict[str, Any]] = [result]
    for path in alluredir.glob("*-container.json"):
        container = json.loads(path.read_text())
        if result["uuid"] in container.get("children", []):
            blocks += container.get("befores", []) + container.get("afters", [])
    found: list[dict[str, Any]] = []
    todo = list(blocks)
    while todo:
        s = todo.pop()
        found += s.get("attachments", [])
        todo += s.get("steps", [])
    return found


def assert_siw_guests_evidence(alluredir: Path, test: str) -> None:
    """The lab's check: ``test``'s result carries each siw guest's real ``ethtool -S``
    (virtio_net's per-queue counters, which the test's traffic moved) and says that
    siw has no debugfs."""
    (result,) = [r for r in results(alluredir) if r["name"].startswith(test)]
    found = {a["name"]: a for a in all_attachments(alluredir, result)}
    assert NAME in found, f"{test} has no hardware evidence: {sorted(found)}"
    text = (alluredir / found[NAME]["source"]).read_text()
    data = json.loads((alluredir / found[JSON_NAME]["source"]).read_text())
    assert len(data) == 2, text  # both guests
    for host, snaps in data.items():
        # virtnet_get_ethtool_stats (drivers/net/virtio_net.c): rx_queue_N_*, tx_queue_N_*
        deltas = {c["name"]: c["delta"] for c in snaps["changed"]}
        assert deltas.get("tx_queue_0_packets", 0) > 0, (host, text)
        assert deltas.get("rx_queue_0_bytes", 0) > 0, (host, text)
        assert snaps["before"]["debugfs"] is None and snaps["after"]["debugfs"] is None
        assert "siw has no debugfs files" in snaps["after"]["debugfs_absent"]
    assert "debugfs: absent: siw has no debugfs files (only iw_cxgb4 has)" in text
