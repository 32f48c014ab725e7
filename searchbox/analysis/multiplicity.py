"""p-values corrected for how many comparisons one report shows.

A report that lists m comparisons at p < 0.05 expects 0.05 m of them to be false positives when no arm differs.
Each comparison belongs to a *family*, and its p-value is adjusted over that family:

- Holm (1979), the default: controls the family-wise error rate (the chance of even one false positive) at alpha,
  under any dependence between the tests, and rejects everything Bonferroni rejects and more.
- Benjamini-Hochberg (1995), `--adjust bh`: controls the false discovery rate (the expected share of false
  positives among the rejections) at alpha; valid for independent or positively dependent tests (Benjamini and
  Yekutieli 2001), which comparisons sharing a reference arm are.

`--family` says what one family is: `grader` (the default: every comparison of one grader, so the headline
grader's comparisons are one family and the lenient grader's another), `all` (every row of the table, graders
together), or `vary` (each grader and varied column apart: the tools comparisons and the budget comparisons are
separate questions). A comparison without a p-value (no shared question) is in no family and adds nothing to its size.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pandas as pd

from ..errors import SearchboxError

METHODS = ("holm", "bh")
FAMILIES = ("grader", "all", "vary")
DEFAULT_METHOD, DEFAULT_FAMILY = "holm", "grader"
METHOD_NAME = {"holm": "Holm", "bh": "Benjamini-Hochberg"}
FAMILY_KEYS = {"grader": ["grader"], "all": [], "vary": ["grader", "vary"]}


def holm(pvalues: Iterable[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest times (m - i + 1), made monotone, capped at 1."""
    p = np.asarray(list(pvalues), dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = stepped
    return out


def benjamini_hochberg(pvalues: Iterable[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): the i-th smallest times m / i, made monotone from the top."""
    p = np.asarray(list(pvalues), dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    stepped = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = stepped
    return out


ADJUST = {"holm": holm, "bh": benjamini_hochberg}


def check(family: str, method: str) -> None:
    if family not in FAMILIES:
        raise SearchboxError(f"--family {family!r}: expected one of {', '.join(FAMILIES)}")
    if method not in METHODS:
        raise SearchboxError(f"--adjust {method!r}: expected one of {', '.join(METHODS)}")


def adjust(pairs: pd.DataFrame, family: str = DEFAULT_FAMILY, method: str = DEFAULT_METHOD, pcol: str = "p") -> pd.DataFrame:
    """The comparisons with `family` (its name), `family_size` (the comparisons with a p-value in it) and `p_adj`
    (adjusted over it) added; rows without a p-value get neither."""
    check(family, method)
    out = pairs.copy()
    out["family"], out["family_size"], out["p_adj"] = "", 0, math.nan
    if out.empty or pcol not in out.columns:
        return out
    p = pd.to_numeric(out[pcol], errors="coerce")
    keys = [k for k in FAMILY_KEYS[family] if k in out.columns]
    groups = [(key, g.index) for key, g in out.groupby(keys, dropna=False, sort=False)] if keys else [((), out.index)]
    for key, index in groups:
        ok = [i for i in index if not math.isnan(p.loc[i])]
        name = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "every comparison"
        out.loc[ok, "family"] = name
        out.loc[ok, "family_size"] = len(ok)
        out.loc[ok, "p_adj"] = ADJUST[method](p.loc[ok].to_numpy())
    return out


def describe(pairs: pd.DataFrame, method: str = DEFAULT_METHOD, alpha: float = 0.05) -> list[str]:
    """One line per family for a summary: its size, what an uncorrected reading would expect, what survives."""
    lines = []
    if pairs.empty or "family" not in pairs.columns:
        return lines
    what = "family-wise error" if method == "holm" else "false discovery rate"
    for name, g in pairs[pairs["family"] != ""].groupby("family", sort=False):
        m = int(g["family_size"].iloc[0])
        raw = int((pd.to_numeric(g["p"], errors="coerce") < alpha).sum())
        kept = int((g["p_adj"] < alpha).sum())
        lines.append(f"Family `{name}`: {m} comparison(s); if no arm differed, {alpha * m:.2g} of them would still show p < {alpha:g} "
                     f"by chance. {raw} do; {kept} keep p_adj < {alpha:g} after {METHOD_NAME[method]} ({what} at {alpha:g}).")
    return lines
