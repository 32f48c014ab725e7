"""Control policies end to end through run.execute: same harness, tools, logs and grading, no LLM, zero tokens."""

from __future__ import annotations

import json

import pytest

from searchbox.config import RunConfig
from searchbox.model.controls import Reader, best_sentence, entity_terms, make_control, probe_terms, scoring_stems
from searchbox.errors import ConfigError
from searchbox.grading import contains, load_questions
from searchbox.questions.build import builtin_questions
from searchbox.record.record import Gold
from searchbox.run.runner import RunInfo, execute
from tests.conftest import tables, trace

TINY_Q = "How tall is the Gannet Rock lighthouse?"
TINY_GOLD = Gold(answer="38.4 metres", aliases=["38.4 m", "38.4"], gold_files=["reports/gannet-rock-survey.md"], type="factoid")
SKERROW_Q = "What did the Skerrow Point restoration cost?"
SKERROW_GOLD = Gold(answer="412,000 pounds", gold_files=["reports/annual-report-2023.md"])
JINA = builtin_questions().with_name("jina-corpus.zip")


def control_cfg(policy: str, tools="none", **harness) -> RunConfig:
    cfg = RunConfig(tools=tools)
    cfg.model.name, cfg.model.policy = f"control-{policy}", policy
    cfg.harness.today = "2026-01-01"
    for k, v in harness.items():
        setattr(cfg.harness, k, v)
    return cfg


def run_control(tmp_path, policy, tools="none", question=TINY_Q, gold=TINY_GOLD, dataroom=None, name="run", **harness):
    run_dir = tmp_path / name
    meta = execute(control_cfg(policy, tools, **harness), question, dataroom, run_dir, None, info=RunInfo(gold=gold))
    return meta, run_dir


def answer_of(run_dir) -> str:
    return (run_dir / "work" / "ANSWER.md").read_text() if (run_dir / "work" / "ANSWER.md").exists() else ""


def test_keyword_control_greps_reads_and_answers(tmp_path):
    meta, run_dir = run_control(tmp_path, "keyword", question=SKERROW_Q, gold=SKERROW_GOLD)
    assert meta["stop_reason"] == "budget_spent"
    assert meta["tokens"]["total"] == meta["tokens"]["prompt"] == meta["tokens"]["completion"] == 0
    assert meta["served"]["model_id"] == "control-keyword"
    _, calls = tables(run_dir)
    tools = calls["tool"].tolist()
    assert tools[0] == "grep" and "read" in tools and tools[-1] == "write"
    assert json.loads(calls["arguments"].iloc[0])["pattern"] == "Skerrow Point"  # the rarest-looking term first
    reads = [json.loads(a)["path"] for t, a in zip(calls["tool"], calls["arguments"]) if t == "read"]
    assert reads == ["dataroom/reports/annual-report-2023.md"]
    assert "412,000 pounds" in answer_of(run_dir)
    assert meta["answer_source"] == "model"  # it wrote ANSWER.md itself, through the write tool


def test_dense_control_uses_search_dataroom(tmp_path):
    meta, run_dir = run_control(tmp_path, "dense", tools="vector_only")
    _, calls = tables(run_dir)
    assert calls["tool"].tolist()[0] == "search_dataroom" and "grep" not in calls["tool"].tolist()
    assert json.loads(calls["arguments"].iloc[0])["query"] == TINY_Q
    assert "38.4" in answer_of(run_dir)
    assert meta["tokens"]["total"] == 0


