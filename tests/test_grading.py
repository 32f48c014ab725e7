"""Grading: normalisation, F1, aliases, retrieval hit, and the cached, versioned LLM judge."""

from __future__ import annotations

import math

import pytest

from searchbox.config import ModelConfig
from searchbox.grading import JUDGE_PROMPT_VERSION, Judge, Question, contains, exact_match, load_questions, normalize, retrieval_hit, token_f1
from searchbox.llm import ChatClient
from tests.fakes.scripted_server import ScriptedServer


def test_normalize():
    assert normalize("The  Answer, is: 41,200!") == "answer is 41200"
    assert normalize("38.4 metres.") == "38.4 metres"
    assert normalize("An apple") == "apple"


def test_exact_match_and_aliases():
    assert exact_match("the 41,200", ["41200"]) == 1.0
    assert exact_match("about 41,200", ["41200"]) == 0.0
    assert exact_match("Little Vell", ["Little Vell, 1856", "Little Vell"]) == 1.0
    assert math.isnan(exact_match("x", []))


def test_token_f1():
    assert token_f1("Tobias Wren", ["Tobias Wren"]) == 1.0
    assert token_f1("Wren", ["Tobias Wren"]) == pytest.approx(2 / 3)
    assert token_f1("nothing here", ["Tobias Wren"]) == 0.0
    assert token_f1("tobias", ["Tobias Wren", "Tobias"]) == 1.0


def test_contains():
    assert contains("It is 38.4 metres tall (reports/gannet-rock-survey.md).", ["38.4 metres"]) == 1.0
    assert contains("It is 138.4 metres", ["38.4"]) == 0.0  # whole tokens only
    assert contains("two of them", ["2", "two"]) == 1.0
    assert contains("", ["x"]) == 0.0


def test_retrieval_hit():
    assert retrieval_hit(["dataroom/reports/a.md", "notes.txt"], ["reports/a.md"]) == 1.0
    assert retrieval_hit(["dataroom/jina-corpus/ReaderLM-v2.md"], ["ReaderLM-v2.md"]) == 1.0
    assert retrieval_hit(["dataroom/other.md"], ["a.md"]) == 0.0
    assert math.isnan(retrieval_hit(["x"], []))


def test_load_questions(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"id": 1, "question": "q1", "answer": "a"}\n\n{"id": "2", "question": "q2"}\n')
    qs = load_questions(p)
    assert [q.id for q in qs] == ["1", "2"] and qs[1].golds == []
    assert [q.id for q in load_questions(p, limit=1)] == ["1"]
    p.write_text('{"question": "no id"}\n')
    with pytest.raises(Exception, match="q.jsonl:1"):
        load_questions(p)


def test_judge_is_cached_and_versioned():
    q = Question("x", "How tall?", "38.4 metres", ["38.4 m"])
    with ScriptedServer([{"content": "CORRECT"}, {"content": "INCORRECT"}]) as srv:
        judge = Judge(ChatClient(ModelConfig(retries=0), srv.url), "judge-model")
        assert judge(q, "It is 38.4 m") == 1.0
        assert judge(q, "It is 38.4 m") == 1.0  # cached: no second request
        assert len(srv.requests) == 1
        assert judge(q, "It is 40 m") == 0.0
        assert len(srv.requests) == 2
        assert "38.4 metres" in srv.requests[0]["messages"][0]["content"]
    assert JUDGE_PROMPT_VERSION.startswith("judge-v")


def test_judge_unavailable_is_missing_not_zero():
    judge = Judge(ChatClient(ModelConfig(retries=0), "http://127.0.0.1:9"), "dead")
    assert math.isnan(judge(Question("x", "q", "a"), "some answer"))
