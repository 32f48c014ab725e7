"""The gold a run's grades record (issue 29 part 4): one hash from a raw question line and from its Question, any gold
field moves it, and the run key holds none of it."""

from __future__ import annotations

import json

from searchbox.grading import load_questions
from searchbox.record.stale import read_questions

LINE = {"id": 7, "question": "How tall?", "answer": 38.4, "aliases": [38, "38.4 m"], "gold_files": ["a.md"], "evidence_files": ["b.md"],
        "evidence": [{"file": "a.md", "text": "It is 38.4 m tall.", "note": "extra keys are not read"}], "type": "numeric"}


def test_a_raw_line_and_its_question_hash_alike(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(LINE) + "\n")
    q = load_questions(path)[0]
    asked = read_questions(path)["7"]
    assert asked.gold_hash == q.gold_hash and asked.golds == " | ".join(q.golds) == "38.4 | 38 | 38.4 m"


def test_every_gold_field_moves_the_hash(tmp_path):
    path = tmp_path / "q.jsonl"

    def hash_of(**change):
        path.write_text(json.dumps({**LINE, **change}) + "\n")
        return load_questions(path)[0].gold_hash

    base = hash_of()
    moved = [hash_of(answer="38.5"), hash_of(aliases=["38"]), hash_of(gold_files=["c.md"]), hash_of(evidence_files=[]),
             hash_of(evidence=[{"file": "a.md", "text": "38.4 m"}])]
    assert base not in moved and len(set(moved)) == len(moved)
    assert hash_of(type="factoid") == hash_of(question="How tall is it?") == base  # not what a grade is computed against


def test_the_run_key_holds_nothing_of_the_gold(tmp_path):
    from searchbox.config import RunConfig
    from searchbox.record.record import Served
    from searchbox.run.identity import run_key

    path = tmp_path / "q.jsonl"
    keys = set()
    for answer in ("38.4", "41"):
        path.write_text(json.dumps({**LINE, "answer": answer}) + "\n")
        q = load_questions(path)[0]
        keys.add(run_key(RunConfig(), q.id, q.question, "room", Served(model_id="m"), protocol="native", gold=q))
    assert len(keys) == 1
