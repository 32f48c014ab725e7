"""Power of a paired design before it runs: the smallest difference its questions can detect, and the questions a
target difference needs.

A paired comparison of two arms on the same n questions is decided by the questions on which they differ. With
binary grades the test is McNemar's exact test (analysis.stats.mcnemar_exact); its power depends on the share of
questions that are discordant (psi = p10 + p01) and the difference delta = p10 - p01. `power_exact` sums that
power over every possible count of discordant pairs (the test searchbox runs, not an approximation); `mde`
inverts it. Connor (1987) gives the normal approximation n = (z_a sqrt(psi) + z_b sqrt(psi - delta^2))^2 / delta^2,
which also holds for per-question differences that are not binary (repeats averaged), with psi = E[d^2]: the
mean square of the per-question difference. Before any pilot the plan assumes WORST_DISCORDANCE (stated as such).

Pure arithmetic on numbers: the plan (sweep/job.py) and the report (analysis/) both call it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Iterable, Optional

import numpy as np

ALPHA = 0.05
POWER = 0.80
# Without a pilot: half the questions go different ways between two arms. The MDE grows with psi; arms that share a
# model rarely differ on more, but a model against a control can (up to 1): a pilot or sweep.discordance says so.
WORST_DISCORDANCE = 0.5
EXACT_UP_TO = 3000  # questions; above, the exact sum is slow and Connor's approximation is within a point of it


@dataclass(frozen=True)
class Design:
    """What the power of a design's paired comparisons depends on."""

    questions: int
    discordance: float  # psi: share of questions on which two arms differ (mean square of the per-question difference)
    source: str  # "pilot (N pairs of finished runs)" | "worst case (no pilot)" | "given"
    alpha: float = ALPHA
    power: float = POWER
    comparisons: int = 1  # the family one report shows: Holm's strictest step tests at alpha / comparisons
    binary: bool = True  # one run per question and arm (McNemar); False with repeats averaged (Connor's normal form)


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


_LOG_FACT = np.zeros(1)


def _log_factorials(n: int) -> np.ndarray:
    """log(0!), ..., log(n!), grown as needed (one array shared by every pmf)."""
    global _LOG_FACT
    if _LOG_FACT.size <= n:
        _LOG_FACT = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, 2 * n + 2, dtype=float)))])
    return _LOG_FACT


def _log_binom_pmf(n: int, p: float) -> np.ndarray:
    k = np.arange(n + 1)
    if p <= 0.0:
        return np.where(k == 0, 0.0, -np.inf)
    if p >= 1.0:
        return np.where(k == n, 0.0, -np.inf)
    lf = _log_factorials(n)
    logc = lf[n] - lf[k] - lf[n - k]
    return logc + k * math.log(p) + (n - k) * math.log1p(-p)


def critical_counts(n_max: int, alpha: float) -> np.ndarray:
    """For each number of discordant pairs N (0..n_max), the largest k with the exact two-sided McNemar p-value
    2 * P(Bin(N, 1/2) <= k) <= alpha; -1 when no split of N pairs is significant."""
    out = np.full(n_max + 1, -1, dtype=int)
    for n in range(1, n_max + 1):
        cdf = np.cumsum(np.exp(_log_binom_pmf(n, 0.5)))
        hits = np.nonzero(2 * cdf <= alpha + 1e-12)[0]
        out[n] = int(hits[-1]) if hits.size else -1
    return out


def power_exact(n: int, discordance: float, delta: float, alpha: float = ALPHA, crit: Optional[np.ndarray] = None) -> float:
    """Probability that the exact McNemar test at alpha rejects, with n questions, p10 + p01 = discordance and
    p10 - p01 = delta (|delta| <= discordance)."""
    psi, delta = float(discordance), abs(float(delta))
    if n <= 0 or psi <= 0:
        return 0.0
    delta = min(delta, psi)
    crit = critical_counts(n, alpha) if crit is None else crit
    pi = (psi + delta) / (2 * psi)  # P(a right, b wrong | discordant)
    pmf_n = np.exp(_log_binom_pmf(n, psi))
    lo_n, hi_n = _mass_range(n, psi)
    total = 0.0
    for m in range(max(1, lo_n), hi_n + 1):
        c = crit[m]
        if c < 0 or pmf_n[m] < 1e-15:
            continue
        pk = np.exp(_log_binom_pmf(m, pi))
        reject = pk[: c + 1].sum() + pk[m - c:].sum()  # either tail; c < m/2, so the tails do not overlap
        total += pmf_n[m] * min(1.0, reject)
    return float(min(1.0, total))


