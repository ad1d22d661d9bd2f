"""What the report's SVG pictures share: sizes, colors, the time axis, tick steps
and labels staggered so that they do not overlap."""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 1100
GUTTER = 150  # left margin for the lane names
RIGHT = 30
FONT = 11
CHAR_W = 6.4  # average glyph width at FONT px, for label collision estimates
ROW_H = 15
MAX_ROWS = 5  # label rows per track; more labels only get tooltips
OK_COLOR = "#1565c0"
EVENT_COLOR = "#2e7d32"
BAD_COLOR = "#c62828"
PULL_FILL = "#fff3e0"
TONE_COLOR = {"tcp": "#455a64", "mpa": OK_COLOR, "bad": BAD_COLOR}
RETRANS_COLOR = "#ef6c00"
WIRE_ROWS = 4  # label rows in the wire lane


@dataclass(frozen=True)
class Axis:
    """Maps controller microseconds to x pixels; ``origin_us`` is shown as 0 ms."""

    start_us: int
    end_us: int
    origin_us: int

    def x(self, t_us: int) -> float:
        """The x pixel of controller time ``t_us``."""
        span = max(self.end_us - self.start_us, 1)
        return GUTTER + (t_us - self.start_us) * (WIDTH - GUTTER - RIGHT) / span

    def px_per_us(self) -> float:
        """Pixels per microsecond."""
        return (WIDTH - GUTTER - RIGHT) / max(self.end_us - self.start_us, 1)


def nice_step(raw_ms: float) -> float:
    """1, 2 or 5 times a power of ten, at least ``raw_ms``."""
    power = 0.001
    while True:
        for m in (1, 2, 5):
            if m * power >= raw_ms:
                return m * power
        power *= 10


def stagger(row_end: list[float], x: float, label: str) -> tuple[int, str] | None:
    """The first label row with room for ``label`` at ``x`` and its text anchor; None: full.

    ``row_end`` holds where each row's last label ends, and is updated.
    """
    width = len(label) * CHAR_W
    # Near the right edge the label ends at the mark instead of starting there.
    anchor = "end" if x + width > WIDTH - 6 else "start"
    left = x if anchor == "start" else x - width
    row = next((r for r in range(len(row_end)) if row_end[r] < left - 2), None)
    if row is not None:
        row_end[row] = max(x, left + width)
    return None if row is None else (row, anchor)
