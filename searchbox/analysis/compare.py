"""Paired comparison of two arms on the same questions: bootstrap of the mean difference, McNemar for binary grades.

    from searchbox.analysis import paired_comparison
    paired_comparison(frames.runs, "correct", {"tools": "high", "budget": 4}, {"tools": "none", "budget": 4})

An arm is a set of column values. A value matches its column whatever its type (16, 16.0 and "16" are
one budget; True and "true" one flag; None and NaN a missing value); an arm that matches no run is an
error naming the column and the values it has, never an empty comparison. Each arm must name one
condition: when its runs still differ in another condition column (say budget), the comparison is
refused rather than pooled. Replicate runs (seeds, epochs) of a question are averaged first, so every question
counts once. `p` is McNemar's exact p-value on binary per-question grades, else the sign-flip permutation test's
(analysis.stats); analysis.multiplicity adjusts it over the family a report shows. `comparisons` makes every
comparison of a design, with no cut: the report writes them all.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Optional

import numpy as np
import pandas as pd

from ..errors import SearchboxError
from .frames import cells, conditions, grades, label
from ..sweep.power import discordance_of
from .stats import N_BOOT, mcnemar_exact, paired_bootstrap, sign_flip_p

COLUMNS = ["grader", "vary", "context", "a", "b", "n_questions", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "a_only", "b_only", "mcnemar_p", "test", "p", "discordance"]
MISSING = "<missing>"
_NUMERIC = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class PooledArm(SearchboxError):
    """An arm of a comparison spans more than one condition."""


class EmptyArm(SearchboxError):
    """An arm of a comparison matches no run."""


def value_key(value) -> str:
    """One spelling per value, whatever its type: 16 = 16.0 = "16", True = "true", None = NaN (missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, float, np.integer, np.floating)):
        return format(float(value), ".15g")
    text = str(value)
    if _NUMERIC.fullmatch(text.strip()):
        return format(float(text), ".15g")
    return text.lower() if text.lower() in ("true", "false") else text


def _keys(series: pd.Series) -> pd.Series:
    return series.astype(object).map(value_key)


def _select(runs: pd.DataFrame, arm: dict, name: str = "") -> pd.Series:
    """The runs of an arm; EmptyArm naming the column (and the values it has) when it matches none."""
    mask = pd.Series(True, index=runs.index)
    for key, value in arm.items():
        if key not in runs.columns:
            raise EmptyArm(f"arm {name} ({label(arm)}): no column {key!r} in these runs")
        hit = _keys(runs[key]) == value_key(value)
        if not hit.any():
            have = sorted(set(_keys(runs[key])), key=lambda v: (not _NUMERIC.fullmatch(v), float(v) if _NUMERIC.fullmatch(v) else 0, v))
            raise EmptyArm(f"arm {name} ({label(arm)}): no run has {key}={value!r}; {key} has {', '.join(have[:20])}"
                           + (f" and {len(have) - 20} more" if len(have) > 20 else ""))
        mask &= hit
    if not mask.any():
        raise EmptyArm(f"arm {name} ({label(arm)}) matches no run: each value exists, never together")
    return mask


def _per_question(runs: pd.DataFrame, grader: str) -> pd.Series:
    values = grades(runs, grader)
    return values[values.notna()].groupby(runs.loc[values.notna(), "question_id"].astype(str)).mean()


