"""The report's section of metrics beside accuracy, per condition, read from runs.parquet's grade columns.

What each counts (one sentence each; the definitions live where the grades are computed):
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Optional

import pandas as pd

from ..grading.measures import MEASURES, WHERE
from .agreement import agreement
from .calibration import BINS, calibration, reliability_figure

# One sentence each (grading/measures.py), with where the grade is computed.
MEANING = {k: f"{MEASURES[k]} ({WHERE[k]})" for k in ("citation_precision", "citation_recall", "gold_doc_recall", "evidence_doc_recall",
                                                      "search_calls")}
__doc__ += "\n".join(f"- {k}: {v}." for k, v in MEANING.items()) + (
    f"\n- calibration_error: RMS over {BINS} equal-width bins of |accuracy - stated confidence| (analysis/calibration.py)."
    "\n- judge agreement: percent agreement and Cohen's kappa of each judge with the headline grade and with each other.")


def _groups(runs: pd.DataFrame, conds: list[str]):
    return runs.groupby(conds, dropna=False) if conds else [((), runs)]


def table(runs: pd.DataFrame, conds: list[str], grader: str) -> pd.DataFrame:
    cols = [c for c in MEANING if c in runs and runs[c].notna().any()]
    has_conf = "confidence" in runs and runs["confidence"].notna().any() and grader in runs
    rows = []
    for key, g in _groups(runs, conds):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(conds, key), n=len(g), **{c: g[c].mean() for c in cols})
        if has_conf:
            cal = calibration(g["confidence"], g[grader])
            row.update(calibration_error=cal.calibration_error, ece=cal.ece, confidence_stated=cal.n)
        rows.append(row)
    return pd.DataFrame(rows) if cols or has_conf else pd.DataFrame()


def judge_columns(runs: pd.DataFrame) -> list[str]:
    return sorted(c for c in runs.columns if c.startswith("judge_") and c.count("_") == 1 and pd.api.types.is_numeric_dtype(runs[c]))


def agreement_table(runs: pd.DataFrame, grader: str) -> pd.DataFrame:
    judges = [c for c in judge_columns(runs) if runs[c].notna().any()] + (["judge"] if "judge" in runs and runs["judge"].notna().any() else [])
    ids = runs["run_id"].astype(str) if "run_id" in runs else runs.index.astype(str)
    rows = []
    for a, b in [*((grader, j) for j in judges if j != grader), *itertools.combinations(judges, 2)]:
        if a in runs and b in runs:
            ag = agreement(ids, runs[a], runs[b])
            rows.append({"a": a, "b": b, "n": ag.n, "percent": ag.percent, "kappa": ag.kappa, "disagree": ", ".join(ag.disagree[:10])})
    return pd.DataFrame(rows)


def section(runs: pd.DataFrame, conds: list[str], grader: str, md) -> list[str]:
    """Markdown lines for the report (empty when no run carries these grades)."""
    parts: list[str] = []
    t = table(runs, conds, grader)
    if not t.empty:
        parts += ["## Beside accuracy", "", *(f"- `{k}`: {v}." for k, v in MEANING.items() if k in t),
                  *([f"- `calibration_error`: RMS over {BINS} equal-width bins of accuracy ({grader}) minus stated confidence; "
                     "`ece` the same with absolute differences; runs that state no confidence are left out."] if "calibration_error" in t else []),
                  "", md(t), ""]
    a = agreement_table(runs, grader)
    if not a.empty:
        parts += ["## Judge agreement", "", "Percent agreement and Cohen's kappa over the runs both graded; `disagree`: the first runs "
                  "where they differ.", "", md(a), ""]
    return parts


def figure(runs: pd.DataFrame, grader: str, out: Path) -> Optional[Path]:
    if "confidence" not in runs or not runs["confidence"].notna().any() or grader not in runs:
        return None
    return reliability_figure(calibration(runs["confidence"], runs[grader]), Path(out) / "reliability.png", f"Reliability ({grader})")
