"""Multiplicity: p-values adjusted over the family a report shows. A planted design of 20 null comparisons and one
real difference: uncorrected p-values find false positives, Holm and Benjamini-Hochberg keep the real one alone."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from searchbox.analysis import comparisons
from searchbox.analysis import report
from searchbox.analysis.frames import Frames
from searchbox.analysis.multiplicity import adjust, benjamini_hochberg, describe, holm
from searchbox.analysis.stats import sign_flip_p
from searchbox.errors import SearchboxError

QUESTIONS = 150
NULL_ARMS = 20
REAL = "t20"  # the one arm that truly differs from the reference t00


def planted(seed: int) -> pd.DataFrame:
    """22 tool arms over the same questions: t00 is the reference, t01..t19 and t21 answer like it (each question has
    its own difficulty, so the arms agree on most questions and part on some), t20 is 25 points better."""
    rng = np.random.default_rng(seed)
    difficulty = rng.beta(2, 2, size=QUESTIONS)
    rows = []
    for arm in [f"t{i:02d}" for i in range(NULL_ARMS + 2)]:
        lift = 0.25 if arm == REAL else 0.0
        right = rng.random(QUESTIONS) < np.clip(difficulty + lift, 0, 1)
        rows += [{"run_id": f"{arm}-{q}", "question_id": f"q{q}", "tools": arm, "model": "synthetic", "correct": float(r),
                  "stop_reason": "answered"} for q, r in enumerate(right)]
    return pd.DataFrame(rows)


def test_holm_and_bh_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: times 4/1, 4/2, 4/3, 4/4 -> 0.02, 0.02, 0.04, 0.04 (monotone from the top)
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([]).size == 0 and holm([0.9, 0.9])[0] == 1.0  # capped at 1


@pytest.mark.parametrize("seed", [3, 11])
def test_twenty_nulls_and_one_real_difference(seed):
    pairs = comparisons(planted(seed), "correct", ["tools"], n_boot=200)
    assert len(pairs) == NULL_ARMS + 1 and (pairs["b"] == "tools=t00").all()
    real = pairs["a"] == f"tools={REAL}"
    assert pairs.loc[real, "p"].iloc[0] < 0.001
    for method in ("holm", "bh"):
        adj = adjust(pairs, method=method)
        assert (adj["family_size"] == NULL_ARMS + 1).all() and (adj["family"] == "grader=correct").all()
        assert adj.loc[real, "p_adj"].iloc[0] < 0.05, method  # the real difference survives
        assert (adj.loc[~real, "p_adj"] >= 0.05).all(), (method, adj.loc[~real, ["a", "p", "p_adj"]])
        assert (adj["p_adj"] >= adj["p"] - 1e-12).all()


def test_an_uncorrected_reading_is_fooled_and_holm_is_not():
    """Over many planted families: raw p < 0.05 finds a null 'win' in most, Holm in about alpha of them or fewer."""
    rng = np.random.default_rng(0)
    raw_fooled = holm_fooled = bh_fooled = 0
    families = 2000
    for _ in range(families):
        p = np.append(rng.random(NULL_ARMS), 1e-6)  # 20 nulls (uniform p) and the real one
        raw_fooled += (p[:-1] < 0.05).any()
        holm_fooled += (holm(p)[:-1] < 0.05).any()
        bh_fooled += (benjamini_hochberg(p)[:-1] < 0.05).any()
    assert raw_fooled / families > 0.55  # 1 - 0.95^20 = 0.64
    assert holm_fooled / families <= 0.06  # family-wise error at 0.05
    assert bh_fooled / families <= 0.15  # the FDR is controlled, not the FWER: more nulls pass, still far fewer


def test_families_split_as_asked():
    pairs = comparisons(planted(3), "correct", ["tools"], n_boot=100)
    both = pd.concat([pairs, pairs.assign(grader="contains")], ignore_index=True)
    assert set(adjust(both)["family_size"]) == {21}  # one family per grader
    assert set(adjust(both, "all")["family_size"]) == {42}
    assert set(adjust(both, "vary")["family"]) == {"grader=correct, vary=tools", "grader=contains, vary=tools"}
    nan = pairs.copy()
    nan.loc[0, "p"] = math.nan  # a comparison without a shared question is in no family
    out = adjust(nan)
    assert out.loc[0, "family"] == "" and math.isnan(out.loc[0, "p_adj"]) and set(out.loc[1:, "family_size"]) == {20}
    with pytest.raises(SearchboxError, match="--family"):
        adjust(pairs, "everything")


def test_the_summary_states_the_family_size_and_expected_false_positives():
    runs = planted(3)
    text = report.summary(Frames(runs, pd.DataFrame(), pd.DataFrame(), ["tools"]), "correct", "planted", skipped={})
    assert "Family `grader=correct`: 21 comparison(s)" in text and "1.1 of them would still show p < 0.05" in text
    assert "keep p_adj < 0.05 after Holm" in text and "Power (`grader=correct`)" in text
    bh = report.summary(Frames(runs, pd.DataFrame(), pd.DataFrame(), ["tools"]), "correct", "planted", skipped={}, method="bh")
    assert "after Benjamini-Hochberg" in bh


def test_sign_flip_p_on_cases_built_to_fool_it():
    assert sign_flip_p([0, 0, 0]) == 1.0  # no difference anywhere
    assert sign_flip_p([1.0] * 6) == pytest.approx(2 / 64)  # exact: only all-plus and all-minus are as extreme
    assert sign_flip_p([0.5, -0.5] * 20) > 0.5  # large differences that cancel are no effect
    assert sign_flip_p([0.1] * 40) < 0.001  # a small difference on every question is one


RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.mark.parametrize("study", sorted(p.parent.name for p in RESULTS.glob("*/paired_comparisons.csv")))
def test_the_committed_reports_carry_adjusted_p_values_over_a_stated_family(study):
    pairs = pd.read_csv(RESULTS / study / "paired_comparisons.csv")
    assert {"p", "p_adj", "family", "family_size"} <= set(pairs.columns)
    again = adjust(pairs.drop(columns=["family", "family_size", "p_adj"]))
    assert np.allclose(again["p_adj"], pairs["p_adj"], equal_nan=True) and (again["family_size"] == pairs["family_size"]).all()
    text = (RESULTS / study / "summary.md").read_text()
    for name, size in pairs.groupby("family")["family_size"].first().items():
        assert f"Family `{name}`: {size} comparison(s)" in text


def simulated(path: Path, seed: int = 5) -> Path:
    """A runs.parquet with known truth: over 200 questions, tools=high is 30 points above tools=none at budget 4 (about
    27 after the ceiling clips it; the power to see it is over 99%) and
    equal at budget 1 (so under tools=none budget changes nothing)."""
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 2, size=200)
    rows = []
    for tools in ("none", "high"):
        for budget in (1, 4):
            lift = 0.3 if (tools, budget) == ("high", 4) else 0.0
            right = rng.random(200) < np.clip(base + lift, 0, 1)
            rows += [{"run_id": f"{tools}{budget}-{q}", "question_id": f"q{q}", "tools": tools, "budget": budget, "model": "sim",
                      "correct": float(r), "stop_reason": "answered"} for q, r in enumerate(right)]
    path.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path / "runs.parquet")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600, cwd=RESULTS.parent)


def test_report_and_power_commands_on_a_simulated_sweep(tmp_path):
    sweep = simulated(tmp_path / "sweep")
    out = _cli("searchbox.report", str(sweep), "--out", str(tmp_path / "rep"), "--family", "vary", "--adjust", "bh")
    assert out.returncode == 0, out.stderr[-2000:]
    pairs = pd.read_csv(tmp_path / "rep" / "paired_comparisons.csv")
    assert set(pairs["family"]) == {"grader=correct, vary=tools", "grader=correct, vary=budget"}
    real = (pairs["vary"] == "tools") & (pairs["context"] == "budget=4")
    assert pairs.loc[real, "p_adj"].iloc[0] < 0.05 and (pairs.loc[~real & (pairs["vary"] == "tools"), "p_adj"] >= 0.05).all()
    text = (tmp_path / "rep" / "summary.md").read_text()
    assert "after Benjamini-Hochberg" in text and "Family `grader=correct, vary=budget`: 2 comparison(s)" in text
    power = _cli("searchbox.power", str(sweep), "--target-effect", "0.05")
    assert power.returncode == 0, power.stderr[-2000:]
    assert "mde" in power.stdout and "need" in power.stdout and "Power (`grader=correct`)" in power.stdout
    for bad, why in ((["--alpha", "2"], "--alpha and --power"), (["--target-effect", "5"], "--target-effect must lie"),
                     (["--grader", "nope"], "no such grade")):
        refused = _cli("searchbox.power", str(sweep), *bad)
        assert refused.returncode != 0 and why in refused.stderr and "Traceback" not in refused.stderr
    bad_family = _cli("searchbox.report", str(sweep), "--out", str(tmp_path / "x"), "--family", "everything")
    assert bad_family.returncode != 0 and "Traceback" not in bad_family.stderr