def test_a_fixed_search_k_offers_no_k_and_returns_that_many(tmp_path):
    """retrieval.search_k (BrowseComp-Plus's fixed top 5, issue 30.4): search_dataroom's schema offers no k and says the
    count, every call returns that many results, the dense control sends no k, and the key moves (the default's holds)."""
    from searchbox.record.spec import RunSpec
    from searchbox.tools import offered

    cfg = control_cfg("dense", "vector_only")
    cfg.retrieval.retriever = "bm25"
    spec = {s.name: s for s in offered(cfg)}["search_dataroom"]
    assert "k" in spec.parameters["properties"]
    cfg.retrieval.search_k = 3
    spec = {s.name: s for s in offered(cfg)}["search_dataroom"]
    assert "k" not in spec.parameters["properties"] and "Returns the 3 best chunks" in spec.description
    run_dir = tmp_path / "fixed"
    meta = execute(cfg, TINY_Q, None, run_dir, None, info=RunInfo(gold=TINY_GOLD))
    _, calls = tables(run_dir)
    first = calls[calls["tool"] == "search_dataroom"].iloc[0]
    assert "k" not in json.loads(first["arguments"]) and first["ok"]
    results = [e for e in trace(run_dir) if (e.get("message") or {}).get("role") == "tool"][0]["message"]["data"]["results"]
    assert len(results) == 3
    assert answer_of(run_dir) and meta["stop_reason"] == "budget_spent"
    keyed = RunSpec.from_dict(json.loads((run_dir / "key.json").read_text()))
    assert keyed.config["retrieval"]["search_k"] == 3
    with pytest.raises(ConfigError, match="retrieval.search_k"):
        cfg.retrieval.search_k = 0
        cfg.validate()


def test_oracle_control_reads_only_gold_files(tmp_path):
    meta, run_dir = run_control(tmp_path, "oracle", tools="grep_only")
    _, calls = tables(run_dir)
    reads = [json.loads(a)["path"] for t, a in zip(calls["tool"], calls["arguments"]) if t == "read"]
    assert reads == ["dataroom/reports/gannet-rock-survey.md"]
    assert "38.4" in answer_of(run_dir)


def test_missing_tool_degrades_with_a_reason(tmp_path):
    meta, run_dir = run_control(tmp_path, "dense", tools="grep_only")
    assert meta["stop_reason"] == "budget_spent" and not meta["answer_present"]
    _, calls = tables(run_dir)
    assert calls.empty
    finals = [e["message"] for e in trace(run_dir) if e.get("kind", e.get("type")) == "message"
              and e["message"]["role"] == "assistant"]
    assert "search_dataroom" in finals[-1].get("reasoning_content", "")


def test_delivery_file_and_json_protocol(tmp_path):
    """Results delivered to files are opened with read, to the same answer; the constrained-JSON protocol too."""
    _, inline = run_control(tmp_path, "keyword", question=SKERROW_Q, gold=SKERROW_GOLD, name="inline")
    meta, run_dir = run_control(tmp_path, "keyword", question=SKERROW_Q, gold=SKERROW_GOLD, delivery="file", name="file")
    _, calls = tables(run_dir)
    assert any(json.loads(a).get("path", "").startswith("results/") for t, a in zip(calls["tool"], calls["arguments"]) if t == "read")
    assert "412,000 pounds" in answer_of(run_dir) and answer_of(run_dir) == answer_of(inline)
    cfg = control_cfg("keyword")
    cfg.model.protocol = "json"
    meta = execute(cfg, SKERROW_Q, None, tmp_path / "json", None, info=RunInfo(gold=SKERROW_GOLD))
    assert meta["protocol"] == "json" and answer_of(tmp_path / "json") == answer_of(inline)


def test_a_delivered_search_longer_than_the_output_cap_is_read_whole(tmp_path):
    """delivery=file, a search result longer than what one tool output shows: the file is laid out in lines that `read`
    pages through (one JSON line showed a reader only its start, and the dense control answered nothing), so the
    dense control answers as it does inline, and every line of the file fits one read."""
    _, inline = run_control(tmp_path, "dense", tools="vector_only", output_cap_chars=700, name="inline")
    meta, run_dir = run_control(tmp_path, "dense", tools="vector_only", output_cap_chars=700, delivery="file", name="file")
    delivered = run_dir / "work" / "results" / "1-search_dataroom.txt"
    text = delivered.read_text()
    assert len(text) > 700 and max(len(line) for line in text.splitlines()) < 700
    assert json.loads(text)["results"]  # the same result, laid out
    assert "38.4" in answer_of(run_dir) and answer_of(run_dir) == answer_of(inline)