def paired_comparison(runs: pd.DataFrame, grader: str, a: dict, b: dict, design: Optional[Iterable[str]] = None,
                      n_boot: int = N_BOOT, seed: int = 0, conds: Optional[list[str]] = None) -> dict:
    """Arm a minus arm b on the questions both have a grade for (see the module docstring). `conds`: the conditions
    when they are known beyond these runs (Frames.conditions after runs that could not act were left out)."""
    conds = conds if conds is not None else conditions(runs, design)
    arms = []
    for name, arm in (("a", a), ("b", b)):
        rows = runs[_select(runs, arm, name)]
        for col in conds:
            if col not in arm and _keys(rows[col]).nunique() > 1:
                raise PooledArm(f"arm {name} ({label(arm)}) pools {col} = {', '.join(sorted(set(_keys(rows[col]))))}: give it a value")
        arms.append(_per_question(rows, grader))
    qa, qb = arms[0].align(arms[1], join="inner")
    groups = None  # questions that ask one fact resample together (analysis/facts.py)
    if "fact_group" in runs.columns and len(qa):
        group_of = runs.assign(_q=runs["question_id"].astype(str)).drop_duplicates("_q").set_index("_q")["fact_group"]
        groups = [str(group_of.get(q, f"question {q}")) for q in qa.index]
    diff, lo, hi = paired_bootstrap((qa - qb).to_numpy(), n_boot=n_boot, seed=seed, groups=groups)
    binary = bool(len(qa)) and np.isin(qa.to_numpy(), (0.0, 1.0)).all() and np.isin(qb.to_numpy(), (0.0, 1.0)).all()
    a_only, b_only = int(((qa == 1) & (qb == 0)).sum()), int(((qa == 0) & (qb == 1)).sum())
    # `p`: McNemar's exact test on binary grades, the sign-flip test on per-question means (repeats averaged, F1)
    # questions that share a fact are not independent pairs: McNemar counts them apart, the sign-flip test flips each fact whole
    shared = groups is not None and len(set(groups)) < len(groups)
    test = ("mcnemar" if binary and not shared else "sign-flip by fact" if shared else "sign-flip") if len(qa) else ""
    p = (mcnemar_exact(a_only, b_only) if binary and not shared else sign_flip_p((qa - qb).to_numpy(), seed=seed, groups=groups)) \
        if len(qa) else math.nan
    return {"grader": grader, "a": label(a), "b": label(b), "n_questions": int(len(qa)),
            "mean_a": float(qa.mean()) if len(qa) else math.nan, "mean_b": float(qb.mean()) if len(qb) else math.nan,
            "diff": diff, "ci_low": lo, "ci_high": hi, "a_only": a_only if binary else None, "b_only": b_only if binary else None,
            "mcnemar_p": mcnemar_exact(a_only, b_only) if binary else math.nan, "test": test, "p": p,
            "discordance": discordance_of((qa - qb).to_numpy()) if len(qa) else math.nan}


def _levels(series: pd.Series) -> list:
    values = list(pd.unique(series))
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def comparisons(runs: pd.DataFrame, grader: str = "correct", design: Optional[Iterable[str]] = None, n_boot: int = N_BOOT,
                conds: Optional[list[str]] = None) -> pd.DataFrame:
    """For each condition column, each level against a reference (tools=none, else the lowest; in a context that
    lacks it, the lowest level there), every other condition held fixed: one paired comparison per row, every one
    of them (a pair whose arms share no graded question is a row with n_questions 0, not left out). A level absent
    from a context is no comparison."""
    if runs.empty or grader not in runs.columns or "question_id" not in runs.columns:
        return pd.DataFrame(columns=COLUMNS)
    conds = conds if conds is not None else conditions(runs, design)
    rows = []
    for col in conds:
        levels = _levels(runs[col])
        ref = "none" if col == "tools" and "none" in levels else levels[0]
        others = [c for c in conds if c != col]
        for context, group in cells(runs, others):
            present = set(_keys(group[col]))
            # the reference left out here (a control that could not act under tools=none): the lowest level present
            here = ref if value_key(ref) in present else next((lv for lv in levels if value_key(lv) in present), None)
            for level in levels:
                if here is None or level == here or value_key(level) not in present:
                    continue
                res = paired_comparison(runs, grader, {**context, col: level}, {**context, col: here}, design, n_boot=n_boot, conds=conds)
                rows.append({**res, "vary": col, "context": label(context), "a": f"{col}={level}", "b": f"{col}={here}"})
    return pd.DataFrame(rows, columns=COLUMNS)
