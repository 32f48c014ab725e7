"""Analysis on synthetic tables with known answers: conditions never pooled, CIs over questions, paired tests, each run once."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from searchbox.analysis import PooledArm, accuracy_table, bootstrap_ci, comparisons, conditions, load, mcnemar_exact, paired_comparison, search_style_table, tokens_per_turn, tool_usage

TRUE_RATE = {("high", 1): 0.3, ("high", 4): 0.8, ("none", 1): 0.2, ("none", 4): 0.5}


def write_tables(d, runs, turns, calls):
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(runs).to_parquet(d / "runs.parquet")
    pd.DataFrame(turns).to_parquet(d / "turns.parquet")
    pd.DataFrame(calls).to_parquet(d / "tool_calls.parquet")
    return d


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Schema-1-shaped tables (no design metadata): 200 runs per grid point over 100 questions, two turns each."""
    rng = np.random.default_rng(7)
    runs, turns, calls = [], [], []
    n = 0
    for (tier, budget), p in TRUE_RATE.items():
        for i in range(200):
            rid = f"r{n}"
            n += 1
            runs.append({"run_id": rid, "tools": tier, "budget": budget, "budget_unit": "turns", "model": "synthetic",
                         "question_id": f"q{i % 100}", "question_type": "factoid" if i % 2 else "aggregate",
                         "contains": float(rng.random() < p), "exact_match": np.nan, "retrieval_hit": 1.0,
                         "turns": 2, "elapsed_s": 10.0, "llm_s": 7.0, "tool_s": 2.0, "stop_reason": "budget_spent",
                         "tokens_prompt": 300, "tokens_cached": 100, "tokens_completion": 40, "tokens_total": 340, "tool_calls": 3})
            for t in (1, 2):
                turns.append({"run_id": rid, "turn": t, "tools": tier, "prompt_tokens": 100 * t + 50, "cached_tokens": 50 * t,
                              "completion_tokens": 20, "context_tokens": 200, "tool_calls": 3 if t == 1 else 0})
            calls.append({"run_id": rid, "turn": 1, "step": 1, "tool": "bash", "programs": ["grep", "wc"], "tools": tier})
            calls.append({"run_id": rid, "turn": 1, "step": 2, "tool": "search_dataroom" if tier == "high" else "read", "programs": [], "tools": tier})
            calls.append({"run_id": rid, "turn": 1, "step": 3, "tool": "(malformed)", "programs": [], "tools": tier})
    return write_tables(tmp_path_factory.mktemp("sweep"), runs, turns, calls)


def test_bootstrap_ci_covers_true_rate():
    rng = np.random.default_rng(1)
    covered = 0
    for trial in range(40):
        x = (rng.random(300) < 0.7).astype(float)
        mean, lo, hi = bootstrap_ci(x, seed=trial)
        assert lo <= mean <= hi
        covered += lo <= 0.7 <= hi
    assert covered >= 34  # ~95% coverage; 34/40 leaves room for chance
    assert np.isnan(bootstrap_ci([np.nan, None])[0])


def test_accuracy_table_counts_and_bounds(sweep):
    frames = load([sweep])
    assert conditions(frames.runs) == ["tools", "budget"]
    table = accuracy_table(frames.runs, "contains")
    assert len(table) == 4 and set(table["n"]) == {200} and set(table["n_questions"]) == {100}
    for _, row in table.iterrows():
        assert row["ci_low"] <= TRUE_RATE[(row["tools"], row["budget"])] <= row["ci_high"]
        assert row["ci_high"] - row["ci_low"] < 0.25
    missing = accuracy_table(frames.runs, "exact_match")
    assert set(missing["n"]) == {0} and missing["mean"].isna().all()  # NaN grades are missing, not zero


def test_ci_resamples_questions_not_runs():
    # 5 questions, 40 runs each; a question is either always right or always wrong. 200 runs, but only 5
    # independent units: a run-level bootstrap would claim a CI of about +-0.07.
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(200)], "question_id": [f"q{i % 5}" for i in range(200)],
                         "contains": [float(i % 5 < 2) for i in range(200)], "tools": "high"})
    row = accuracy_table(runs, "contains").iloc[0]
    assert row["mean"] == pytest.approx(0.4) and row["n"] == 200 and row["n_questions"] == 5
    assert row["ci_high"] - row["ci_low"] > 0.5
    one = accuracy_table(runs[runs["question_id"] == "q0"], "contains").iloc[0]
    assert one["mean"] == 1.0 and math.isnan(one["ci_low"])  # one question: no spread to speak of