def test_budget_forcing_keeps_the_answer(tmp_path):
    meta, run_dir = run_control(tmp_path, "keyword", question=SKERROW_Q, gold=SKERROW_GOLD, budget=3)
    assert meta["turns"] == 3 and meta["stop_reason"] == "budget_spent"
    assert "412,000 pounds" in answer_of(run_dir)


def test_unknown_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="model.policy='psychic'"):
        make_control("psychic", RunConfig().model, TINY_Q, [])


def test_reader_pieces():
    q = 'On what date was the article "SEO is Dead, Long Live LLMO" published?'
    assert entity_terms(q) == ["SEO is Dead, Long Live LLMO"]
    assert probe_terms(q)[0] == "SEO is Dead, Long Live LLMO"
    assert "publish" in scoring_stems(q) and "articl" not in scoring_stems(q)
    doc = '---\ntitle: "SEO is Dead, Long Live LLMO"\npublished_at: 2022-12-15T16:55:30.000+01:00\n---\n# SEO is Dead\nLong text.\n'
    assert best_sentence(q, [doc]) == "2022-12-15"


@pytest.mark.e2e
def test_oracle_bounds_keyword_on_the_shipped_corpus(tmp_path):
    """On the packaged corpus the oracle (gold retrieval + the shared reader) answers nearly everything, multi-hop included,
    and grep-the-rarest-terms never beats it."""
    questions = [q for q in load_questions(builtin_questions()) if q.type == "multi-hop"][:6] + \
                [q for q in load_questions(builtin_questions()) if q.type == "single-hop"][:6]
    scores = {"keyword": [], "oracle": []}
    for policy in scores:
        for q in questions:
            gold = Gold(answer=q.answer, aliases=q.aliases, gold_files=q.gold_files, type=q.type)
            meta, run_dir = run_control(tmp_path, policy, question=q.question, gold=gold, dataroom=JINA, name=f"{policy}-{q.id}")
            assert meta["tokens"]["total"] == 0
            scores[policy].append(contains(answer_of(run_dir), q.golds))
    assert sum(scores["oracle"]) >= sum(scores["keyword"]), scores
    assert sum(scores["oracle"][:6]) >= 5 and sum(scores["oracle"][6:]) >= 5, scores  # multi-hop through both documents too


# ---- the shared reader ------------------------------------------------------------------------------
POST = """---
title: "Search PDFs: Part 3"
slug: search-pdfs-part-3
published_at: 2022-11-01T21:28:37.000+01:00
authors: "Alex C-G"
tags: "Tech Blog"
---

# Search PDFs: Part 3

Before reading this, check the prior posts:

<figure class="kg-card kg-bookmark-card">
<div class="kg-bookmark-title">Search PDFs: Part 1</div>
<div class="kg-bookmark-metadata"><span class="kg-bookmark-author">Han Xiao</span><span class="kg-bookmark-publisher">Jina AI</span></div>
</figure>

The <a href="https://x/y">parser</a> was written by the [community](https://example.org) in 2021.
"""
CARD = """---
model_name: "model-v1"
license: "CC-BY-NC-4.0"
parameter_size: "137M"
token_length: 8K
output_dimension: 768
release_date: "2024-02-14"
deprecated_by:
  - model-v2
tags:
  - license
  - multilingual
---
# model-v1

model-v1 is an embedding model. It has 161 million parameters.
"""
SUCCESSOR = """---
model_name: "model-v2"
license: "Apache-2.0"
parameter_size: "570M"
release_date: "2024-09-18"
---
# model-v2

The license of model-v2 is permissive.
"""


