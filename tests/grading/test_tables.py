"""`python -m searchbox.grade tables`: a committed result's answer grades redone from the answers its runs.parquet holds."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from searchbox.grading import GRADER_VERSION
from searchbox.grading.cli import main
from searchbox.grading.tables import answer_grader_version


def _result(tmp_path, qfile, rows):
    out = tmp_path / "result"
    out.mkdir()
    df = pd.DataFrame([{"run_id": f"r{i}", "question_id": qid, "question": q, "questions_path": str(qfile), "answer_text": ans,
                        "model": model, "correct": old, "contains": old, "exact_match": old, "f1": old, "correct_reason": "old",
                        "answer_part": "", "graded_answer": "", "graded_gold": "", "evidence_recall": 1.0,
                        "evidence_version": "evidence-5", "grader_version": "grader-3/correct-2/norm-4/part-2/evidence-5"}
                       for i, (qid, q, ans, model, old) in enumerate(rows)])
    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"searchbox_design": json.dumps(["model"]).encode()})
    pq.write_table(table, out / "runs.parquet")
    return out


def _questions(tmp_path, answer="York"):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "q1", "question": "Which city?", "answer": answer}) + "\n"
                 + json.dumps({"id": "q2", "question": "How tall?", "answer": "38.4 metres"}) + "\n")
    return q


def test_tables_regrade_answer_grades_and_keep_recorded_evidence(tmp_path, capsys):
    q = _questions(tmp_path)
    # the recorded grades are wrong on purpose: New York is not York (whole names), 38.4 metres is right
    out = _result(tmp_path, q, [("q1", "Which city?", "New York.", "a", 1.0), ("q2", "How tall?", "It is 38.4 metres.", "b", 0.0)])
    assert main(["tables", str(out)]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["correct"]) == [0.0, 1.0]
    assert list(runs["evidence_recall"]) == [1.0, 1.0]  # evidence cannot be redone from a table: kept as recorded
    assert set(runs["grader_version"]) == {answer_grader_version("evidence-5")}
    assert answer_grader_version("evidence-5") != GRADER_VERSION or GRADER_VERSION.endswith("evidence-5")
    assert runs["graded_gold"].iloc[0] == "York"
    text = capsys.readouterr().out
    assert "2 rows regraded" in text and "correct" in text and "model=a" in text


def test_tables_dry_run_writes_nothing_and_unknown_questions_are_left(tmp_path, capsys):
    q = _questions(tmp_path)
    out = _result(tmp_path, q, [("q1", "Which city?", "New York.", "a", 1.0), ("q9", "Reworded?", "x", "a", 1.0)])
    before = (out / "runs.parquet").read_bytes()
    assert main(["tables", str(out), "--dry-run"]) == 0
    assert (out / "runs.parquet").read_bytes() == before
    text = capsys.readouterr().out
    assert "1 rows regraded, 1 left as recorded" in text and "q9" in text


def test_tables_a_path_from_another_checkout_falls_back_to_the_packaged_file(tmp_path):
    from searchbox.grading import load_questions
    from searchbox.grading.tables import BUILTIN

    packaged = load_questions(BUILTIN / "questions.jsonl")[0]
    out = _result(tmp_path, tmp_path / "elsewhere" / "questions.jsonl",
                  [(packaged.id, packaged.question, f"{packaged.answer}.", "a", 0.0)])
    assert main(["tables", str(out)]) == 0
    assert pd.read_parquet(out / "runs.parquet")["correct"].iloc[0] == 1.0


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such result directory"),
    (lambda p: p.mkdir(), "no runs.parquet"),
])
def test_tables_bad_input_is_one_line(tmp_path, capsys, make, message):
    make(tmp_path / "r")
    assert main(["tables", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_row_that_could_not_act_becomes_missing_not_zero(tmp_path, capsys):
    """n/a stays missing in runs.parquet (issue 31.5): control-dense under a tier without search_dataroom answered
    nothing by construction; its 0s (answer and recorded evidence alike) become null, and cannot_act says why."""
    q = _questions(tmp_path)
    out = _result(tmp_path, q, [("q1", "Which city?", "", "control-dense", 0.0), ("q2", "How tall?", "38.4 metres", "control-dense", 0.0),
                                ("q1", "Which city?", "", "control-keyword", 0.0)])
    runs = pd.read_parquet(out / "runs.parquet")
    runs["served_policy"] = ["dense", "dense", "keyword"]
    runs["tools_enabled"] = ["grep,read", "grep,search_dataroom,read", "grep,read"]
    runs["answer_present"] = [False, True, False]
    runs["evidence_recall"] = 0.0
    runs["search_calls"] = [0, 2, 1]
    pq.write_table(pa.Table.from_pandas(runs, preserve_index=False), out / "runs.parquet")
    assert main(["tables", str(out)]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    inert = runs.iloc[0]
    for col in ("correct", "contains", "exact_match", "f1", "evidence_recall", "search_calls"):
        assert pd.isna(inert[col]), col
    assert inert["cannot_act"] == "control-dense needs search_dataroom, which this tool selection does not offer"
    assert inert["correct_reason"].startswith("n/a: control-dense needs")
    assert inert["grader_version"].startswith("grader-3/")  # text that says what graded it stays
    # the control with its tool, and the keyword control with grep, could act: their grades are numbers, 0 included
    assert runs.iloc[1]["correct"] == 1.0 and runs.iloc[2]["correct"] == 0.0 and runs.iloc[2]["search_calls"] == 1
    assert pd.isna(runs.iloc[1]["cannot_act"]) and runs["correct"].mean() == 0.5  # the mean leaves the n/a row out


def test_grades_of_a_run_that_could_not_act_are_missing():
    from searchbox.grading import not_a_result

    graded = {"correct": 0.0, "contains": 0.0, "evidence_recall": 0.0, "judge_a": 0.0, "search_calls": 0, "search_calls_by_tool": "{}",
              "judge_a_model": "smol", "grader_version": "g", "correct_reason": "no answer", "answer_part": "none"}
    out = not_a_result(graded, "control-oracle needs read, which this tool selection does not offer")
    assert {k for k, v in out.items() if v is None} == {"correct", "contains", "evidence_recall", "judge_a", "search_calls",
                                                        "search_calls_by_tool"}
    assert out["judge_a_model"] == "smol" and out["grader_version"] == "g" and out["cannot_act"].startswith("control-oracle")