def _mass_range(n: int, p: float) -> tuple[int, int]:
    sd = math.sqrt(n * p * (1 - p))
    return max(0, int(n * p - 9 * sd) - 1), min(n, int(math.ceil(n * p + 9 * sd)) + 1)


def power_normal(n: int, discordance: float, delta: float, alpha: float = ALPHA) -> float:
    """Connor's (1987) normal approximation to the power of the paired test."""
    psi, delta = float(discordance), min(abs(float(delta)), float(discordance))
    if n <= 0 or psi <= 0 or delta <= 0:
        return alpha if delta <= 0 else 0.0
    spread = math.sqrt(max(psi - delta**2, 1e-12))
    return NormalDist().cdf((delta * math.sqrt(n) - _z(1 - alpha / 2) * math.sqrt(psi)) / spread)


def power(n: int, discordance: float, delta: float, alpha: float = ALPHA, binary: bool = True) -> float:
    """The power searchbox reports: exact McNemar for binary grades up to EXACT_UP_TO questions, else Connor's."""
    if binary and n <= EXACT_UP_TO:
        return power_exact(n, discordance, delta, alpha)
    return power_normal(n, discordance, delta, alpha)


def mde(n: int, discordance: float, alpha: float = ALPHA, target: float = POWER, binary: bool = True) -> float:
    """The smallest difference (p10 - p01, in accuracy points / 100) detected with probability `target`; NaN when
    even the largest possible difference (every discordant question going one way) is not."""
    psi = float(discordance)
    if n <= 0 or psi <= 0:
        return math.nan
    crit = critical_counts(n, alpha) if binary and n <= EXACT_UP_TO else None
    at = (lambda d: power_exact(n, psi, d, alpha, crit)) if crit is not None else (lambda d: power_normal(n, psi, d, alpha))
    if at(psi) < target:
        return math.nan
    lo, hi = 0.0, psi
    for _ in range(40):  # exact power rises with delta at fixed n and psi
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) < target else (lo, mid)
    return hi


