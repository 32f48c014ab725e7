"""The power a plan prints: checked against simulated McNemar tests, and against cases built to fool it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from searchbox.analysis.stats import mcnemar_exact
from searchbox.sweep.power import (Design, critical_counts, describe, discordance_of, family_size, mde, power_exact,
                                   power_normal, questions_needed)


def simulated_power(n: int, p10: float, p01: float, alpha: float = 0.05, sims: int = 4000, seed: int = 1) -> float:
    """Share of simulated paired designs (n questions, each a right/b wrong with p10, the reverse with p01) in which
    searchbox's own exact McNemar test rejects: no formula in it."""
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=sims)
    return float(np.mean([mcnemar_exact(int(a), int(b)) <= alpha for a, b, _ in draws]))


@pytest.mark.parametrize("n,psi", [(116, 0.3), (40, 0.5), (300, 0.15)])
def test_the_printed_mde_has_the_simulated_power_it_claims(n, psi):
    delta = mde(n, psi)
    assert 0 < delta <= psi
    got = simulated_power(n, (psi + delta) / 2, (psi - delta) / 2)
    assert abs(got - 0.80) <= 0.03, (n, psi, delta, got)


def test_exact_power_matches_simulation_away_from_the_mde():
    for n, p10, p01 in [(116, 0.2, 0.1), (60, 0.25, 0.05), (116, 0.1, 0.1)]:
        assert abs(power_exact(n, p10 + p01, p10 - p01) - simulated_power(n, p10, p01)) <= 0.03


def test_no_difference_rejects_at_most_alpha():
    """Under the null the exact test is conservative: a formula that forgot the discreteness would claim alpha or more."""
    for n in (10, 116, 500):
        assert power_exact(n, 0.3, 0.0) <= 0.05


def test_questions_needed_is_enough_and_not_much_more():
    for delta, psi in [(0.05, 0.3), (0.1, 0.2)]:
        n = questions_needed(delta, psi)
        assert power_exact(n, psi, delta) >= 0.80
        assert power_exact(int(n * 0.85), psi, delta) < 0.80  # the count is near the least, not padded
        assert abs(simulated_power(n, (psi + delta) / 2, (psi - delta) / 2) - power_exact(n, psi, delta)) <= 0.03


def test_impossible_targets_say_so():
    assert questions_needed(0.4, 0.3) is None  # more difference than questions that differ
    assert math.isnan(mde(5, 0.5))  # five questions: no split of five discordant pairs reaches p <= 0.05
    assert critical_counts(5, 0.05)[5] == -1 and critical_counts(6, 0.05)[6] == 0  # 6-0 is p = 0.031
    assert math.isnan(mde(0, 0.3)) and math.isnan(mde(100, 0.0))


def test_the_mde_grows_with_discordance_and_shrinks_with_questions():
    assert mde(116, 0.5) > mde(116, 0.3) > mde(116, 0.1)
    assert mde(116, 0.3) > mde(464, 0.3)
    assert mde(464, 0.3) == pytest.approx(mde(116, 0.3) / 2, rel=0.15)  # about 1/sqrt(n)
    assert mde(116, 0.3, alpha=0.05 / 30) > mde(116, 0.3)  # a corrected family needs a larger difference


def test_connor_agrees_with_exact_at_large_n():
    assert abs(power_normal(2000, 0.3, 0.04) - power_exact(2000, 0.3, 0.04)) < 0.02


def test_discordance_of_binary_and_averaged_differences():
    assert discordance_of([1, -1, 0, 0]) == 0.5  # half the questions differ
    assert discordance_of([0.5, -0.5, 0, float("nan")]) == pytest.approx(1 / 6)  # repeats averaged: mean square


def test_family_size_counts_what_comparisons_makes():
    assert family_size({"tools": 3, "budget": 3}) == 2 * 3 + 2 * 3
    assert family_size({"tools": 2}) == 1 and family_size({}) == 0


def test_describe_names_the_source_and_the_corrected_alpha():
    lines = describe(Design(116, 0.5, "worst case (no pilot)", comparisons=12), target_effect=0.05)
    text = "\n".join(lines)
    assert "116 question(s)" in text and "worst case" in text and "alpha/12" in text
    assert f"{100 * mde(116, 0.5):.1f} points" in text
    assert f"needs {questions_needed(0.05, 0.5)} question(s)" in text


def test_pilot_discordance_pairs_arms_within_the_other_axes():
    import pandas as pd

    from searchbox.sweep.power import plan_design, pilot_discordance

    rows = []
    for budget in (1, 4):
        for q in range(10):
            rows.append({"tools": "none", "budget": budget, "question_id": f"q{q}", "correct": 0.0})
            rows.append({"tools": "high", "budget": budget, "question_id": f"q{q}", "correct": float(q < (2 if budget == 1 else 6))})
    runs = pd.DataFrame(rows)
    psi, pairs = pilot_discordance(runs, ["tools", "budget"])
    # tools: 2 + 6 of 20 pairs differ; budget: high differs on 4 of 10, none on 0 of 10 -> 12 of 40
    assert pairs == 40 and psi == pytest.approx(12 / 40)
    design = plan_design({"tools": ["none", "high"], "budget": ["1", "4"], "seed": ["0", "1"]}, 10, 1, 0.05, None, runs)
    assert design.comparisons == 4 and design.discordance == pytest.approx(0.3) and design.source.startswith("pilot")
    assert plan_design({"tools": ["high"]}, 10, 1, 0.05, None) is None  # one arm: nothing to compare
    worst = plan_design({"tools": ["a", "b"]}, 10, 1, 0.05, None, runs.assign(correct=0.0))  # a pilot whose arms agree
    assert worst.discordance == 0.5 and "never differ" in worst.source
    given = plan_design({"tools": ["a", "b"]}, 10, 3, 0.01, 0.2)
    assert (given.discordance, given.source, given.binary, given.alpha) == (0.2, "sweep.discordance", False, 0.01)


def test_describe_says_plainly_when_nothing_is_detectable():
    text = "\n".join(describe(Design(6, 0.5, "worst case, no pilot", comparisons=4)))
    assert "no difference is detected with 80% power at alpha=0.05" in text and "too few questions" in text
    assert "where no difference is detectable" in text and "nan" not in text.lower()
