"""Issue 29's held-out style pairs (tests/grading/round3_pairs.py), each through the real grader, verdict fixed by hand."""

from __future__ import annotations

import pytest

from searchbox.grading import Question, grade_text
from searchbox.grading.normalize import tokens
from searchbox.grading.shape import comparison_options
from tests.grading.round3_pairs import PAIRS


@pytest.mark.parametrize("kind,question,gold,aliases,answer,want", PAIRS, ids=[f"{p[0]}:{p[4][:40]}" for p in PAIRS])
def test_round3_pair(kind, question, gold, aliases, answer, want):
    grades = grade_text(answer, Question("p", question, gold, list(aliases)))
    assert grades["correct"] == want, grades["correct_reason"]


def test_us_dollars_is_one_unit():
    assert tokens("74,000 US dollars") == tokens("$74,000") == tokens("USD 74,000") == tokens("74,000 dollars") == ["74000", "usd"]
    assert tokens("12 Swiss francs") == tokens("CHF 12")
    assert tokens("74,000 Australian dollars") != tokens("$74,000")


def test_comparison_options_are_read_from_the_question():
    assert comparison_options("Which is higher, Wellington Tower or Gannet Rock?") == ("Wellington Tower", "Gannet Rock")
    assert comparison_options("Who was born first: Phil Spector or Brian Wilson?") == ("Phil Spector", "Brian Wilson")
    assert comparison_options("Is Gannet Rock higher than Wellington Tower?") is None
