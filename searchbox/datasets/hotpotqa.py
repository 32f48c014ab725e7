"""HotpotQA (distractor and fullwiki): a JSON array of {_id, question, answer, type, level, supporting_facts: [[title,
sent_id]], context: [[title, [sentences]]]}. Each context paragraph is one document (one file per title; a title seen
again with other sentences becomes a second document). Gold files: the supporting facts' paragraphs; evidence: their
sentences. In fullwiki the context is what a retriever found, so a supporting paragraph can be missing: that question
is dropped."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .source import records
from .writer import Output

VARIANTS = ("distractor", "fullwiki")


def run(source: Path, out: Output, variant: str = "distractor") -> dict:
    texts: dict[str, str] = {}  # document id -> a hash of its sentences (to tell a title's variants apart)
    for rec in records(Path(source)):
        qid = rec.text("_id")
        question = rec.text("question", "_id")
        answer = rec.text("answer", "_id", required=False)
        paragraphs: dict[str, tuple[str, list[str]]] = {}  # title -> (file, sentences)
        for i, item in enumerate(rec.items("context", "_id")):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)
                    and all(isinstance(s, str) for s in item[1])):
                raise rec.fail(f"context[{i}]", "must be [title, [sentences]]", "_id")
            title, sentences = item
            digest = hashlib.sha1("\x00".join(sentences).encode()).hexdigest()[:8]
            doc_id = title if texts.setdefault(title, digest) == digest else f"{title} ({digest})"
            texts.setdefault(doc_id, digest)
            paragraphs[title] = (out.document(doc_id, "".join(sentences).strip(), title), sentences)
        gold, evidence, missing = [], [], False
        for i, fact in enumerate(rec.items("supporting_facts", "_id")):
            if not (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str) and isinstance(fact[1], int)):
                raise rec.fail(f"supporting_facts[{i}]", "must be [title, sentence index]", "_id")
            if fact[0] not in paragraphs:
                missing = True
                continue
            name, sentences = paragraphs[fact[0]]
            gold.append(name)
            if 0 <= fact[1] < len(sentences) and sentences[fact[1]].strip():
                evidence.append({"file": name, "text": sentences[fact[1]].strip()})
            else:
                out.dropped.add("supporting fact whose sentence index is out of range (fact dropped, question kept)", qid)
        if missing:
            out.dropped.add("question whose supporting paragraph is not in its context", qid)
            continue
        if not answer:
            out.dropped.add("question without an answer (a test split)", qid)
            continue
        out.question(qid, question, answer, gold_files=gold, evidence=evidence, type=f"{rec.data.get('type') or 'hotpotqa'}")
    out.notes.append(f"variant: {variant}; one shared dataroom holds every question's context paragraphs")
    return {"variant": variant}