def test_conditions_are_never_pooled():
    rows = []
    for force in (True, False):
        for i in range(10):
            rows.append({"run_id": f"f{force}{i}", "question_id": f"q{i}", "tools": "high", "budget": 4, "force_budget": force,
                         "retriever": "dense", "contains": float(force)})
    for retriever in ("dense", "bm25", "hybrid"):
        for i in range(10):
            rows.append({"run_id": f"n{retriever}{i}", "question_id": f"q{i}", "tools": "none", "budget": 4, "force_budget": True,
                         "retriever": retriever, "contains": 0.5})
    runs = pd.DataFrame(rows)
    assert set(conditions(runs)) == {"tools", "force_budget", "retriever"}
    table = accuracy_table(runs, "contains", ("tools", "budget"))  # asking for fewer keys still splits every condition
    assert len(table) == 5 and set(table["n"]) == {10}
    high = table[table["tools"] == "high"].set_index("force_budget")["mean"]
    assert high[True] == 1.0 and high[False] == 0.0


def test_conditions_skip_replicates_operational_and_aliases():
    runs = pd.DataFrame({"run_id": list("abcd"), "question_id": "q", "model": ["m1", "m1", "m2", "m2"],
                         "served_model_id": ["M-1", "M-1", "M-2", "M-2"], "model.seed": [0, 1, 0, 1],
                         "model.parallel": [1, 2, 1, 2], "model.temperature": [0.0, 0.0, 0.0, 0.0], "contains": 1.0})
    assert conditions(runs) == ["model"]


def test_a_question_selection_is_no_condition():
    """questions.limit=20, then the same sweep at 40: the first 20 runs are kept (the key is the question, not the
    limit), so their rows say 20 and the rest 40. Which questions ran is the question_id column's business; a limit
    or an id list splitting the conditions would halve every cell and compare nothing."""
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(8)], "question_id": [f"q{i % 4}" for i in range(8)],
                         "budget": [1, 1, 1, 1, 3, 3, 3, 3], "questions.limit": [2, 2, 4, 4, 2, 2, 4, 4],
                         "questions.ids": [None] * 8, "contains": 1.0})
    assert conditions(runs) == ["budget"]
    runs["questions.ids"] = ["q0,q1", None] * 4
    assert conditions(runs) == ["budget"]


def test_paired_comparison_and_mcnemar():
    rows = []
    for i in range(10):
        rows.append({"run_id": f"a{i}", "question_id": f"q{i}", "tools": "high", "budget": 4, "contains": 1.0})
        rows.append({"run_id": f"b{i}", "question_id": f"q{i}", "tools": "none", "budget": 4, "contains": float(i < 5)})
        rows.append({"run_id": f"c{i}", "question_id": f"q{i}", "tools": "none", "budget": 1, "contains": 0.0})
    runs = pd.DataFrame(rows)
    res = paired_comparison(runs, "contains", {"tools": "high", "budget": 4}, {"tools": "none", "budget": 4})
    assert res["n_questions"] == 10 and res["diff"] == pytest.approx(0.5)
    assert (res["a_only"], res["b_only"]) == (5, 0) and res["mcnemar_p"] == pytest.approx(0.0625)
    assert res["ci_low"] > 0
    with pytest.raises(PooledArm, match="pools budget"):
        paired_comparison(runs, "contains", {"tools": "high"}, {"tools": "none"})
    table = comparisons(runs, "contains")
    assert set(table["vary"]) == {"tools", "budget"} and len(table) == 2  # high vs none at budget 4; budget 4 vs 1 for none


def test_paired_comparison_averages_replicates():
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(8)], "question_id": ["q0", "q0", "q1", "q1"] * 2,
                         "tools": ["high"] * 4 + ["none"] * 4, "model.seed": [0, 1] * 4,
                         "contains": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]})
    res = paired_comparison(runs, "contains", {"tools": "high"}, {"tools": "none"})
    assert res["n_questions"] == 2 and res["diff"] == pytest.approx(((0.5 - 0) + (1 - 0.5)) / 2)
    assert math.isnan(res["mcnemar_p"])  # per-question means are not binary