def test_the_reader_prefers_the_field_that_answers_over_markup_and_tags():
    assert best_sentence('Who is the author of the article "Search PDFs: Part 3"?', [POST]) == "Alex C-G"  # not the bookmark's author
    assert best_sentence('On what date was the article "Search PDFs: Part 3" published?', [POST]) == "2022-11-01"
    assert best_sentence("What license is the model model-v1 distributed under?", [CARD]) == "CC-BY-NC-4.0"  # not "- license"
    assert best_sentence("What is the maximum input length, in tokens, of model-v1?", [CARD]) == "8K"
    assert best_sentence("What is the dimension of the embeddings that model-v1 outputs?", [CARD]) == "768"
    assert Reader("Who wrote the parser?").sentence([]) == ""  # nothing read: no answer
    sentence = best_sentence("Who wrote the parser?", [POST.split("---", 2)[2]])  # no front matter: prose, markup stripped
    assert sentence == "The parser was written by the community in 2021."


def test_multi_hop_is_answered_through_both_documents():
    q = "The model model-v1 has been superseded. What is the parameter count of the model that superseded it?"
    reader = Reader(q)
    assert reader.link == "deprecated_by" and reader.bridge(CARD) == "model-v2"
    assert best_sentence(q, [CARD, SUCCESSOR]) == "570M"  # from the successor, not model-v1's own 137M
    assert best_sentence(q, [SUCCESSOR, CARD]) == "570M"
    assert best_sentence(q, [CARD]) == ""  # the linked document was not read: no answer rather than the wrong one
    assert "supersed" not in " ".join(probe_terms(q)).lower()
    announced = 'The article "Meet model-v2" announces a model. What license is that model distributed under?'
    post = '---\ntitle: "Meet model-v2"\nslug: meet-model-v2\n---\nToday we release `model-v2`. model-v2 beats model-v1.\n\nTry model-v2 now.\n'
    assert Reader(announced).bridge(post) == "model-v2" and best_sentence(announced, [post, SUCCESSOR, CARD]) == "Apache-2.0"
    single = 'On what date was the article "Announcing model-v2" published?'
    assert Reader(single).link is None  # a title's words ask through no link


def _reworded(monkeypatch):
    """Every tool the controls use renders its text another way; their data stays as it is."""
    from searchbox.tools import builtins, retrieval_tools

    monkeypatch.setattr(builtins, "render_read", lambda path, rows, more, nxt, size, read, total:
                        [f"line {n} says: {t}" for n, t in rows] + ([f"({more} lines more from {nxt})"] if more > 0 else []) or ["(nothing)"])
    monkeypatch.setattr(builtins, "render_grep", lambda matches, truncated:
                        [f"{t}  <- {p} line {n}" for p, n, t in matches] + ([truncated] if truncated else []) or ["none"])
    monkeypatch.setattr(retrieval_tools, "render_results", lambda out:
                        "\n".join(f"hit {i}: {h['path']} ({h['score']:.2f})\n{h['text']}" for i, h in enumerate(out["results"], 1)))


def test_rewording_a_tools_text_moves_no_control(tmp_path, monkeypatch):
    questions = load_questions(builtin_questions().with_name("questions.jsonl"))
    runs = (("keyword", "grep_only"), ("dense", "vector_only"), ("oracle", "grep_only"))

    def answers(tag):
        out = {}
        for policy, tools in runs:
            for q in questions:
                gold = Gold(answer=q.answer, aliases=q.aliases, gold_files=q.gold_files, type=q.type)
                _, run_dir = run_control(tmp_path, policy, tools, question=q.question, gold=gold, name=f"{tag}-{policy}-{q.id}")
                out[(policy, q.id)] = answer_of(run_dir)
        return out, run_dir

    plain, plain_dir = answers("plain")
    _reworded(monkeypatch)
    reworded, reworded_dir = answers("reworded")
    assert reworded == plain
    assert sum(bool(a) for a in plain.values()) >= 12  # the controls answered: the comparison is not of empty answers
    seen = [json.loads(line)["message"]["content"] for line in (reworded_dir / "trace.jsonl").read_text().splitlines()
            if json.loads(line).get("message", {}).get("role") == "tool"]
    assert any("line 1 says:" in text for text in seen)  # the model would have read the reworded text
