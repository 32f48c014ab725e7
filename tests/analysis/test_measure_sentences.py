"""summary.md defines each measure by its one sentence (grading/measures.py; issue 29 part 4): evidence_recall by its
own, not by gold_content_seen's definition as it once did."""

from __future__ import annotations

from searchbox.analysis import report
from searchbox.grading.measures import MEASURES, sentence
from tests.fakes.runs import make_run

GRADES = {"correct": 1.0, "contains": 1.0, "exact_match": 0.0, "f1": 0.5, "evidence_recall": 1.0, "gold_content_seen": 1.0,
          "gold_doc_recall": 1.0, "citation_recall": 0.5, "grader_version": "test"}


def _section(text: str, heading: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return [line for line in lines[start:end] if line.strip()]


def test_a_drawn_summary_defines_each_measure_by_its_sentence(tmp_path):
    s = tmp_path / "s"
    for qid in ("nw01", "nw02"):
        for tools in ("high", "none"):
            make_run(s, f"{tools}-{qid}", question_id=qid, dataroom=None, grades=GRADES, axes={"tools": tools},
                     config={"tools": tools})
    report.build([s], tmp_path / "out")
    text = (tmp_path / "out" / "summary.md").read_text()
    evidence = _section(text, "## Evidence recall per condition")
    assert evidence[0] == sentence("evidence_recall")
    assert MEASURES["gold_content_seen"] not in text and "whose content reached the agent" not in text
    assert f"Headline grade: `correct`: {MEASURES['correct']}." in text
    assert _section(text, "### contains (lenient)")[0] == sentence("contains")
    assert _section(text, "### f1")[0] == sentence("f1")
    beside = _section(text, "## Beside accuracy")
    assert any(line.startswith(f"- `gold_doc_recall`: {MEASURES['gold_doc_recall']}") for line in beside)
