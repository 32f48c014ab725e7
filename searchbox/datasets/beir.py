"""BEIR: `corpus.jsonl` ({_id, title, text}), `queries.jsonl` ({_id, text}), `qrels/<split>.tsv` (query-id, corpus-id, score).

BEIR sets judge relevance and have no answers: a question's gold files are its documents with score > 0 in the
split's qrels, and its answer is empty (so only the retrieval metrics are defined for it).
"""

from __future__ import annotations

import csv
from pathlib import Path

from .source import DatasetError, records
from .writer import Output


def qrels(path: Path) -> dict[str, list[str]]:
    """query id -> relevant corpus ids (score > 0), in file order."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file (BEIR keeps relevance judgements in qrels/<split>.tsv)")
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or (n == 1 and row[0] == "query-id"):
                continue
            if len(row) < 3:
                raise DatasetError(f"{path.name}:{n}: a qrels line needs query-id, corpus-id and score (tab-separated)")
            try:
                score = float(row[2])
            except ValueError as exc:
                raise DatasetError(f"{path.name}:{n}: field 'score' must be a number, not {row[2]!r}") from exc
            if score > 0:
                out.setdefault(row[0], []).append(row[1])
    return out


def run(source: Path, out: Output, split: str = "test") -> dict:
    source = Path(source)
    judged = qrels(source / "qrels" / f"{split}.tsv")
    for rec in records(source / "corpus.jsonl"):
        doc_id = rec.text("_id")
        out.document(doc_id, rec.text("text", "_id"), rec.text("title", "_id", required=False))
    for rec in records(source / "queries.jsonl"):
        qid = rec.text("_id")
        text = rec.text("text", "_id")
        rel = judged.get(qid)
        if not rel:
            out.dropped.add(f"query without a relevant document in qrels/{split}.tsv", qid)
            continue
        known = [out.names[d] for d in rel if d in out.names]
        for d in rel:
            if d not in out.names:
                out.dropped.add("qrels pair naming a document not in corpus.jsonl", f"{qid}->{d}")
        if not known:
            out.dropped.add("query whose relevant documents are all missing from corpus.jsonl", qid)
            continue
        out.question(qid, text, gold_files=known, type=f"beir-{split}")
    out.notes.append(f"split: {split}; BEIR has no answers, so questions carry gold_files only (accuracy is undefined, retrieval metrics are not)")
    return {"split": split}
