"""Control policies end to end through run.execute: same harness, tools, logs and grading, no LLM, zero tokens."""

from __future__ import annotations

import json

import pytest

from searchbox.config import RunConfig
from searchbox.controls import best_sentence, entity_terms, make_control, probe_terms, scoring_stems
from searchbox.errors import ConfigError
from searchbox.grading import contains, load_questions
from searchbox.questions import builtin_questions
from searchbox.record import Gold
from searchbox.run import RunInfo, execute
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
def test_oracle_beats_keyword_on_the_shipped_corpus(tmp_path):
    """On the packaged corpus the reader's upper bound scores above grep-the-rarest-terms (the figures show it)."""
    questions = [q for q in load_questions(builtin_questions()) if q.type == "multi-hop"][:6] + \
                [q for q in load_questions(builtin_questions()) if q.type == "single-hop"][:6]
    scores = {"keyword": [], "oracle": []}
    for policy in scores:
        for q in questions:
            gold = Gold(answer=q.answer, aliases=q.aliases, gold_files=q.gold_files, type=q.type)
            meta, run_dir = run_control(tmp_path, policy, question=q.question, gold=gold, dataroom=JINA, name=f"{policy}-{q.id}")
            assert meta["tokens"]["total"] == 0
            scores[policy].append(contains(answer_of(run_dir), q.golds))
    assert sum(scores["oracle"]) > sum(scores["keyword"]), scores
    assert sum(scores["oracle"][6:]) >= 4  # single-hop: reading the right file mostly suffices; multi-hop stays hard
