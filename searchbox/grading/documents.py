"""Document recall: which of a question's documents reached the agent, gold and evidence documents kept apart.

gold_doc_recall = gold files a distinctive span of which (20-40 characters found in no other dataroom file or path)
appeared in a tool output from the dataroom / gold files that have such a span; evidence_doc_recall is the same over
evidence_files. Both use evidence.py's rules of origin (the agent's own notes, arguments and the question never
count), so they say the agent saw the document, where evidence_recall says it saw the answer-bearing passage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from . import evidence


def of_run(run_dir: Path, gold_files: Iterable[str], evidence_files: Iterable[str], golds: Iterable[str] = ()) -> dict:
    golds = list(golds)
    gold = evidence.of_run(run_dir, gold_files, golds) if gold_files else None
    ev = evidence.of_run(run_dir, evidence_files, golds) if evidence_files else None
    return {"gold_doc_recall": gold.content_recall if gold else None,
            "evidence_doc_recall": ev.content_recall if ev else None}
