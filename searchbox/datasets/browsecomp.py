"""BrowseComp-Plus (Tevatron/browsecomp-plus): a corpus of {docid, text, url} and decrypted queries of
{query_id, query, answer, evidence_docs, gold_docs, negative_docs}, each *_docs a list of {docid, text, url} (or docids).

The two document sets stay apart: `gold_files` are the gold documents (those holding the answer), `evidence_files`
the evidence documents (all that are needed to reach it). A query document missing from the corpus is written from
the text the query carries; without text the question is dropped.
"""

from __future__ import annotations

from pathlib import Path

from .source import DatasetError, Record, records
from .writer import Output

CORPUS = ("corpus.jsonl", "corpus.parquet", "corpus.json")
QUERIES = ("queries.jsonl", "browsecomp_plus_decrypted.jsonl", "queries.parquet", "queries.json")


def _find(source: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (source / name).is_file():
            return source / name
    raise DatasetError(f"{source}: no {what} file (looked for {', '.join(names)})")


def _title(text: str, url: str) -> str:
    """The corpus has no title field: the first line of a document that starts with `title: ...` or a heading, else the URL."""
    for line in text.splitlines()[:5]:
        line = line.strip().lstrip("#").strip()
        if line.lower().startswith("title:"):
            return line[6:].strip()[:200]
    return url[:200]


def _docs(rec: Record, name: str, out: Output) -> list[str] | None:
    """The file names of a query's document list (None when one cannot be had)."""
    files = []
    for i, doc in enumerate(rec.items(name, "query_id", required=False)):
        if isinstance(doc, (str, int)):
            doc_id, text, url = str(doc), None, ""
        elif isinstance(doc, dict) and doc.get("docid") not in (None, ""):
            doc_id, text, url = str(doc["docid"]), doc.get("text"), str(doc.get("url") or "")
        else:
            raise rec.fail(f"{name}[{i}]", "must be a docid or an object with 'docid'", "query_id")
        if doc_id not in out.names:
            if not isinstance(text, str) or not text.strip():
                out.dropped.add(f"question whose {name} document is in neither the corpus nor the query", f"{rec.data.get('query_id')}:{doc_id}")
                return None
            out.document(doc_id, text, _title(text, url), url=url)
        files.append(out.names[doc_id])
    return files


def run(source: Path, out: Output) -> dict:
    source = Path(source)
    corpus = _find(source, CORPUS, "corpus")
    queries = _find(source, QUERIES, "queries")
    for rec in records(corpus):
        doc_id = rec.text("docid")
        text = rec.text("text", "docid")
        url = rec.text("url", "docid", required=False)
        out.document(doc_id, text, _title(text, url), url=url)
    from_corpus = len(out.names)
    for rec in records(queries):
        qid = rec.text("query_id")
        question = rec.text("query", "query_id")
        answer = rec.text("answer", "query_id")
        evidence = _docs(rec, "evidence_docs", out)  # first: a gold document given by docid alone may be an evidence one
        gold = _docs(rec, "gold_docs", out) if evidence is not None else None
        if gold is None or evidence is None:
            continue
        if not gold and not evidence:
            out.dropped.add("question with neither gold_docs nor evidence_docs", qid)
            continue
        out.question(qid, question, answer, gold_files=gold or evidence, evidence_files=evidence, type="browsecomp-plus")
    out.notes.append("gold_files are the gold documents (the evidence documents when a query lists no gold); evidence_files the evidence documents")
    return {"documents from the corpus": from_corpus, "documents written from a query's own text": len(out.names) - from_corpus}
