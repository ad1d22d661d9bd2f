"""Many processes fight over a few pairs that share hosts; no host is ever
held twice at once, and every process gets its turns."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

# A ring of four hosts plus a diagonal: every pair shares a host with others,
# so at most two leases can be live at once.
PAIRS = [
    ["p01", "h0", "h1"],
    ["p12", "h1", "h2"],
    ["p23", "h2", "h3"],
    ["p30", "h3", "h0"],
    ["p02", "h0", "h2"],
]
WORKERS = 16
CYCLES = 20  # per worker: 320 holds per store


def overlaps(records: list[dict[str, Any]]) -> list[str]:
    """Every time two holds of one host overlapped, described."""
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        for h in set(r["hosts"]):
            by_host[h].append(r)
    found = []
    for host, holds in by_host.items():
        holds.sort(key=lambda r: r["start"])
        latest = holds[0]
        for r in holds[1:]:
            if r["start"] < latest["end"]:
                found.append(
                    f"{host}: lease {r['lease']} ({r['pair']}) began "
                    f"{latest['end'] - r['start']:.6f} s before lease "
                    f"{latest['lease']} ({latest['pair']}) ended"
                )
            if r["end"] > latest["end"]:
                latest = r
    return found


def test_overlap_check_sees_a_double_hold() -> None:
    records = [
        {"lease": "a", "pair": "p01", "hosts": ["h0", "h1"], "start": 1.0, "end": 2.0},
        {"lease": "b", "pair": "p23", "hosts": ["h2", "h3"], "start": 1.5, "end": 2.5},
        {"lease": "c", "pair": "p12", "hosts": ["h1", "h2"], "start": 3.0, "end": 4.0},
        {"lease": "d", "pair": "p30", "hosts": ["h3", "h0"], "start": 1.1, "end": 1.2},
    ]
    assert overlaps(records) == ["h0: lease d (p30) began 0.900000 s before lease a (p01) ended"]
    assert overlaps(records[:3]) == []


def _claims_for(worker: int) -> str:
    # Every third worker takes any pair (in a rotated order); the others
    # insist on one pair, so both kinds of queueing meet.
    if worker % 3 == 0:
        rot = worker % len(PAIRS)
        return json.dumps(PAIRS[rot:] + PAIRS[:rot])
    return json.dumps([PAIRS[worker % len(PAIRS)]])


def test_no_host_is_ever_held_twice(store_url: str, tmp_path: Path, spawn: Any) -> None:
    procs = []
    for w in range(WORKERS):
        procs.append(
            spawn(
                "cycle",
                "--store",
                store_url,
                "--claims",
                _claims_for(w),
                "--cycles",
                str(CYCLES),
                "--seed",
                str(w),
                "--out",
                str(tmp_path / f"w{w}.jsonl"),
            )
        )
    for w, p in enumerate(procs):
        _, err = p.communicate(timeout=150)
        assert p.returncode == 0, f"worker {w} failed: {err}"
    records = []
    for w in range(WORKERS):
        mine = [json.loads(line) for line in (tmp_path / f"w{w}.jsonl").read_text().splitlines()]
        assert len(mine) == CYCLES, f"worker {w} made {len(mine)} of {CYCLES} holds"
        records += mine
    assert len({r["lease"] for r in records}) == WORKERS * CYCLES
    assert overlaps(records) == []
