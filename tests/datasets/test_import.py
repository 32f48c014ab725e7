"""The importers on fixtures written to each format's published schema, their malformed variants, export and check."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox.datasets.cli import do_check, do_import, main
from searchbox.datasets.check import require
from searchbox.datasets.export import beir as export_beir, front_matter
from searchbox.datasets.source import DatasetError, records
from searchbox.datasets.writer import file_name
from searchbox.errors import ConfigError
from searchbox.grading import load_questions

FIX = Path(__file__).parent / "fixtures"


def imported(tmp_path, fmt, src, **kw):
    out = tmp_path / fmt
    summary = do_import(fmt, src, out, **kw)
    return out, summary, {q.id: q for q in load_questions(out / "questions.jsonl")}


def test_beir_gold_from_qrels_and_drops_named(tmp_path):
    out, summary, qs = imported(tmp_path, "beir", FIX / "beir")
    assert summary["documents"] == 3 and set(qs) == {"q1", "q2"}
    assert qs["q1"].gold_files == [file_name("d1", "Aspirin")]
    assert qs["q2"].gold_files == [file_name("d2", "Ibuprofen")]  # score 0 is not relevant; dX is not in the corpus
    card = (out / "DATASET.md").read_text()
    assert "qrels pair naming a document not in corpus.jsonl (e.g. q2->dX)" in card and "q3" in card
    assert do_check(out) == []


def test_files_carry_id_and_title_and_safe_names(tmp_path):
    out, _, _ = imported(tmp_path, "beir", FIX / "beir")
    text = (out / "dataroom" / file_name("d1", "Aspirin")).read_text()
    head, body = front_matter(text)
    assert head == {"id": "d1", "title": "Aspirin"} and body.startswith("Aspirin was first")
    assert file_name("a/../b c\u00e9", "") == file_name("a/../b c\u00e9", "")
    assert "/" not in file_name("../../etc/passwd") and file_name("x") != file_name("y")


def test_browsecomp_keeps_gold_and_evidence_apart(tmp_path):
    out, summary, qs = imported(tmp_path, "browsecomp-plus", FIX / "browsecomp-plus")
    q = qs["769"]
    assert q.answer == "Ana Ruiz"
    assert q.gold_files == [file_name("102", "https://example.org/portside")]
    assert q.evidence_files == [file_name("101", "Harbor Lights"), file_name("102", "https://example.org/portside")]
    assert qs["770"].gold_files == [file_name("104", "https://example.org/hl")]  # written from the query's own text
    assert summary["documents written from a query's own text"] == 1 and do_check(out) == []


def test_hotpotqa_distractor_supporting_sentences(tmp_path):
    out, summary, qs = imported(tmp_path, "hotpotqa", FIX / "hotpotqa_distractor.json")
    q = qs["5a8b57f25542995d1e6f1371"]
    assert q.gold_files == [file_name("Scott Derrickson", "Scott Derrickson"), file_name("Ed Wood", "Ed Wood")]
    assert {"file": file_name("Ed Wood", "Ed Wood"), "text": "Edward Davis Wood Jr. was an American filmmaker."} in q.evidence
    assert summary["dropped"] == {"supporting fact whose sentence index is out of range (fact dropped, question kept)": 1}
    assert q.type == "comparison" and summary["documents"] == 4  # Doctor Strange's two texts are two documents


def test_hotpotqa_fullwiki_drops_question_without_its_paragraph(tmp_path):
    _, summary, qs = imported(tmp_path, "hotpotqa", FIX / "hotpotqa_fullwiki.json", variant="fullwiki")
    assert list(qs) == ["5a8c7595554299585d9e36b6"] and summary["variant"] == "fullwiki"


def test_musique(tmp_path):
    out, summary, qs = imported(tmp_path, "musique", FIX / "musique.jsonl")
    q = qs["2hop__13548_13529"]
    assert q.aliases == ["16 July 1966"] and q.type == "2hop" and len(q.gold_files) == 2 and len(q.evidence) == 2
    assert "unanswerable question (answerable=false)" in summary["dropped"] and summary["documents"] == 4


def test_longmemeval_one_file_per_session(tmp_path):
    out, summary, qs = imported(tmp_path, "longmemeval", FIX / "longmemeval_s.json")
    assert summary["documents"] == 2  # the shared session is written once
    q = qs["e47becba"]
    assert q.gold_files == [file_name("answer_280352e9", "session answer_280352e9 (2023/05/20 (Sat) 02:21)")]
    assert q.evidence[0]["text"] == "I graduated with a degree in Business Administration."
    assert qs["e47becba_abs"].type == "single-session-user-abs" and qs["e47becba_abs"].gold_files == []
    assert "2023/05/30" in q.question


@pytest.mark.parametrize("fmt,name,content,needle", [
    ("musique", "m.jsonl", '{"id": "a", "question": "q", "paragraphs": "nope"}\n', "m.jsonl:1: record \"a\": field 'paragraphs' must be a list"),
    ("musique", "m.jsonl", '{"id": "a", "question": "q", "paragraphs": []}\n{not json\n', "m.jsonl:2: not JSON"),
    ("hotpotqa", "h.json", '[{"_id": "x", "question": "q", "context": [["t", "not a list"]], "supporting_facts": []}]', "h.json[0]: record \"x\": field 'context[0]'"),
    ("hotpotqa", "h.json", '[{"_id": "x", "question": "q", "context": [], "supporting_facts": []}, {"_id": ', "h.json[1]: not JSON"),
    ("longmemeval", "l.json", '[{"question_id": "z", "question": "q", "answer": "a", "haystack_session_ids": ["s"], "haystack_sessions": []}]', "field 'haystack_sessions' has 0 sessions for 1"),
    ("longmemeval", "l.json", '[{"question_id": "z", "answer": "a"}]', "l.json[0]: record \"z\": field 'question' is missing"),
])
def test_malformed_records_are_named_in_one_line(tmp_path, fmt, name, content, needle, capsys):
    src = tmp_path / name
    src.write_text(content)
    assert main(["import", fmt, str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # a half import leaves nothing behind


def test_malformed_beir_and_browsecomp(tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(FIX / "beir", b)
    (b / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    assert main(["import", "beir", str(b), "--out", str(tmp_path / "o1")]) == 2
    assert "test.tsv:2: field 'score' must be a number" in capsys.readouterr().err
    c = tmp_path / "c"
    shutil.copytree(FIX / "browsecomp-plus", c)
    (c / "queries.jsonl").write_text(json.dumps({"query_id": "1", "query": "q", "answer": "a", "gold_docs": [{"url": "u"}]}) + "\n")
    assert main(["import", "browsecomp-plus", str(c), "--out", str(tmp_path / "o2")]) == 2
    assert "record \"1\": field 'gold_docs[0]' must be a docid" in capsys.readouterr().err


def test_json_array_streams_in_small_chunks(tmp_path, monkeypatch):
    import searchbox.datasets.source as source

    monkeypatch.setattr(source, "CHUNK", 7)  # every element spans several reads
    items = [{"_id": str(i), "text": "x" * i} for i in range(50)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(items, indent=2))
    assert [r.data for r in records(path)] == items


def test_export_beir_round_trips(tmp_path):
    out, _, qs = imported(tmp_path, "beir", FIX / "beir")
    summary = export_beir(out, tmp_path / "exported")
    assert summary == {"documents": 3, "queries": 2, "qrels": 2}
    again, _, qs2 = imported(tmp_path / "2", "beir", tmp_path / "exported")
    assert {q: v.gold_files for q, v in qs.items()} == {q: v.gold_files for q, v in qs2.items()}


def test_check_names_the_missing_gold_file(tmp_path):
    out, _, qs = imported(tmp_path, "musique", FIX / "musique.jsonl")
    victim = qs["2hop__13548_13529"].gold_files[0]
    (out / "dataroom" / victim).unlink()
    assert do_check(out) == [("2hop__13548_13529", victim), ("2hop__13548_13529", victim)][:1]
    with pytest.raises(ConfigError, match=f"question '2hop__13548_13529' names '{victim}'"):
        require(load_questions(out / "questions.jsonl"), out / "dataroom")
    r = subprocess.run([sys.executable, "-m", "searchbox.datasets", "check", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and victim in r.stderr


def test_output_folder_must_be_new(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("keep")
    with pytest.raises(DatasetError, match="not empty"):
        do_import("beir", FIX / "beir", tmp_path / "o")
    assert (tmp_path / "o" / "x").read_text() == "keep"
