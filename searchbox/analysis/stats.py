"""Statistics over questions: cluster bootstrap CIs (questions that share a fact resampled together), paired bootstrap of a difference, McNemar's exact test, and the
sign-flip permutation test for paired differences that are not binary (repeats averaged per question)."""

from __future__ import annotations

import math
from typing import Iterable, Optional

import numpy as np
import pandas as pd

N_BOOT = 2000


def cluster_bootstrap(values: Iterable[float], clusters: Optional[Iterable] = None, n_boot: int = N_BOOT, alpha: float = 0.05,
                      seed: int = 0, groups: Optional[Iterable] = None) -> tuple[float, float, float]:
    """(mean, low, high) of the mean over clusters of each cluster's mean, with a percentile CI from
    resampling whole clusters (questions). Without clusters each value is its own. NaN values are
    missing, not zero; with fewer than two clusters the CI is NaN (one question says nothing of spread).

    `groups` (one per value, a question's fact group: questions/facts.py): clusters of one group resample together, so
    questions that ask one fact are one draw, not several; the estimate still weighs each cluster equally (a draw's
    mean is its clusters' summed means over their count). With fewer than two groups the CI is NaN."""
    x = np.asarray(list(values), dtype=float)
    c = np.arange(len(x)) if clusters is None else np.asarray(list(clusters))
    g = None if groups is None else np.asarray([str(v) for v in groups], dtype=object)
    ok = ~np.isnan(x)
    x, c = x[ok], c[ok]
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    keys = pd.Series(c).astype(str).to_numpy()
    per = pd.Series(x).groupby(keys).mean()
    means = per.to_numpy()
    estimate = float(means.mean())
    rng = np.random.default_rng(seed)
    if g is None:
        if means.size < 2:
            return (estimate, math.nan, math.nan)
        boots = means[rng.integers(0, means.size, size=(n_boot, means.size))].mean(axis=1)
    else:
        group_of = pd.Series(g[ok]).groupby(keys).first().reindex(per.index)  # a cluster (question) is in one group
        sums = per.groupby(group_of.to_numpy()).sum().to_numpy()
        counts = per.groupby(group_of.to_numpy()).size().to_numpy().astype(float)
        if sums.size < 2:
            return (estimate, math.nan, math.nan)
        draw = rng.integers(0, sums.size, size=(n_boot, sums.size))
        boots = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    return (estimate, float(np.quantile(boots, alpha / 2)), float(np.quantile(boots, 1 - alpha / 2)))


def bootstrap_ci(values: Iterable[float], n_boot: int = N_BOOT, alpha: float = 0.05, seed: int = 0,
                 clusters: Optional[Iterable] = None, groups: Optional[Iterable] = None) -> tuple[float, float, float]:
    """(mean, low, high); pass `clusters` (question ids) whenever values repeat a question, `groups` (fact groups)
    whenever questions share a fact."""
    vals = [np.nan if v is None else v for v in values]
    return cluster_bootstrap(vals, clusters, n_boot=n_boot, alpha=alpha, seed=seed, groups=groups)


def paired_bootstrap(diffs: Iterable[float], n_boot: int = N_BOOT, alpha: float = 0.05, seed: int = 0,
                     groups: Optional[Iterable] = None) -> tuple[float, float, float]:
    """(mean, low, high) of per-question differences, resampling questions (or their fact `groups`, one per difference)."""
    return cluster_bootstrap(diffs, None, n_boot=n_boot, alpha=alpha, seed=seed, groups=groups)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (a right and b wrong, and the reverse)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


N_FLIPS = 10000
EXACT_FLIPS = 16  # up to this many non-zero differences every sign pattern is enumerated (2^16)


def sign_flip_p(diffs: Iterable[float], n_flips: int = N_FLIPS, seed: int = 0, groups: Optional[Iterable] = None) -> float:
    """Two-sided p-value that per-question differences are centred on 0: the share of sign flips (each question's
    difference negated or not, as if the arms were swapped on it) whose mean is at least as far from 0 as the one
    observed. Exact up to EXACT_FLIPS non-zero differences, else Monte Carlo with the observed pattern counted
    (p >= 1 / (n_flips + 1)). Questions resample as wholes; repeats inside a question never do; with `groups` (one fact
    group per difference) the questions of one fact flip as one."""
    d = np.asarray([math.nan if x is None else x for x in diffs], dtype=float)
    if groups is not None:  # questions of one fact flip together: the test runs on each fact's summed difference
        g = np.asarray([str(v) for v in groups], dtype=object)
        ok = ~np.isnan(d)
        d = pd.Series(d[ok]).groupby(g[ok]).sum().to_numpy() if ok.any() else np.zeros(0)
    d = d[~np.isnan(d)]
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12 * d.size
    if d.size <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(seed)
    hits, chunk = 0, max(1, 2_000_000 // d.size)  # flips drawn a block at a time: 10,000 x 5,000 questions would be 400 MB
    for start in range(0, n_flips, chunk):
        flips = rng.choice((-1.0, 1.0), size=(min(chunk, n_flips - start), d.size))
        hits += int(np.sum(np.abs(flips @ d) >= observed))
    return float((1 + hits) / (n_flips + 1))
