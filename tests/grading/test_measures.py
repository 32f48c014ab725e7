"""One sentence per measure (issue 29 part 4): the table in grading/measures.py is the text the code opens with, the
docs quote and summary.md gives; evidence_recall's is never gold_content_seen's."""

from __future__ import annotations

import re
from pathlib import Path

from searchbox.grading import evidence
from searchbox.grading.measures import MEASURES, WHERE, sentence

ROOT = Path(__file__).resolve().parents[2]


def test_every_measure_has_one_sentence_and_a_home():
    assert set(MEASURES) == set(WHERE) and all((ROOT / "searchbox" / WHERE[m]).is_file() for m in WHERE)
    assert len(set(MEASURES.values())) == len(MEASURES)  # no two measures share a sentence
    assert all(not v.endswith(".") and "\n" not in v for v in MEASURES.values())
    assert sentence("f1") == "Token F1 of the answer line against the best gold."


def test_the_evidence_module_opens_with_evidence_recalls_sentence():
    first = evidence.__doc__.splitlines()[0]
    assert MEASURES["evidence_recall"] in first and "answer-bearing passage" in MEASURES["evidence_recall"]
    assert "answer-bearing" not in MEASURES["gold_content_seen"] and "distinctive span" in MEASURES["gold_content_seen"]


def test_the_docs_table_quotes_each_sentence():
    text = (ROOT / "docs" / "datasets.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)`(?: \([^|]*\))? \| ([^|]+) \|", text, re.MULTILINE))
    quoted = [m for m in MEASURES if m in rows]
    assert {"evidence_recall", "gold_content_seen", "citation_precision", "gold_doc_recall", "search_calls"} <= set(quoted)
    for m in quoted:
        assert rows[m].startswith(MEASURES[m]), (m, rows[m])
