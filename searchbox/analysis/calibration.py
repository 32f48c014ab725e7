"""Calibration of stated confidence against correctness, and a reliability figure.

Runs with a stated confidence (grades' `confidence`, in [0, 1]) and a correctness grade go into BINS equal-width
bins over [0, 1] (the last bin closed: a confidence of 1.0 is in it). Per bin b with n_b runs: the mean confidence
conf_b and the accuracy acc_b. Over N runs:
- calibration_error (RMS) = sqrt(sum_b n_b/N * (acc_b - conf_b)^2), the measure BrowseComp reports;
- ece = sum_b n_b/N * |acc_b - conf_b|.
Runs without a stated confidence are left out and counted (`unstated`); with none stated both are None, never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

BINS = 10


@dataclass
class Calibration:
    n: int = 0
    unstated: int = 0
    bins: list[dict] = field(default_factory=list)  # {lo, hi, n, confidence, accuracy}
    calibration_error: Optional[float] = None
    ece: Optional[float] = None


def calibration(confidence: Iterable, correct: Iterable, bins: int = BINS) -> Calibration:
    pairs, unstated = [], 0
    for c, y in zip(confidence, correct):
        if c is None or y is None or (isinstance(c, float) and math.isnan(c)) or (isinstance(y, float) and math.isnan(y)):
            unstated += c is None or (isinstance(c, float) and math.isnan(c))
            continue
        pairs.append((min(max(float(c), 0.0), 1.0), float(y)))
    out = Calibration(len(pairs), unstated)
    if not pairs:
        return out
    groups: list[list[tuple[float, float]]] = [[] for _ in range(bins)]
    for c, y in pairs:
        groups[min(int(c * bins), bins - 1)].append((c, y))
    rms = ece = 0.0
    for i, g in enumerate(groups):
        if not g:
            continue
        conf, acc, w = sum(c for c, _ in g) / len(g), sum(y for _, y in g) / len(g), len(g) / len(pairs)
        out.bins.append({"lo": i / bins, "hi": (i + 1) / bins, "n": len(g), "confidence": conf, "accuracy": acc})
        rms += w * (acc - conf) ** 2
        ece += w * abs(acc - conf)
    out.calibration_error, out.ece = math.sqrt(rms), ece
    return out


def reliability_figure(cal: Calibration, path: Path, title: str = "Reliability") -> Path:
    """Accuracy against stated confidence per bin (marker area ~ runs), with the diagonal of perfect calibration."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.5, 4.5))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    if cal.bins:
        ax.scatter([b["confidence"] for b in cal.bins], [b["accuracy"] for b in cal.bins], s=[20 + 8 * b["n"] for b in cal.bins])
    err = "n/a" if cal.calibration_error is None else f"{cal.calibration_error:.3f}"
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="stated confidence", ylabel="accuracy",
           title=f"{title}\nRMS calibration error {err} over {BINS} bins (n={cal.n}, {cal.unstated} unstated)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    return path
