"""Paired comparison of two arms on the same questions: bootstrap of the mean difference, McNemar for binary grades.

    from searchbox.analysis import paired_comparison
    paired_comparison(frames.runs, "contains", {"tools": "high", "budget": 4}, {"tools": "none", "budget": 4})

An arm is a set of column values. Each arm must name one condition: when its runs still differ in
another condition column (say budget), the comparison is refused rather than pooled. Replicate runs
(seeds) of a question are averaged first, so every question counts once.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from ..errors import SearchboxError
from .frames import cells, conditions, grades, label
from .stats import N_BOOT, mcnemar_exact, paired_bootstrap

COLUMNS = ["grader", "vary", "context", "a", "b", "n_questions", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "a_only", "b_only", "mcnemar_p"]


class PooledArm(SearchboxError):
    """An arm of a comparison spans more than one condition."""


def _select(runs: pd.DataFrame, arm: dict) -> pd.Series:
    mask = pd.Series(True, index=runs.index)
    for key, value in arm.items():
        if key not in runs.columns:
            raise PooledArm(f"no column {key!r} in these runs")
        mask &= runs[key].astype(str) == str(value)
    return mask


def _per_question(runs: pd.DataFrame, grader: str) -> pd.Series:
    values = grades(runs, grader)
    return values[values.notna()].groupby(runs.loc[values.notna(), "question_id"].astype(str)).mean()


def paired_comparison(runs: pd.DataFrame, grader: str, a: dict, b: dict, design: Optional[Iterable[str]] = None,
                      n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Arm a minus arm b on the questions both have a grade for (see the module docstring)."""
    conds = conditions(runs, design)
    arms = []
    for name, arm in (("a", a), ("b", b)):
        rows = runs[_select(runs, arm)]
        for col in conds:
            if col not in arm and rows[col].astype(str).nunique() > 1:
                raise PooledArm(f"arm {name} ({label(arm)}) pools {col} = {', '.join(sorted(rows[col].astype(str).unique()))}: give it a value")
        arms.append(_per_question(rows, grader) if not rows.empty else pd.Series(dtype=float))
    qa, qb = arms[0].align(arms[1], join="inner")
    diff, lo, hi = paired_bootstrap((qa - qb).to_numpy(), n_boot=n_boot, seed=seed)
    binary = bool(len(qa)) and np.isin(qa.to_numpy(), (0.0, 1.0)).all() and np.isin(qb.to_numpy(), (0.0, 1.0)).all()
    a_only, b_only = int(((qa == 1) & (qb == 0)).sum()), int(((qa == 0) & (qb == 1)).sum())
    return {"grader": grader, "a": label(a), "b": label(b), "n_questions": int(len(qa)),
            "mean_a": float(qa.mean()) if len(qa) else math.nan, "mean_b": float(qb.mean()) if len(qb) else math.nan,
            "diff": diff, "ci_low": lo, "ci_high": hi, "a_only": a_only if binary else None, "b_only": b_only if binary else None,
            "mcnemar_p": mcnemar_exact(a_only, b_only) if binary else math.nan}


def _levels(series: pd.Series) -> list:
    values = list(pd.unique(series))
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def comparisons(runs: pd.DataFrame, grader: str = "contains", design: Optional[Iterable[str]] = None, max_rows: int = 60,
                n_boot: int = N_BOOT) -> pd.DataFrame:
    """For each condition column, each level against a reference (tools=none, else the lowest), every other
    condition held fixed: one paired comparison per row."""
    if runs.empty or grader not in runs.columns or "question_id" not in runs.columns:
        return pd.DataFrame(columns=COLUMNS)
    conds = conditions(runs, design)
    rows = []
    for col in conds:
        levels = _levels(runs[col])
        ref = "none" if col == "tools" and "none" in levels else levels[0]
        others = [c for c in conds if c != col]
        for context, _ in cells(runs, others):
            for level in levels:
                if level == ref:
                    continue
                res = paired_comparison(runs, grader, {**context, col: level}, {**context, col: ref}, design, n_boot=n_boot)
                if res["n_questions"]:
                    rows.append({**res, "vary": col, "context": label(context), "a": f"{col}={level}", "b": f"{col}={ref}"})
                if len(rows) >= max_rows:
                    return pd.DataFrame(rows, columns=COLUMNS)
    return pd.DataFrame(rows, columns=COLUMNS)
