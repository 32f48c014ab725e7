"""The metrics beside accuracy, each on cases built to fool it: citations, stated confidence, search calls, document recall."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from searchbox.grading import Question, grade
from searchbox.grading.calibration import stated_confidence
from searchbox.grading.citations import citations, measure
from searchbox.grading.searches import count, of_run

FILES = {"docs/alpha.md", "docs/beta.md", "other/beta.md", "notes/gamma.txt"}


def test_citations_read_only_the_sources_part():
    md = "The answer is in docs/alpha.md and notes/gamma.txt.\n\nSources: docs/beta.md"
    assert citations(md) == ["docs/beta.md"]  # file names in the answer's own text cite nothing


def test_citation_precision_and_recall():
    md = "42\n\nSources:\n- [alpha](dataroom/docs/alpha.md)\n- /runs/x/work/dataroom/docs/alpha.md\n- made-up.md\n"
    c = measure(md, FILES, ["docs/alpha.md"], ["notes/gamma.txt"])
    g = c.grades()
    assert c.cited == ["docs/alpha.md", "made-up.md"]  # the same file cited twice counts once
    assert g["citation_precision"] == 0.5  # a file that does not exist is a wrong citation
    assert g["citation_recall"] == 0.5  # gamma (an evidence file) was not cited


def test_ambiguous_and_bare_words_are_not_matches():
    c = measure("x\nSources: beta.md, the dataroom, alpha", FILES, ["docs/beta.md"])
    assert c.cited == ["beta.md"]  # "the dataroom" and "alpha" name no path
    assert c.grades()["citation_precision"] == 0.0  # beta.md is two files: it names neither
    assert measure("x\nSources: alpha", FILES, ["docs/alpha.md"]).grades()["citation_recall"] == 0.0
    assert measure("x\nSources: gamma.txt", FILES, ["notes/gamma.txt"]).grades() | {} == {
        "citation_precision": 1.0, "citation_recall": 1.0, "citations": 1, "citations_version": "citations-1"}


def test_no_sources_no_gold():
    assert measure("just an answer docs/alpha.md", FILES, ["docs/alpha.md"]).grades()["citation_precision"] is None
    assert measure("x\nSources: docs/alpha.md", FILES, []).grades()["citation_recall"] is None


@pytest.mark.parametrize("md,value", [
    ("Paris\nConfidence: 85%", 0.85), ("Paris\n**Confidence:** 85 %", 0.85), ("Paris\nConfidence score: 0.3", 0.3),
    ("Paris\nConfidence = 70", 0.7), ("Paris\nConfidence: 150%", None), ("Paris\nI have some confidence: 90%", None),
    ("<think>Confidence: 99%</think>Paris", None), ("Paris\nConfidence: 20%\nConfidence: 60%", 0.6),
    ("Paris\nConfidence: high", None), ("Paris\nConfidence: 0%", 0.0), ("Paris\nConfidence: 100%", 1.0),
])
def test_stated_confidence(md, value):
    assert stated_confidence(md) == value


def test_search_calls_per_tool_grep_included():
    rows = [{"tool": "grep"}, {"tool": "read"}, {"tool": "bash", "programs": ["cat", "rg", "/usr/bin/grep"]},
            {"tool": "bash", "programs": ["echo"]}, {"tool": "search_dataroom"}, {"tool": "write"}, {"tool": "bash", "programs": None}]
    assert count(rows) == {"grep": 1, "bash:rg": 1, "bash:grep": 1, "search_dataroom": 1}


def test_grade_carries_the_new_metrics(tmp_path):
    room = tmp_path / "work" / "dataroom"
    room.mkdir(parents=True)
    (room / "a.md").write_text("The festival began in 1987 in the harbour town of Portside by the sea.\n")
    (room / "b.md").write_text("Portside's mayor in 1990 was Ana Ruiz, who served until the year 2001.\n")
    (room / "c.md").write_text("Boats are common.\n")
    (tmp_path / "work" / "ANSWER.md").write_text("Ana Ruiz\n\nSources: b.md, c.md\nConfidence: 80%\n")
    trace = [{"type": "message", "turn": 1, "message": {"role": "user", "content": "Who was mayor?"}},
             {"type": "message", "turn": 1, "message": {"role": "assistant", "content": "", "tool_calls": [
                 {"id": "1", "function": {"name": "read", "arguments": json.dumps({"path": "dataroom/b.md"})}}]}},
             {"type": "message", "turn": 1, "message": {"role": "tool", "tool_call_id": "1", "name": "read",
                                                         "content": "1\tPortside's mayor in 1990 was Ana Ruiz, who served until the year 2001."}}]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
    pq.write_table(pa.table({"tool": ["read", "bash"], "programs": [[], ["rg"]]}), tmp_path / "tool_calls.parquet")
    q = Question("q", "Who was mayor?", "Ana Ruiz", gold_files=["b.md"], evidence_files=["a.md", "b.md"])
    g = grade(tmp_path, q)
    assert g["citation_precision"] == 0.5 and g["citation_recall"] == 0.5  # c.md is not supporting; a.md not cited
    assert g["gold_doc_recall"] == 1.0 and g["evidence_doc_recall"] == 0.5  # a.md never reached the agent
    assert g["search_calls"] == 1 and json.loads(g["search_calls_by_tool"]) == {"bash:rg": 1}
    assert g["confidence"] == 0.8 and g["correct"] == 1.0  # the sources and confidence lines do not spoil the answer


def test_asking_for_confidence_moves_only_the_prompt_and_reads_back():
    from searchbox.config import HarnessConfig, RunConfig
    from searchbox.harness.agent import ASK_CONFIDENCE, system_prompt

    plain = system_prompt(HarnessConfig(today="2026-01-01"), "", ["read"])
    asked = system_prompt(HarnessConfig(today="2026-01-01", ask_confidence=True), "", ["read"])
    assert ASK_CONFIDENCE not in plain and asked == plain + ASK_CONFIDENCE  # the key sees it through prompt.system
    assert "ask_confidence" not in RunConfig().semantic()["harness"]  # so the config part of every default key is unchanged
    assert stated_confidence("Paris\n\nSources: a.md\nConfidence: 72%") == 0.72  # the line the prompt asks for
