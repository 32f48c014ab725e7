"""MuSiQue: jsonl of {id, question, answer, answer_aliases, answerable, paragraphs: [{idx, title, paragraph_text,
is_supporting}], question_decomposition: [{id, question, answer, paragraph_support_idx}]}. Each paragraph is one
document (its id: title and a hash of its text, since one title has several paragraphs). Gold files: the supporting
paragraphs; evidence: their text; type: the hop pattern of the id (2hop, 3hop1, ...). Unanswerable questions are dropped."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .source import records
from .writer import Output


def run(source: Path, out: Output) -> dict:
    hops = 0
    for rec in records(Path(source)):
        qid = rec.text("id")
        question = rec.text("question", "id")
        answer = rec.text("answer", "id", required=False)
        gold, evidence = [], []
        for i, p in enumerate(rec.items("paragraphs", "id")):
            if not isinstance(p, dict) or not isinstance(p.get("paragraph_text"), str):
                raise rec.fail(f"paragraphs[{i}].paragraph_text", "is missing or not a string", "id")
            title = str(p.get("title") or "")
            text = p["paragraph_text"]
            doc_id = f"{title}#{hashlib.sha1(text.encode()).hexdigest()[:8]}"
            name = out.document(doc_id, text, title)
            if p.get("is_supporting") is True:
                gold.append(name)
                evidence.append({"file": name, "text": text.strip()})
        hops += len(rec.items("question_decomposition", "id", required=False))
        if rec.data.get("answerable") is False:
            out.dropped.add("unanswerable question (answerable=false)", qid)
            continue
        if not answer:
            out.dropped.add("question without an answer", qid)
            continue
        if not gold:
            out.dropped.add("question without a supporting paragraph", qid)
            continue
        aliases = [str(a) for a in rec.items("answer_aliases", "id", required=False)]
        out.question(qid, question, answer, aliases=aliases, gold_files=gold, evidence=evidence, type=qid.split("__")[0] if "__" in qid else "musique")
    return {"decomposition steps": hops}
