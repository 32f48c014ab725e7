"""Numbers for people: durations as precise as an estimate deserves."""

from __future__ import annotations

HOUR_S = 3600


def duration(seconds: float) -> str:
    """12 s, 7 min 33 s, 1 h 45 min, 2 d 3 h: as precise as an estimate deserves."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < HOUR_S:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 48 * HOUR_S:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
