"""Reducers over repeats and the variance split, on tables built to fool them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from searchbox.analysis import report
from searchbox.analysis.compare import paired_comparison
from searchbox.analysis.frames import Frames, conditions
from searchbox.analysis.repeats import has_repeats, majority, pass_at_k, reducers, variance_split


def repeated(p_by_question, repeats: int, seed: int = 0, arm: str = "high", answer=None) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for q, p in enumerate(p_by_question):
        for r in range(repeats):
            right = float(rng.random() < p)
            rows.append({"run_id": f"{arm}-{q}-{r}", "question_id": f"q{q}", "tools": arm, "model.seed": r, "correct": right,
                         "graded_answer": answer(q, r, right) if answer else ("gold" if right else f"wrong{r}")})
    return rows


def test_pass_at_k_is_the_unbiased_estimate_not_the_best_of_n():
    assert pass_at_k(10, 1, 1) == pytest.approx(0.1)
    assert pass_at_k(10, 1, 10) == 1.0 and pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 2, 5) == pytest.approx(1 - math.comb(8, 5) / math.comb(10, 5))
    assert math.isnan(pass_at_k(3, 1, 4))  # k beyond the repeats: no estimate
    # against simulation: draw k of the n repeats and see whether any is right
    rng = np.random.default_rng(0)
    outcomes = np.array([1] * 3 + [0] * 7)
    hits = np.mean([outcomes[rng.choice(10, 4, replace=False)].any() for _ in range(20000)])
    assert abs(hits - pass_at_k(10, 3, 4)) < 0.01


def test_majority_is_the_plurality_answer_not_the_share_right():
    """Three repeats say 'paris' (right), four spread over four wrong answers: right is the plurality though 3/7 < 1/2."""
    group = pd.DataFrame({"graded_answer": ["Paris", "paris ", "PARIS", "lyon", "nice", "rome", "oslo"]})
    values = pd.Series([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    assert majority(group, values) == 1.0
    # the same wrong answer four times beats three right ones
    group = pd.DataFrame({"graded_answer": ["paris"] * 3 + ["lyon"] * 4})
    assert majority(group, values) == 0.0
    # a tie between answers is their mean; empty answers do not vote
    group = pd.DataFrame({"graded_answer": ["paris", "lyon", "", "", ""]})
    assert majority(group, pd.Series([1.0, 0.0, 0.0, 0.0, 0.0])) == 0.5


def test_cis_resample_questions_not_repeats():
    """Ten questions, each always right or always wrong, fifty repeats each: 500 runs are ten observations."""
    rows = repeated([1.0] * 5 + [0.0] * 5, repeats=50)
    red = reducers(pd.DataFrame(rows), "correct", ["tools"]).set_index("reducer")
    once = reducers(pd.DataFrame(repeated([1.0] * 5 + [0.0] * 5, repeats=1)), "correct", ["tools"]).set_index("reducer")
    width = red.loc["mean", "ci_high"] - red.loc["mean", "ci_low"]
    assert width == pytest.approx(once.loc["mean", "ci_high"] - once.loc["mean", "ci_low"])  # no narrower for 50 repeats
    assert width > 0.4  # ten questions at 0.5: a wide interval
    assert red.loc["mean", "n_questions"] == 10 and red.loc["mean", "repeats"] == "50"


def test_cis_resample_facts_where_questions_share_one():
    """Twenty questions that ask four facts (five questions each, all right or all wrong together) are four draws, not
    twenty: the interval is as wide as four questions' would be, and wider than twenty independent ones'."""
    rows = repeated([1.0] * 10 + [0.0] * 10, repeats=3)
    independent = reducers(pd.DataFrame(rows), "correct", ["tools"]).set_index("reducer").loc["mean"]
    shared = pd.DataFrame(rows).assign(fact_group=lambda d: d["question_id"].map(lambda q: f"fact{int(q[1:]) // 5}"))
    clustered = reducers(shared, "correct", ["tools"]).set_index("reducer").loc["mean"]
    four = reducers(pd.DataFrame(repeated([1.0, 1.0, 0.0, 0.0], repeats=3)), "correct", ["tools"]).set_index("reducer").loc["mean"]
    assert clustered["mean"] == independent["mean"] == 0.5  # the estimate still weighs each question equally
    assert clustered["ci_high"] - clustered["ci_low"] == pytest.approx(four["ci_high"] - four["ci_low"], abs=0.1)
    assert clustered["ci_high"] - clustered["ci_low"] > 1.5 * (independent["ci_high"] - independent["ci_low"])


def test_reducers_tell_apart_a_coin_and_a_split_question_set():
    """Arm `coin`: every question right half the time. Arm `split`: half the questions always right, half never.
    Their means agree (0.5); majority and pass@k do not, and the variance split names the difference."""
    coin = repeated([0.5] * 40, repeats=8, seed=1, arm="coin")
    split = repeated([1.0] * 20 + [0.0] * 20, repeats=8, seed=2, arm="split")
    runs = pd.DataFrame(coin + split)
    red = reducers(runs, "correct", ["tools"]).set_index(["tools", "reducer"])["mean"]
    assert red[("coin", "mean")] == pytest.approx(0.5, abs=0.06) and red[("split", "mean")] == 0.5
    assert red[("coin", "pass@8")] > 0.95 and red[("split", "pass@8")] == 0.5
    vs = variance_split(runs, "correct", ["tools"]).set_index("tools")
    assert vs.loc["coin", "repeat_share"] > 0.9  # the spread is between repeats
    assert vs.loc["split", "repeat_var"] == 0.0 and vs.loc["split", "repeat_share"] == 0.0  # all between questions
    # the wrong repeats each say something else ("wrong0".."wrong7"), the right ones "gold": the answers count them
    assert vs.loc["split", "answers"] == pytest.approx(4.5)  # half the questions always "gold" (1), half 8 wrong answers
    assert vs.loc["coin", "answers"] > 3
    assert vs.loc["split", "question_var"] == pytest.approx(0.25 * 40 / 39)
    one = variance_split(pd.DataFrame(repeated([0.5], repeats=8, seed=3)), "correct", ["tools"]).iloc[0]
    assert one["repeat_var"] > 0 and math.isnan(one["question_var"]) and math.isnan(one["repeat_share"])  # one question: no split


def test_variance_split_recovers_planted_components():
    rng = np.random.default_rng(3)
    p = rng.beta(2, 2, size=300)  # question variance of p: 1/20 for beta(2, 2)
    runs = pd.DataFrame(repeated(p, repeats=6, seed=4))
    vs = variance_split(runs, "correct", ["tools"]).iloc[0]
    expected_repeat = float(np.mean(p * (1 - p)))  # E[p(1-p)] = 0.2
    assert vs["repeat_var"] == pytest.approx(expected_repeat, abs=0.02)
    assert vs["question_var"] == pytest.approx(float(np.var(p, ddof=1)), abs=0.015)


def test_seeds_are_repeats_in_a_condition_and_comparisons_average_them():
    a = repeated([1.0] * 10, repeats=3, arm="high")
    b = repeated([0.0] * 10, repeats=3, arm="none")
    runs = pd.DataFrame(a + b)
    assert conditions(runs) == ["tools"] and has_repeats(runs, ["tools"])
    res = paired_comparison(runs, "correct", {"tools": "high"}, {"tools": "none"})
    assert res["n_questions"] == 10 and res["test"] == "mcnemar" and res["a_only"] == 10  # 10 questions, not 30 runs
    half = pd.DataFrame(repeated([0.5] * 30, repeats=4, seed=5, arm="high") + b)
    res = paired_comparison(half, "correct", {"tools": "high"}, {"tools": "none"})
    # ten shared questions, every one better: p is the least ten sign flips allow (2 / 2^10), however many repeats
    assert res["test"] == "sign-flip" and res["n_questions"] == 10 and res["p"] == pytest.approx(2 / 2**10)


def test_the_report_shows_repeats_only_when_there_are_some():
    runs = pd.DataFrame(repeated([0.5] * 12, repeats=3, arm="high") + repeated([0.2] * 12, repeats=3, seed=9, arm="none"))
    runs["f1"] = np.where(runs["model.seed"] == 0, 0.5, 0.25)  # F1 moves between repeats
    text = report.summary(Frames(runs, pd.DataFrame(), pd.DataFrame(), ["tools"]), "correct", "x", skipped={})
    assert "## Repeats" in text and "pass@3" in text and "repeat_share" in text
    assert "| correct | high |" in text and "| f1 | high |" in text  # the split of both grades
    single = runs[runs["model.seed"] == 0]
    assert "## Repeats" not in report.summary(Frames(single, pd.DataFrame(), pd.DataFrame(), ["tools"]), "correct", "x", skipped={})
