"""What each measure counts, in one sentence: the one text that summary.md (analysis/report.py and analysis/metrics.py),
`python -m searchbox.grade check` and the docs that quote a measure (docs/datasets.md) define it with.

A sentence says what is counted, never how; the module in WHERE holds the full definition (grading/evidence.py opens
with evidence_recall's sentence: tests/grading/test_measures.py holds the two, and the docs, to one text). Two measures
that count different things never share one: `evidence_recall` counts answer-bearing passages, `gold_content_seen` any
distinctive text of a gold file (summary.md once described the first with the second's words).
"""

from __future__ import annotations

MEASURES: dict[str, str] = {
    "correct": "the answer line asserts the gold and nothing contradicting it",
    "contains": "the gold occurs somewhere in the answer part, whatever else it says (lenient)",
    "exact_match": "the answer line is exactly a gold, normalised",
    "f1": "token F1 of the answer line against the best gold",
    "judge": "an LLM judge's verdict on the answer part",
    "evidence_recall": "share of a question's gold files whose answer-bearing passage reached the agent in a tool output",
    "gold_content_seen": ("share of a question's gold files with a distinctive span of any of their text in a tool output from the "
                          "dataroom: the agent saw the right document, not necessarily the answer"),
    "citation_precision": "share of the distinct files cited in the answer's Sources part that are gold or evidence files",
    "citation_recall": "share of the gold and evidence files that the Sources part cites",
    "gold_doc_recall": "share of the gold files whose distinctive content reached the agent in a tool output from the dataroom",
    "evidence_doc_recall": "the same over the evidence files, kept apart from the gold files",
    "search_calls": "calls that searched the dataroom, grep and each bash search program included",
}

WHERE: dict[str, str] = {
    "correct": "grading/correct.py", "contains": "grading/normalize.py", "exact_match": "grading/normalize.py", "f1": "grading/normalize.py",
    "judge": "grading/judge.py", "evidence_recall": "grading/evidence.py", "gold_content_seen": "grading/evidence.py",
    "citation_precision": "grading/citations.py", "citation_recall": "grading/citations.py", "gold_doc_recall": "grading/documents.py",
    "evidence_doc_recall": "grading/documents.py", "search_calls": "grading/searches.py",
}


def sentence(name: str) -> str:
    """The measure's sentence standing alone: capitalised, with its full stop."""
    text = MEASURES[name]
    return f"{text[0].upper()}{text[1:]}."
