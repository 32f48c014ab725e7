"""Evidence spans: the builder names each question's answer-bearing passage (the front-matter line that states the fact,
verbatim), and the audit checks every span a question file carries: its file exists, its text stands in that file verbatim
(up to whitespace), and one of the question's spans holds the gold (the others are bridge passages)."""

from __future__ import annotations

import json

from searchbox.corpus.dataroom import corpus_texts
from searchbox.questions.audit import Corpus, audit, span_problems
from searchbox.questions.build import build_audited, load
from tests.questions.test_questions import small_corpus


def test_the_builder_writes_the_passage_that_states_the_fact(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    built, _ = build_audited(corpus, "t")
    texts = corpus_texts(corpus)
    assert built and all(q.evidence for q in built)
    for q in built:
        for span in q.evidence:
            assert span["file"] in q.gold_files and span["text"] in texts[span["file"]], (q, span)
    license_ = next(q for q in built if q.template == "card_license" and q.answer == "CC-BY-NC-4.0")
    assert license_.evidence == [{"file": "jx-two-1.5b.md", "text": 'license: "CC-BY-NC-4.0"'}]
    assert not span_problems(license_, Corpus.of(texts))


def test_the_audit_refuses_spans_that_are_not_in_their_file_or_hold_no_gold(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    base = {"id": "a", "question": "What license is the model jx-two-1.5b distributed under?", "answer": "CC-BY-NC-4.0",
            "gold_files": ["jx-two-1.5b.md"], "type": "single-hop"}
    rows = [{**base, "id": "ok", "evidence": [{"file": "jx-two-1.5b.md", "text": 'license:   "CC-BY-NC-4.0"'}]},
            {**base, "id": "gone", "evidence": [{"file": "nope.md", "text": "license"}]},
            {**base, "id": "invented", "evidence": [{"file": "jx-two-1.5b.md", "text": "license: MIT"}]},
            {**base, "id": "nogold", "evidence": [{"file": "jx-two-1.5b.md", "text": "The new model."}]}]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = {f.id: f.reasons for f in audit(load(path), Corpus.of(corpus_texts(corpus)))}
    assert "evidence_file_missing" not in found["ok"] and "evidence_not_in_file" not in found["ok"] and "evidence_without_gold" not in found["ok"]
    assert "evidence_file_missing" in found["gone"]
    assert "evidence_not_in_file" in found["invented"]
    assert "evidence_without_gold" in found["nogold"]


def test_a_worked_out_answer_needs_no_span_that_quotes_it(tmp_path):
    """HotpotQA's comparison questions answer "yes"/"no" (or one of two names) from two supporting facts, neither of
    which says the answer: their spans are the facts compared, and only a stated answer wants a span that holds it."""
    corpus = small_corpus(tmp_path / "corpus")
    span = [{"file": "jx-two-1.5b.md", "text": 'license: "CC-BY-NC-4.0"'}]
    base = {"question": "Is jx-two-1.5b distributed under a non-commercial license?", "gold_files": ["jx-two-1.5b.md"], "evidence": span}
    rows = [{**base, "id": "polar", "answer": "yes", "type": "multi-hop"},
            {**base, "id": "compared", "answer": "jx-two-1.5b", "type": "comparison"},
            {**base, "id": "stated", "answer": "Apache-2.0", "type": "single-hop"}]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = {f.id: f.reasons for f in audit(load(path), Corpus.of(corpus_texts(corpus)))}
    assert "evidence_without_gold" not in found["polar"] and "evidence_without_gold" not in found["compared"]
    assert "evidence_without_gold" in found["stated"]  # a stated answer still needs its span
