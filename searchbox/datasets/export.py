"""`datasets export beir DIR --out OUT`: a searchbox dataroom and question set written back out as BEIR.

corpus.jsonl: {_id, title, text} per dataroom file (the front matter's id and title when an import wrote them, else
the path and no title; text without the front matter); queries.jsonl: {_id, text, metadata: {answer, aliases}};
qrels/test.tsv: (query-id, corpus-id, 1) per gold file.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..grading import load_questions
from .check import dataroom_files
from .source import DatasetError


def front_matter(text: str) -> tuple[dict, str]:
    """(id/title fields, body) of a file an import wrote; ({}, text) for any other file."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}, text
    head = {}
    for line in text[4:end].splitlines():
        key, _, value = line.partition(": ")
        try:
            head[key] = json.loads(value)
        except ValueError:
            head[key] = value
    body = text[end + 5:].lstrip("\n")
    title = head.get("title")
    if title and body.startswith(f"# {title}\n"):
        body = body[len(title) + 3:].lstrip("\n")
    return head, body


def beir(src: Path, out: Path, dataroom: Path | None = None, questions: Path | None = None) -> dict:
    src, out = Path(src), Path(out)
    room = Path(dataroom or src / "dataroom")
    qfile = Path(questions or src / "questions.jsonl")
    if not room.is_dir():
        raise DatasetError(f"{room}: no dataroom folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    ids: dict[str, str] = {}
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for rel in sorted(dataroom_files(room)):
            head, body = front_matter((room / rel).read_text(encoding="utf-8", errors="replace"))
            ids[rel] = str(head.get("id") or rel)
            fh.write(json.dumps({"_id": ids[rel], "title": str(head.get("title") or ""), "text": body}, ensure_ascii=False) + "\n")
    qs = load_questions(qfile)
    by_name = {rel.rsplit("/", 1)[-1]: rel for rel in ids}
    pairs = 0
    with open(out / "queries.jsonl", "w", encoding="utf-8") as qh, open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as rh:
        rh.write("query-id\tcorpus-id\tscore\n")
        for q in qs:
            qh.write(json.dumps({"_id": q.id, "text": q.question, "metadata": {"answer": q.answer, "aliases": q.aliases}}, ensure_ascii=False) + "\n")
            for g in q.gold_files:
                rel = g if g in ids else by_name.get(g)
                if rel is None:
                    raise DatasetError(f"{qfile}: question {q.id!r}: gold file {g!r} is not in {room}")
                rh.write(f"{q.id}\t{ids[rel]}\t1\n")
                pairs += 1
    return {"documents": len(ids), "queries": len(qs), "qrels": pairs}
