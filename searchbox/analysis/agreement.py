"""Agreement between two graders (two judges, or a judge and the reference `correct` grade) on the same runs.

Over the runs both graded (verdicts 0/1; a missing verdict leaves the run out): percent agreement p_o = share of
runs with the same verdict; Cohen's kappa = (p_o - p_e) / (1 - p_e), p_e the agreement expected from each grader's
own rate of "correct"; kappa is None when p_e = 1 (both graders constant and equal: agreement says nothing). The
runs where they disagree are listed by id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Optional


@dataclass
class Agreement:
    n: int
    percent: Optional[float]
    kappa: Optional[float]
    disagree: list[str] = field(default_factory=list)


def _ok(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def agreement(ids: Iterable[str], a: Iterable, b: Iterable) -> Agreement:
    rows = [(i, float(x) >= 0.5, float(y) >= 0.5) for i, x, y in zip(ids, a, b) if _ok(x) and _ok(y)]
    n = len(rows)
    if not n:
        return Agreement(0, None, None)
    po = sum(x == y for _, x, y in rows) / n
    pa, pb = sum(x for _, x, _ in rows) / n, sum(y for _, _, y in rows) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    kappa = None if pe >= 1 else (po - pe) / (1 - pe)
    return Agreement(n, po, kappa, [str(i) for i, x, y in rows if x != y])
