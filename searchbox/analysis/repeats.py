"""Repeats of a question under one condition (epochs=K: seeds seed+0..K-1; or a seed axis): reducers and the split
of the variance between questions and repeats.

A repeat is another run of the same question in the same condition (frames.REPLICATES never split a condition).
Each reducer turns a question's repeats into one number, and its CI resamples questions (cluster bootstrap over
one value per question; questions that ask one fact resample together), never repeats: K repeats of 50
questions are 50 observations, not 50 K.

- mean: the share of a question's repeats graded right, averaged over questions (pass@1's unbiased estimate).
- majority: self-consistency (Wang et al. 2022): the question's most frequent non-empty answer (normalised), scored
  by the grade its runs got; a tie between answers scores the mean of the tied answers' grades.
- pass@k: the chance that at least one of k repeats drawn from the question's n is right, by the unbiased estimator
  1 - C(n - c, k) / C(n, k) of Chen et al. (2021); k is the fewest repeats any question of the condition has.
- variance split: one-way random effects on the grades: `repeat_var` is the mean within-question variance (ddof 1),
  `question_var` the variance of question means less its repeat share (mean of s^2 / n), floored at 0;
  `repeat_share` = repeat_var / (repeat_var + question_var). Deterministic runs (temperature 0, the controls) show 0.
- answers: how many different answers (normalised, an empty one counted too) a question's repeats gave, averaged over
  questions: 1 when every repeat said the same. A grade that is always 0 hides repeats that say different things.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd

from .frames import cells, grades
from .stats import cluster_bootstrap

ANSWER_COLUMNS = ("graded_answer", "answer_text")  # the answer line graded, else the whole answer
REDUCER_COLUMNS = ["reducer", "k", "n_questions", "repeats", "mean", "ci_low", "ci_high"]
SPLIT_COLUMNS = ["n_questions", "repeats", "grade_var", "question_var", "repeat_var", "repeat_share", "answers"]


def has_repeats(runs: pd.DataFrame, conds: list[str]) -> bool:
    """Whether some question ran more than once in one condition."""
    if runs.empty or "question_id" not in runs.columns:
        return False
    keys = [c for c in conds if c in runs.columns] + ["question_id"]
    return bool((runs.groupby(keys, dropna=False).size() > 1).any())


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n repeats with c right (Chen et al. 2021); NaN when k > n."""
    if k > n or k < 1:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _normalise(text) -> str:
    return " ".join(str(text).lower().split()) if isinstance(text, str) else ""


def majority(group: pd.DataFrame, values: pd.Series) -> float:
    """A question's self-consistency grade: the most frequent non-empty answer's grade (ties: their mean)."""
    col = next((c for c in ANSWER_COLUMNS if c in group.columns), None)
    if col is None:  # no answers recorded: the majority of the grades themselves
        return float(np.round(values.mean() + 1e-12)) if values.mean() != 0.5 else 0.5
    answers = group[col].map(_normalise)
    said = answers[answers != ""]
    if said.empty:
        return float(values.mean())
    counts = said.value_counts()
    top = counts[counts == counts.iloc[0]].index
    return float(np.mean([values[answers == a].mean() for a in top]))


def per_question(runs: pd.DataFrame, grader: str) -> pd.DataFrame:
    """One row per question of one condition: repeats n, right c, the mean grade, the majority grade, binary or not."""
    values = grades(runs, grader)
    ok = values.notna()
    rows = []
    for qid, group in runs[ok].groupby(runs.loc[ok, "question_id"].astype(str)):
        v = values.loc[group.index]
        binary = bool(np.isin(v.to_numpy(), (0.0, 1.0)).all())
        rows.append({"question_id": qid, "n": len(v), "c": int(v.sum()) if binary else None, "mean": float(v.mean()),
                     "majority": majority(group, v), "binary": binary, "var": float(v.var(ddof=1)) if len(v) > 1 else math.nan})
    return pd.DataFrame(rows, columns=["question_id", "n", "c", "mean", "majority", "binary", "var"])


def reducers(runs: pd.DataFrame, grader: str, conds: list[str], k: Optional[int] = None, n_boot: int = 2000) -> pd.DataFrame:
    """Per condition: mean, majority and pass@k over each question's repeats, with CIs resampling questions (facts where
    the runs carry `fact_group`)."""
    rows = []
    for key, group in cells(runs, conds):
        pq = per_question(group, grader)
        if pq.empty:
            continue
        reps = f"{pq['n'].min()}" if pq["n"].min() == pq["n"].max() else f"{pq['n'].min()}-{pq['n'].max()}"
        kk = k or int(pq["n"].min())
        scores = {"mean": (1, pq["mean"]), "majority": (None, pq["majority"])}
        if pq["binary"].all():
            scores[f"pass@{kk}"] = (kk, pd.Series([pass_at_k(int(n), int(c), kk) for n, c in zip(pq["n"], pq["c"])]))
        # One value per question; questions that ask one fact (analysis/facts.py) resample together.
        facts = None
        if "fact_group" in group.columns:
            facts = group.groupby(group["question_id"].astype(str))["fact_group"].first().reindex(pq["question_id"].astype(str)).tolist()
        for name, (kval, vals) in scores.items():
            mean, lo, hi = cluster_bootstrap(vals.to_numpy(), n_boot=n_boot, groups=facts)
            rows.append({**key, "reducer": name, "k": kval, "n_questions": len(pq), "repeats": reps, "mean": mean, "ci_low": lo, "ci_high": hi})
    out = pd.DataFrame(rows, columns=[*conds, *REDUCER_COLUMNS])
    out["k"] = pd.Series([None if v is None or v != v else int(v) for v in out["k"]], index=out.index, dtype=object)  # 3, not 3.000
    return out


def variance_split(runs: pd.DataFrame, grader: str, conds: list[str]) -> pd.DataFrame:
    """Per condition: the grades' variance split between questions and repeats (module docstring)."""
    rows = []
    for key, group in cells(runs, conds):
        pq = per_question(group, grader)
        multi = pq[pq["n"] > 1]
        if multi.empty:
            continue
        repeat_var = float(multi["var"].mean())
        question_var = max(0.0, float(pq["mean"].var(ddof=1)) - float((multi["var"] / multi["n"]).mean())) if len(pq) > 1 else math.nan
        total = repeat_var + question_var  # NaN with one question: no share can be stated
        share = math.nan if math.isnan(total) else repeat_var / total if total > 0 else 0.0
        col = next((c for c in ANSWER_COLUMNS if c in group.columns), None)
        answers = float(group[col].map(_normalise).groupby(group["question_id"].astype(str)).nunique().mean()) if col else math.nan
        rows.append({**key, "n_questions": len(pq), "repeats": int(pq["n"].max()), "grade_var": float(grades(group, grader).var(ddof=1)),
                     "question_var": question_var, "repeat_var": repeat_var, "repeat_share": share, "answers": answers})
    return pd.DataFrame(rows, columns=[*conds, *SPLIT_COLUMNS])
