"""`python -m searchbox.report` after a question's gold was fixed (issue 29 part 4): run folders are regraded and the
sweep's tables rewritten before anything is drawn; a result of tables alone, or a run graded by a judge the report has
not got, is refused in one line naming the run and the question."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from searchbox.analysis import report
from searchbox.errors import SearchboxError
from searchbox.grading import grade, load_questions
from searchbox.record.collect import collect, write
from searchbox.record.record import read_meta, update_grades
from tests.fakes.runs import QUESTIONS, make_run

ROOT = Path(__file__).resolve().parents[2]


def _qfile(tmp_path, **changes) -> Path:
    lines = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()][:2]
    lines[0].update(changes)
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in lines))
    return path


def _sweep(tmp_path) -> Path:
    """Two graded runs (nw01 and nw02, both right) and their tables."""
    qfile = _qfile(tmp_path)
    s = tmp_path / "s"
    for q in load_questions(qfile):
        answer = {"nw01": "38.4 metres", "nw02": "41,200"}[q.id]
        rd = make_run(s, f"r-{q.id}", question_id=q.id, questions_path=qfile, answer=answer, dataroom=None)
        update_grades(rd, grade(rd, q))
    write(s, *collect([s]))
    return s


def test_report_regrades_a_changed_gold_before_drawing(tmp_path, capsys):
    s = _sweep(tmp_path)
    assert pd.read_parquet(s / "runs.parquet").set_index("question_id")["correct"].to_dict() == {"nw01": 1.0, "nw02": 1.0}
    _qfile(tmp_path, answer="41.0 metres", aliases=[])
    report.build([s], tmp_path / "out")
    runs = pd.read_parquet(s / "runs.parquet").set_index("question_id")
    assert runs["correct"].to_dict() == {"nw01": 0.0, "nw02": 1.0} and runs.loc["nw01", "graded_gold"] == "41.0 metres"
    assert read_meta(s / "runs" / "r-nw01")["grades"]["correct"] == 0.0
    assert "regraded 1 run(s)" in capsys.readouterr().err
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| 0.500 |" in summary  # the mean of the new grades (0 and 1), not the old 1.000


def test_a_result_of_tables_alone_is_refused_in_one_line(tmp_path):
    s = _sweep(tmp_path)
    result = tmp_path / "result"
    result.mkdir()
    for name in ("runs", "turns", "tool_calls"):
        shutil.copy(s / f"{name}.parquet", result / f"{name}.parquet")
    report.build([result], tmp_path / "before")  # the gold as graded: drawn
    _qfile(tmp_path, answer="41.0 metres", aliases=[])
    with pytest.raises(SearchboxError) as exc:
        report.build([result], tmp_path / "out")
    line = str(exc.value)
    assert "\n" not in line and "r-nw01" in line and "question nw01" in line and "searchbox.grade tables" in line
    proc = subprocess.run([sys.executable, "-m", "searchbox.report", str(result), "--out", str(tmp_path / "cli")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode != 0 and "r-nw01" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    from searchbox.grading.tables import Golds, regrade_table

    regrade_table(result, Golds())  # the fix the line names: the answer grades regraded against the new gold
    report.build([result], tmp_path / "after")
    assert pd.read_parquet(result / "runs.parquet").set_index("question_id")["correct"].to_dict() == {"nw01": 0.0, "nw02": 1.0}


def test_a_judged_run_is_not_regraded_without_its_judge(tmp_path):
    s = _sweep(tmp_path)
    rd = s / "runs" / "r-nw01"
    update_grades(rd, {**read_meta(rd)["grades"], "judge": 1.0, "judge_model": "judge-7b"})
    _qfile(tmp_path, answer="41.0 metres")
    with pytest.raises(SearchboxError) as exc:
        report.build([s], tmp_path / "out")
    line = str(exc.value)
    assert "\n" not in line and str(rd) in line and "question nw01" in line and "judge" in line
    assert read_meta(rd)["grades"]["judge"] == 1.0  # left as it was


def test_a_run_without_its_question_file_is_reported_as_graded(tmp_path):
    s = _sweep(tmp_path)
    (tmp_path / "q.jsonl").unlink()
    report.build([s], tmp_path / "out")
    assert pd.read_parquet(s / "runs.parquet")["correct"].tolist() == [1.0, 1.0]