def questions_needed(delta: float, discordance: float, alpha: float = ALPHA, target: float = POWER, binary: bool = True,
                     cap: int = 10**6) -> Optional[int]:
    """The questions a paired comparison needs to detect `delta` with probability `target`: from Connor's n, the first
    count whose exact power reaches it, striding by 1% of n and stepping back (exact power is a sawtooth in n, so a
    count a little below can reach it too); None when delta exceeds the discordance (impossible)."""
    psi, delta = float(discordance), abs(float(delta))
    if delta <= 0 or psi <= 0 or delta > psi:
        return None
    za, zb = _z(1 - alpha / 2), _z(target)
    n = max(1, math.ceil((za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta**2, 0.0))) ** 2 / delta**2))
    if not binary or n > EXACT_UP_TO:
        return min(n, cap)
    crit = critical_counts(min(cap, max(2 * n, n + 50)), alpha)
    top = min(len(crit) - 1, cap)
    reaches = lambda m: power_exact(m, psi, delta, alpha, crit[: m + 1]) >= target
    step = max(1, n // 100)  # exact power is a sawtooth in n: stride to the first count that reaches it, then step back
    m = max(1, n - n // 4)
    while m <= top and not reaches(m):
        m += step
    if m > top:
        return n
    low = m
    while low - 1 >= max(1, m - step + 1) and reaches(low - 1):
        low -= 1
    return low


def discordance_of(diffs: Iterable[float]) -> float:
    """psi from per-question differences between two arms (a - b, each in [-1, 1]): their mean square."""
    d = np.asarray([x for x in diffs if x is not None and not math.isnan(x)], dtype=float)
    return float(np.mean(d**2)) if d.size else math.nan


def family_size(levels: dict[str, int]) -> int:
    """How many paired comparisons analysis.compare.comparisons makes of a full grid: for each axis, each level but
    the reference against it, in every combination of the other axes' levels."""
    total = 0
    for axis, count in levels.items():
        rest = math.prod(c for a, c in levels.items() if a != axis)
        total += max(0, count - 1) * rest
    return total


def describe(design: Design, target_effect: Optional[float] = None, width: int = 6) -> list[str]:
    """The plan's power lines for people."""
    d = design
    at = lambda alpha: mde(d.questions, d.discordance, alpha, d.power, d.binary)
    found = lambda x: not (isinstance(x, float) and math.isnan(x))
    test = f"{'McNemar' if d.binary else 'repeats averaged'}, discordance {d.discordance:.2f}: {d.source}"
    first = at(d.alpha)
    lines = [f"  {'power':<{width}}  {d.questions} question(s), paired: a difference of {100 * first:.1f} points is detected with "
             f"{d.power:.0%} power at alpha={d.alpha:g} ({test})" if found(first) else
             f"  {'power':<{width}}  {d.questions} question(s), paired: no difference is detected with {d.power:.0%} power at "
             f"alpha={d.alpha:g}, not even every discordant question going one way: too few questions ({test})"]
    if d.comparisons > 1:
        strict = at(d.alpha / d.comparisons)
        lines.append(f"  {'':<{width}}  the report corrects {d.comparisons} comparison(s) (Holm): the smallest p-value is held to "
                     f"alpha/{d.comparisons}={d.alpha / d.comparisons:.2g}, where "
                     + (f"the detectable difference is {100 * strict:.1f} points" if found(strict) else "no difference is detectable"))
    if target_effect is not None:
        need = questions_needed(target_effect, d.discordance, d.alpha, d.power, d.binary)
        if need is None:
            lines.append(f"  {'':<{width}}  sweep.target_effect={target_effect:g} exceeds the discordance ({d.discordance:.2f}): no question count detects it")
        else:
            lines.append(f"  {'':<{width}}  sweep.target_effect={target_effect:g} needs {need} question(s) at alpha={d.alpha:g}"
                         + (f", {questions_needed(target_effect, d.discordance, d.alpha / d.comparisons, d.power, d.binary)} at alpha/{d.comparisons}"
                            if d.comparisons > 1 else ""))
    return lines

REPEAT_KEYS = frozenset({"seed", "model.seed", "distractors.seed", "noise.seed", "epochs"})  # repeats, never arms
HEADLINE = ("judge", "correct", "contains")


def pilot_discordance(runs, axes: list[str]) -> tuple[float, int]:
    """(psi, pairs) from finished runs (a runs.parquet): for each axis, each level against the lowest with the other
    axes fixed, the mean square of the per-question difference of the headline grade (repeats averaged first);
    (nan, 0) when no two arms share a graded question."""
    import pandas as pd

    grade = next((g for g in HEADLINE if g in runs.columns and pd.to_numeric(runs[g], errors="coerce").notna().any()), None)
    axes = [a for a in axes if a in runs.columns and a not in REPEAT_KEYS]
    if grade is None or "question_id" not in runs.columns or not axes:
        return math.nan, 0
    runs = runs.assign(_g=pd.to_numeric(runs[grade], errors="coerce")).dropna(subset=["_g"])
    text = runs[axes].astype(str)
    diffs: list[float] = []
    for axis in axes:
        others = [a for a in axes if a != axis]
        means = runs.assign(**{a: text[a] for a in axes}).groupby([*others, axis, "question_id"])["_g"].mean()
        wide = means.unstack(axis)
        if wide.shape[1] < 2:
            continue
        ref = sorted(wide.columns)[0]
        for level in wide.columns:
            if level != ref:
                diffs += list((wide[level] - wide[ref]).dropna())
    return (discordance_of(diffs), len(diffs)) if diffs else (math.nan, 0)


def settings_problem(alpha: float, target_effect: Optional[float], discordance: Optional[float]) -> str:
    """What is wrong with the plan's power settings, in one line ('' when nothing)."""
    if not 0 < alpha < 1:
        return f"sweep.alpha={alpha:g} must lie between 0 and 1"
    if target_effect is not None and not 0 < target_effect <= 1:
        return f"sweep.target_effect={target_effect:g} must lie in (0, 1]: a difference in accuracy, 0.05 for 5 points"
    if discordance is not None and not 0 < discordance <= 1:
        return f"sweep.discordance={discordance:g} must lie in (0, 1]: the share of questions two arms differ on"
    return ""


def plan_design(swept: dict[str, list[str]], questions: int, epochs: int, alpha: float, discordance: Optional[float],
                pilot_runs=None) -> Optional[Design]:
    """The design the plan powers: the swept axes' levels (repeats are no arms), the questions each arm has, the
    discordance given, else a pilot's, else WORST_DISCORDANCE; None with no paired comparison (one arm)."""
    levels = {k: len(v) for k, v in swept.items() if k not in REPEAT_KEYS and len(v) > 1}
    m = family_size(levels)
    if m == 0 or questions <= 0:
        return None
    if discordance is not None:
        psi, source = float(discordance), "sweep.discordance"
    else:
        psi, pairs = pilot_discordance(pilot_runs, list(levels)) if pilot_runs is not None and len(pilot_runs) else (math.nan, 0)
        if pairs and psi > 0:
            source = f"pilot: {pairs} paired question(s) of finished runs"
        else:  # a pilot whose arms never part says nothing of how far they would: the worst case stands
            psi, source = WORST_DISCORDANCE, f"worst case, the pilot's {pairs} paired question(s) never differ" if pairs else "worst case, no pilot"
    return Design(questions, psi, source, alpha, POWER, m, binary=epochs == 1)
