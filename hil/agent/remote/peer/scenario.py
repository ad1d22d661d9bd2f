"""The scenario interpreter: runs a scenario's steps on an endpoint, in segments.

Steps (issue 26's shared vocabulary, docs/peer.md):

- ``{"step": "send", "frame": KIND, ...overrides}``: encode and write one frame
  (``fin``/``rst`` close our end); ``segments`` (byte counts) splits its bytes into
  writes, ``gap`` (seconds) waits between them, ``coalesce_with_next: true`` holds
  them to go with the next send's, ``truncate: n`` writes only the first n (the
  record's ``raw`` is what went, its fields the whole frame's with ``truncate`` added);
- ``{"step": "expect", "frame": KIND|"fin"|"rst"|"close", "fields": {...}, "within": s}``:
  the next frame the DUT sends must be of that kind with those fields, within
  ``within`` seconds (default 5); ``close`` is either fin or rst; a field ``crc``
  "good"/"bad" is checked as ``crc_ok``;
- ``{"step": "sleep", "seconds": s}``;
- ``{"step": "dut", ...}``: the controller's: the interpreter stops before running on
  and returns its index; ``run`` again continues after it.

The first expectation not met ends the run (``unmet``): what was wanted, what came.
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol.frames import Fields, FrameError, raw
from .endpoint import CLOSES, Endpoint, Entry, PeerError

STEPS = ("send", "expect", "sleep", "dut")
# A send's own keys, not its frame's.
STEP_KEYS = ("step", "segments", "gap", "coalesce_with_next", "truncate")
DEFAULT_WITHIN = 5.0
Outcome = dict[str, Any]  # stopped_at (int | None), unmet (dict | None), error (str | None)


def check_steps(steps: object) -> list[Fields]:
    """``steps`` as a list of step dicts, or FrameError naming the first bad one."""
    if not isinstance(steps, list):
        raise FrameError(f"steps: {type(steps).__name__}, not a list")
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("step") not in STEPS:
            raise FrameError(f"step {i}: {step!r}: 'step' must be one of {', '.join(STEPS)}")
        why = _bad(step)
        if why:
            raise FrameError(f"step {i}: {why}")
    return steps


def _bad(step: Fields) -> str:
    """What is wrong with one step's own keys ("" when nothing)."""
    segments = step.get("segments", [])
    if not isinstance(segments, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in segments
    ):
        return f"segments {segments!r} are not positive byte counts"
    for key in ("seconds", "within", "gap"):
        value = step.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"{key} {value!r} is not a number of seconds"
    cut = step.get("truncate", 0)
    if cut is not None and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 0):
        return f"truncate {cut!r} is not a byte count"
    if not isinstance(step.get("fields", {}), dict):
        return f"fields {step['fields']!r} are not a dict of field values"
    return ""


class Interpreter:
    """Runs ``steps`` on ``endpoint``; each ``run`` goes on from where the last stopped."""

    def __init__(self, endpoint: Endpoint, steps: list[Fields]) -> None:
        self.endpoint = endpoint
        self.steps = steps
        self.index = 0
        self._held = b""  # bytes of coalesced sends not yet written
        self._held_entries: list[Entry] = []

    def renew(self, steps: list[Fields]) -> None:
        """The scenario anew, as many steps (values the DUT shared put in); the steps
        already run stay run.  FrameError when the count differs."""
        if len(steps) != len(self.steps):
            raise FrameError(f"steps: {len(steps)} anew, the scenario has {len(self.steps)}")
        self.steps = steps

    @property
    def done(self) -> bool:
        """Every step has run (or the run ended early)."""
        return self.index >= len(self.steps)

    def run(self, deadline: float) -> Outcome:
        """Run steps until the end, a ``dut`` step, an unmet expectation or an error."""
        while not self.done:
            i, step = self.index, self.steps[self.index]
            self.index += 1
            try:
                outcome = self._step(step, deadline)
            except (FrameError, PeerError, OSError) as e:
                self.index = len(self.steps)
                return {"stopped_at": None, "unmet": None, "error": f"step {i}: {e}"}
            if outcome == "dut":
                return {"stopped_at": i, "unmet": None, "error": None}
            if outcome is not None:
                self.index = len(self.steps)
                return {"stopped_at": None, "unmet": {"step": i, **outcome}, "error": None}
        return {"stopped_at": None, "unmet": None, "error": None}

    def _step(self, step: Fields, deadline: float) -> Any:
        kind = step["step"]
        if kind == "dut":
            return "dut"
        if kind == "sleep":
            time.sleep(max(0.0, min(float(step.get("seconds", 0)), deadline - time.monotonic())))
            return None
        self.endpoint.open(deadline)
        if kind == "send":
            self._send(step, deadline)
            return None
        return self._expect(step, deadline)

    def _send(self, step: Fields, deadline: float) -> None:
        fields = {k: v for k, v in step.items() if k not in STEP_KEYS}
        data, entry = self.endpoint.encode(fields)
        if step.get("truncate") is not None:
            data = data[: step["truncate"]]
            entry["raw"] = raw(data)
            entry["fields"]["truncate"] = step["truncate"]
        self._held += data
        self._held_entries.append(entry)
        if step.get("coalesce_with_next"):
            return
        data, self._held = self._held, b""
        entries, self._held_entries = self._held_entries, []
        if data:
            self.endpoint.write(data, step.get("segments", []), deadline, float(step.get("gap", 0)))
        for entry in entries:
            self.endpoint.stamp(entry)
        if entries[-1]["frame"] in CLOSES:
            self.endpoint.close_tx(entries[-1]["frame"])

    def _expect(self, step: Fields, deadline: float) -> Fields | None:
        within = float(step.get("within", DEFAULT_WITHIN))
        got = self.endpoint.read(min(deadline, time.monotonic() + within))
        wanted = {"frame": step.get("frame"), "fields": step.get("fields", {})}
        why = mismatch(wanted["frame"], wanted["fields"], got)
        return None if why is None else {"expected": wanted, "got": got, "why": why}


def mismatch(frame: object, fields: Fields, got: Entry | None) -> str | None:
    """Why ``got`` is not the expected ``frame`` with ``fields``, or None when it is."""
    if got is None:
        return f"no {frame} in time"
    kind = got["frame"]
    if not (kind == frame or (frame == "close" and kind in CLOSES)):
        return f"{kind} came, not {frame}"
    have = got.get("fields", {})
    for name, want in fields.items():
        if name == "crc" and want in ("good", "bad"):
            name, want = "crc_ok", want == "good"
        value = have.get(name)
        if isinstance(want, str) and isinstance(value, str):
            same = want.lower() == value.lower()
        else:
            same = value == want
        if not same:
            return f"{name} is {value!r}, not {want!r}"
    return None
