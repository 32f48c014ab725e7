"""Run folders that are not trusted (issue 36 part 3): done means a record that parses and validates, no artifact is
read through a link, damaged runs are named in one line and left out, stale questions leave no row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from searchbox.record import done
from searchbox.record.collect import collect
from tests.fakes.runs import QUESTIONS, make_run

DEEP = "[" * 30_000 + "]" * 30_000


def damage(rd, how: str, host_file=None) -> None:
    meta = rd / "run_meta.json"
    if how == "empty":
        meta.write_text("")
    elif how == "garbage":
        meta.write_bytes(b"\x00\xffnot json{")
    elif how == "deep":
        meta.write_text(DEEP)
    elif how == "wrong-shape":
        meta.write_text(json.dumps({"run_id": "x", "tokens": "many", "turns": "three"}))
    elif how == "list":
        meta.write_text("[1, 2]")
    elif how == "link":
        meta.unlink()
        meta.symlink_to(host_file)
    elif how == "deep-table":
        t = pa.int32()
        for _ in range(200):
            t = pa.list_(t)
        pq.write_table(pa.table({"run_id": ["x"], "turn": pa.array([1], pa.int32()), "deep": pa.array([None], type=t)}), rd / "turns.parquet")
    elif how == "garbage-table":
        (rd / "turns.parquet").write_bytes(b"PAR1 not a table PAR1")
    elif how == "wrong-table":
        pq.write_table(pa.table({"run_id": ["x"], "turn": ["one"]}), rd / "turns.parquet")
    elif how == "link-table":
        (rd / "tool_calls.parquet").unlink()
        (rd / "tool_calls.parquet").symlink_to(host_file)
    else:
        raise AssertionError(how)


HOWS = ["empty", "garbage", "deep", "wrong-shape", "list", "link", "deep-table", "garbage-table", "wrong-table", "link-table"]


@pytest.mark.parametrize("how", HOWS)
def test_a_damaged_run_is_not_done_and_collect_names_it_in_one_line(tmp_path, how):
    s = tmp_path / "s"
    host = tmp_path / "host-secret.json"
    host.write_text(json.dumps(json.loads((make_run(tmp_path / "other", "h") / "run_meta.json").read_text()) | {"run_id": "HOST-SECRET"}))
    if how == "link-table":
        host = make_run(tmp_path / "other", "h2") / "tool_calls.parquet"
    make_run(s, "good")
    bad = make_run(s, "bad")
    damage(bad, how, host)
    assert done.is_done(s / "runs" / "good") and not done.is_done(bad)
    left_out: list[str] = []
    runs, turns, calls = collect([s], left_out)
    assert list(runs["run_id"]) == ["good"] and set(turns["run_id"]) == {"good"}
    assert "HOST-SECRET" not in runs.to_string()
    assert len(left_out) == 1 and str(bad) in left_out[0] and "\n" not in left_out[0]


@pytest.mark.parametrize("how", ["empty", "deep", "link", "deep-table"])
def test_the_collect_command_gives_one_line_not_a_traceback(tmp_path, how):
    s = tmp_path / "s"
    make_run(s, "good")
    host = tmp_path / "host.json"
    host.write_text('{"run_id": "HOST-SECRET", "question": "q"}')
    damage(make_run(s, "bad"), how, host)
    proc = subprocess.run([sys.executable, "-m", "searchbox.collect", str(s)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1 and "bad" in proc.stderr
    assert "1 runs" in proc.stdout
    assert "HOST-SECRET" not in pq.read_table(s / "runs.parquet").to_pandas().to_string()


def test_a_run_folder_that_is_a_link_is_not_read(tmp_path):
    s = tmp_path / "s"
    make_run(s, "good")
    elsewhere = make_run(tmp_path / "elsewhere", "other")
    (s / "runs" / "linked").symlink_to(elsewhere, target_is_directory=True)
    runs, _, _ = collect([s])
    assert list(runs["run_id"]) == ["good"] and not done.is_done(s / "runs" / "linked")


def test_a_done_marker_that_is_a_link_does_not_make_a_run_done(tmp_path):
    rd = make_run(tmp_path / "s", "r", done=False)
    (rd / "DONE").symlink_to(tmp_path / "s" / "runs")
    assert not done.is_done(rd) and collect([tmp_path / "s"])[0].empty


def test_a_question_reworded_or_removed_leaves_no_stale_row(tmp_path):
    qfile = tmp_path / "q.jsonl"
    lines = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()][:3]
    qfile.write_text("".join(json.dumps(q) + "\n" for q in lines))
    s = tmp_path / "s"
    for q in lines:
        make_run(s, f"old-{q['id']}", question_id=q["id"], questions_path=qfile, gold=q)
    lines[0] = {**lines[0], "question": lines[0]["question"] + " (in metres)"}  # reworded: a new key, a new run
    make_run(s, f"new-{lines[0]['id']}", question_id=lines[0]["id"], questions_path=qfile, gold=lines[0])
    qfile.write_text("".join(json.dumps(q) + "\n" for q in lines[:2]))  # and the third removed from the file
    left_out: list[str] = []
    runs, turns, _ = collect([s], left_out)
    assert sorted(runs["question_id"]) == sorted(q["id"] for q in lines[:2])  # one row per current question
    assert runs["question_id"].is_unique and set(turns["run_id"]) == set(runs["run_id"])
    assert f"new-{lines[0]['id']}" in set(runs["run_id"])
    assert len(left_out) == 2 and any("reworded" in line for line in left_out) and any("removed" in line for line in left_out)


def test_a_run_whose_question_file_is_gone_is_kept(tmp_path):
    from tests.fakes.runs import builtin_gold

    make_run(tmp_path / "s", "r", questions_path=tmp_path / "gone.jsonl", gold=builtin_gold("nw01"))
    assert len(collect([tmp_path / "s"])[0]) == 1