def test_mcnemar_exact_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(0.0625)
    assert mcnemar_exact(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert mcnemar_exact(3, 3) == 1.0


def test_tool_usage_splits_bash_and_leaves_malformed_out(sweep):
    frames = load([sweep])
    usage = tool_usage(frames.calls, "tools")
    high = usage[usage["tools"] == "high"].set_index("choice")["count"]
    assert high["bash:grep"] == 400 and high["bash:wc"] == 400 and high["search_dataroom"] == 400
    assert "(malformed)" not in set(usage["choice"])
    assert abs(usage.groupby("tools")["share"].sum() - 1).max() < 1e-9
    assert frames.turns.groupby("turn")["malformed"].sum().to_dict() == {1: 800, 2: 0}
    assert set(frames.runs["tool_calls"]) == {2} and set(frames.runs["malformed_replies"]) == {1}


def test_tokens_per_turn(sweep):
    tpt = tokens_per_turn(load([sweep]).turns, "tools")
    row = tpt[(tpt["tools"] == "none") & (tpt["turn"] == 2)].iloc[0]
    assert (row["uncached_prompt"], row["cached_prompt"], row["completion"]) == (150, 100, 20)


def test_search_style(sweep):
    table = search_style_table(load([sweep]))
    assert set(table["style"]) == {"grep", "grep+dense"}
    assert table["n"].sum() == 800


def test_search_style_without_any_tool_call():
    from searchbox.analysis import Frames

    runs = pd.DataFrame({"run_id": ["a", "b"], "question_id": ["q1", "q2"], "question_type": ["factoid", ""], "contains": [1.0, 0.0]})
    table = search_style_table(Frames(runs, pd.DataFrame(), pd.DataFrame()))  # np.select once failed on a non-boolean column
    assert set(table["style"]) == {"neither"} and table["n"].sum() == 2


def test_load_counts_a_run_once_across_sweeps(sweep, tmp_path):
    frames = load([sweep, sweep])
    assert len(frames.runs) == 800 and len(frames.turns) == 1600 and len(frames.calls) == 1600
    assert "retrieval_hit" not in frames.runs.columns  # schema-1 grade from paths, not evidence


# ---- comparisons that never drop silently (issue 19) ---------------------------------------------------
def _grid(models=("m1", "m2", "m3", "m4"), tools=("high", "low", "none"), budgets=(1, 2, 4), questions=6):
    rows = []
    for m in models:
        for t in tools:
            for b in budgets:
                for q in range(questions):
                    rows.append({"run_id": f"{m}-{t}-{b}-{q}", "question_id": f"q{q}", "model": m, "tools": t, "budget": b,
                                 "correct": float((q + b) % 3 == 0), "contains": 1.0})
    return pd.DataFrame(rows)


def test_comparisons_are_never_cut():
    """tools_x_budget's shape: 4 models x 3 tiers x 3 budgets gives 75 comparisons (the old cut kept 60, dropping 15 model ones)."""
    table = comparisons(_grid(), "correct", n_boot=50)
    assert len(table) == 24 + 24 + 27
    assert (table["vary"] == "model").sum() == 27 and (table["vary"] == "tools").sum() == 24
    assert table["n_questions"].eq(6).all()


def test_arm_values_match_whatever_their_type():
    runs = _grid(models=("m1",), tools=("none",), budgets=(4, 16))
    runs["force_budget"] = True
    res = paired_comparison(runs, "correct", {"budget": 16.0, "force_budget": "true"}, {"budget": "4"}, n_boot=50)
    assert res["n_questions"] == 6 and res["a"] == "budget=16.0, force_budget=true"
    as_text = runs.assign(budget=runs["budget"].astype(str))  # a column read back as strings matches numbers too
    assert paired_comparison(as_text, "correct", {"budget": 16}, {"budget": 4.0}, n_boot=50)["n_questions"] == 6


def test_an_arm_that_matches_no_run_is_an_error():
    from searchbox.analysis import EmptyArm

    runs = _grid(models=("m1",), tools=("none",), budgets=(4, 16))
    with pytest.raises(EmptyArm, match=r"arm a \(budget=32\): no run has budget=32; budget has 4, 16"):
        paired_comparison(runs, "correct", {"budget": 32}, {"budget": 4})
    with pytest.raises(EmptyArm, match="no column 'retriever'"):
        paired_comparison(runs, "correct", {"budget": 4}, {"budget": 16, "retriever": "bm25"})
    two = _grid(models=("m1", "m2"), tools=("none",), budgets=(4, 16))
    two = two[~((two["model"] == "m2") & (two["budget"] == 16))]
    with pytest.raises(EmptyArm, match="never together"):
        paired_comparison(two, "correct", {"model": "m2", "budget": 16}, {"model": "m2", "budget": 4})


def test_missing_values_are_a_level_and_absent_levels_no_comparison():
    runs = _grid(models=("m1", "m2"), tools=("none", "high"), budgets=(1,))
    runs["retriever"] = np.where(runs["model"] == "m1", None, "bm25")
    runs = runs[~((runs["model"] == "m2") & (runs["tools"] == "high"))]  # m2 ran only the reference tier
    table = comparisons(runs, "correct", n_boot=50)
    assert sorted(zip(table["vary"], table["context"])) == [("model", "tools=none"), ("tools", "model=m1")]  # m2 has no high
    res = paired_comparison(runs, "correct", {"retriever": None, "tools": "high"}, {"retriever": float("nan"), "tools": "none"}, n_boot=50)
    assert res["n_questions"] == 6  # None and NaN are one missing value


def test_headline_grader_prefers_the_judge_then_correct():
    from searchbox.analysis import headline_grader

    runs = _grid(models=("m1",), tools=("none",), budgets=(1,))
    assert headline_grader(runs) == "correct"
    assert headline_grader(runs.drop(columns="correct")) == "contains"  # tables graded before `correct`
    assert headline_grader(runs.assign(judge=np.nan)) == "correct"  # a judge column with no verdicts is no judge
    assert headline_grader(runs.assign(judge=1.0)) == "judge"
    assert accuracy_table(runs)["mean"].iloc[0] == pytest.approx(runs["correct"].mean())  # the default is the headline
