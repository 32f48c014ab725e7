"""A question whose gold changed in its file since a run was graded (issue 29 part 4): collect regrades the run
through its caller's hook, or leaves it out in one line naming the run and the question; never the old grade."""

from __future__ import annotations

import json

from searchbox.grading import grade, load_questions
from searchbox.grading.cli import stale_regrader
from searchbox.record.collect import collect, stale_grades
from searchbox.record.record import read_meta, update_grades
from searchbox.record.stale import QuestionTexts, gold_changed
from tests.fakes.runs import QUESTIONS, make_run


def _qfile(tmp_path, **changes):
    lines = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()][:2]
    lines[0].update(changes)
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in lines))
    return path


def _graded_run(tmp_path, qfile, answer="38.4 metres\n\nSources: reports/gannet-rock-survey.md"):
    rd = make_run(tmp_path / "s", "r1", questions_path=qfile, gold=json.loads(qfile.read_text().splitlines()[0]), answer=answer)
    update_grades(rd, grade(rd, load_questions(qfile, ids=["nw01"])[0]))
    return rd


def test_grades_record_the_gold_they_were_computed_against(tmp_path):
    qfile = _qfile(tmp_path)
    rd = _graded_run(tmp_path, qfile)
    grades = read_meta(rd)["grades"]
    assert grades["graded_gold"] == "38.4 metres | 38.4 m | 38.4" and len(grades["gold_hash"]) == 16
    assert grades["correct"] == 1.0 and collect([tmp_path / "s"])[0]["correct"].tolist() == [1.0]
    assert stale_grades([tmp_path / "s"]) == []  # the file's gold is the graded one: nothing to regrade


def test_a_changed_gold_is_regraded_through_the_hook(tmp_path):
    qfile = _qfile(tmp_path)
    rd = _graded_run(tmp_path, qfile)
    _qfile(tmp_path, answer="41.0 metres", aliases=["41 m"])  # the gold fixed by hand after the run was graded
    said: list[str] = []
    left: list[str] = []
    runs, _, _ = collect([tmp_path / "s"], left, regrade=stale_regrader(said=said))
    assert left == [] and runs["correct"].tolist() == [0.0] and runs["graded_gold"].tolist() == ["41.0 metres | 41 m"]
    assert read_meta(rd)["grades"]["correct"] == 0.0 and len(said) == 1 and "nw01" in said[0]  # written through update_grades
    assert stale_grades([tmp_path / "s"]) == []


def test_without_a_hook_the_stale_run_is_left_out_in_one_line(tmp_path):
    qfile = _qfile(tmp_path)
    rd = _graded_run(tmp_path, qfile)
    _qfile(tmp_path, answer="41.0 metres")
    left: list[str] = []
    runs, turns, _ = collect([tmp_path / "s"], left)
    assert runs.empty and turns.empty
    assert len(left) == 1 and "\n" not in left[0] and str(rd) in left[0] and "question nw01" in left[0]
    assert "python -m searchbox.grade" in left[0] and read_meta(rd)["grades"]["correct"] == 1.0  # nothing written
    assert [(p, why) for p, _, why in stale_grades([tmp_path / "s"])] == [(rd, left[0].split("(", 1)[1].split(";")[0])]


def test_any_gold_field_counts_and_other_questions_do_not(tmp_path):
    qfile = _qfile(tmp_path)
    _graded_run(tmp_path, qfile)
    for change in ({"aliases": ["38.4 m"]}, {"gold_files": ["reports/other.md"]},
                   {"evidence": [{"file": "reports/gannet-rock-survey.md", "text": "38.4 metres"}]}, {"evidence_files": ["a.md"]}):
        _qfile(tmp_path, **change)
        assert len(stale_grades([tmp_path / "s"])) == 1, change
    _qfile(tmp_path, type="numeric")  # not a gold: graders never read it
    assert stale_grades([tmp_path / "s"]) == []
    lines = qfile.read_text().splitlines()
    other = json.loads(lines[1])
    qfile.write_text(lines[0] + "\n" + json.dumps({**other, "answer": "1"}) + "\n")  # another question's gold
    assert stale_grades([tmp_path / "s"]) == []


def test_a_failed_regrade_leaves_the_run_out_with_why(tmp_path):
    from searchbox.errors import SearchboxError

    qfile = _qfile(tmp_path)
    rd = _graded_run(tmp_path, qfile)
    _qfile(tmp_path, answer="41.0 metres")

    def refuse(run_dir, meta):
        raise SearchboxError("no judge reachable")

    left: list[str] = []
    assert collect([tmp_path / "s"], left, regrade=refuse)[0].empty
    assert len(left) == 1 and str(rd) in left[0] and "nw01" in left[0] and "no judge reachable" in left[0]


def test_a_run_without_a_question_file_is_kept_as_is(tmp_path):
    qfile = _qfile(tmp_path)
    rd = _graded_run(tmp_path, qfile)
    qfile.unlink()
    calls = []
    runs, _, _ = collect([tmp_path / "s"], regrade=lambda *a: calls.append(a))
    assert runs["correct"].tolist() == [1.0] and calls == [] and read_meta(rd)["grades"]["correct"] == 1.0
    meta = read_meta(rd)
    meta.pop("questions_path")
    assert QuestionTexts().why_regrade(meta) is None


def test_old_grades_are_compared_by_graded_gold_and_an_explicit_file_wins():
    assert gold_changed({"graded_gold": "38.4 metres"}, "h", "41 metres")
    assert not gold_changed({"graded_gold": "38.4 metres"}, "h", "38.4 metres")
    assert not gold_changed({"contains": 1.0}, "h", "41 metres")  # graded before any gold was recorded: not judged
    assert gold_changed({"gold_hash": "a", "graded_gold": "x"}, "b", "x")  # the hash sees what graded_gold cannot
    assert not gold_changed({"gold_hash": "a", "gold_source": "questions"}, "b", "x")  # regraded against --questions
