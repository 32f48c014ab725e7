"""Round four: crafted answers a reviewer would try, each through the real grader, verdict fixed by hand first.

Each group names the defect it found (the grade was wrong before its commit); the rows beside the defect are variants that
were already right and must stay so.
"""

from __future__ import annotations

import pytest

from searchbox.grading import Question, grade_text, verdict

S, H = ["Scott Martens"], ["Han Xiao"]
APACHE = ["Apache-2.0"]
GANNET = ["38.4 metres", "38.4 m", "38.4"]

# (ANSWER.md, golds, question, correct?)
UNICODE = [
    # invisible format characters (zero-width space, joiner, BOM, bidi controls) hid a negation from the grader
    ("N\u200bot Han Xiao", H, "", False),
    ("n\u200dot Han Xiao", H, "", False),
    ("Han Xiao is n\u2060ot the author", H, "", False),
    ("Han Xiao is no\ufefft the author", H, "", False),
    ("Sc\u200bott Martens", S, "", True),
    ("A\u200bpache-2.0", APACHE, "", True),
    # Cyrillic and Greek look-alikes spelled a negation the grader could not read, or a name it could not match
    ("Han Xiao is n\u043et the author", H, "", False),  # Cyrillic o
    ("N\u043et Han Xiao", H, "", False),
    ("\u039d\u039f, it is Scott Martens.", H, "", False),  # Greek capital Nu Omicron: "NO"
    ("\u0405cott Martens", S, "", True),  # Cyrillic S
    ("Scott M\u0430rtens", S, "", True),  # Cyrillic a
    ("Not Han Xiao", H, "", False),
    ("Scott Martens", S, "", True),
    ("Москва", ["Москва"], "", True),  # a Cyrillic word is left as it is
    ("Han Xiao\u00a0", H, "", True),
]


def _grade(answer: str, golds: list[str], question: str) -> float:
    return grade_text(answer, Question("q", question, golds[0], golds[1:]))["correct"]


@pytest.mark.parametrize("answer,golds,question,expected", UNICODE)
def test_invisible_and_look_alike_characters_read_as_they_look(answer, golds, question, expected):
    assert _grade(answer, golds, question) == float(expected), verdict(answer, golds, question).as_dict()
