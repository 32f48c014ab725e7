"""The report's section beside accuracy, on real run directories collected into runs.parquet."""

from __future__ import annotations

from pathlib import Path

from searchbox import report
from tests.fakes.runs import make_run

BASE = {"exact_match": 1.0, "f1": 1.0, "evidence_recall": 1.0, "grader_version": "test"}


def test_report_shows_citations_calibration_and_judge_agreement(tmp_path):
    s = tmp_path / "sweep"
    for i, q in enumerate(("nw01", "nw02", "nw03", "nw04")):
        right = i % 2 == 0
        grades = {**BASE, "correct": 1.0 if right else 0.0, "contains": 1.0 if right else 0.0, "citation_precision": 0.5,
                  "citation_recall": 1.0, "gold_doc_recall": 1.0, "evidence_doc_recall": None, "search_calls": 2 + i,
                  "confidence": 0.9, "judge_a": 1.0 if right else 0.0, "judge_b": 0.0}
        make_run(s, f"r{q}", question_id=q, dataroom=None, grades=grades)
    out = tmp_path / "out"
    assert report.main([str(s), "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    section = summary.split("## Beside accuracy", 1)[1].split("## Paired", 1)[0]
    assert "`citation_precision`: share of the distinct files cited" in section and "`evidence_doc_recall`" not in section
    assert "| 4 | 0.500 | 1.000 | 1.000 | 3.500 | 0.400 | 0.400 | 4 |" in section  # confidence 0.9 at accuracy 0.5: 0.4 off
    agree = summary.split("## Judge agreement", 1)[1]
    assert "| correct | judge_a | 4 | 1.000 | 1.000 |" in agree
    assert "| judge_a | judge_b | 4 | 0.500 | 0.000 | rnw01, rnw03 |" in agree
    assert (out / "reliability.png").stat().st_size > 1000
