"""The scout evaluator: scoring by hand-computed numbers, the task format, refusals, and both policies end to end."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from searchbox.scout.__main__ import main
from searchbox.scout.evaluate import score
from searchbox.scout.tasks import Target, TaskError, load, verify
from tests.fakes.scout_repo import make_repo
from tests.fakes.scripted_server import ScriptedServer

T = [Target("calc.py", 9, 12, "0" * 64)]  # 4 target lines: 9, 10, 11, 12


def ref(path, a, b):
    return {"path": path, "start_line": a, "end_line": b, "sha256": ""}


def test_score_overlap_by_hand():
    s = score([ref("calc.py", 10, 14)], T)  # cited 10..14 (5 lines), 3 of them (10, 11, 12) are target lines
    assert s.file_hit and s.target_hit
    assert s.line_precision == pytest.approx(3 / 5) and s.line_recall == pytest.approx(3 / 4)


def test_score_same_file_no_overlap():
    s = score([ref("calc.py", 13, 14)], T)
    assert s.file_hit and not s.target_hit and s.line_precision == 0 and s.line_recall == 0


def test_score_wrong_file_and_nothing_cited():
    s = score([ref("notes.txt", 9, 12)], T)  # same lines, other file: no credit
    assert not s.file_hit and not s.target_hit and s.line_precision == 0 and s.line_recall == 0
    empty = score([], T)
    assert math.isnan(empty.line_precision) and empty.line_recall == 0 and not empty.file_hit


def test_score_union_of_references_and_targets():
    s = score([ref("calc.py", 9, 10), ref("calc.py", 12, 12), ref("calc.py", 10, 10)], T)  # cited {9, 10, 12}
    assert s.line_precision == 1 and s.line_recall == pytest.approx(3 / 4)
    two = score([ref("calc.py", 20, 21)], T + [Target("calc.py", 19, 21, "0" * 64)])  # targets: 4 + 3 lines
    assert two.target_hit and two.line_precision == 1 and two.line_recall == pytest.approx(2 / 7)


def test_task_file_validation(tmp_path):
    repos, path = make_repo(tmp_path)
    tasks = load(path)
    assert [t.id for t in tasks.tasks] == ["multiply", "push", "divide"]
    data = json.loads(path.read_text())
    data["tasks"][1]["targets"][0]["start_line"] = "nineteen"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError, match=r"tasks\[1\]\.targets\[0\]\.start_line: 'nineteen' is not of type 'integer'"):
        load(path)
    data["tasks"][1]["targets"][0].update(start_line=19, path="../escape.py")
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError, match="leaves its root"):
        load(path)


def test_hash_mismatch_refused(tmp_path, capsys):
    repos, path = make_repo(tmp_path)
    verify(load(path), repos)
    (repos / "tiny" / "calc.py").write_text("changed\n")
    code = main(["eval", str(path), "--repos", str(repos), "--policy", "keyword"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("searchbox: task multiply: tiny/calc.py does not match its label") and "wrong version" in err


def test_missing_checkout_refused(tmp_path, capsys):
    _, path = make_repo(tmp_path)
    code = main(["eval", str(path), "--repos", str(tmp_path / "nowhere"), "--policy", "keyword"])
    assert code == 2 and "not a directory" in capsys.readouterr().err


def _actions(*acts):
    return {"raw": json.dumps(list(acts))}


def test_eval_model_policy_scores_by_hand(tmp_path, capsys):
    repos, path = make_repo(tmp_path)
    script = [
        # multiply: read the file, cite lines 10-14 -> precision 3/5, recall 3/4
        _actions({"action": "read", "path": "calc.py", "start": 1, "end": 21}, {"action": "finish", "path": "calc.py", "start": 10, "end": 14}),
        # push: cites notes.txt -> no file hit
        _actions({"action": "read", "path": "notes.txt"}, {"action": "finish", "path": "notes.txt", "start": 1, "end": 2}),
        # divide: abstains
        _actions({"action": "grep", "pattern": "divide"}, {"action": "not_found"}),
    ]
    out = tmp_path / "out"
    with ScriptedServer(script, supports_tools=False) as srv:
        code = main(["eval", str(path), "--repos", str(repos), "--endpoint", srv.url, "--budget", "2", "--out", str(out)])
    assert code == 0
    rows = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    assert list(rows["status"]) == ["completed", "completed", "abstained"]
    assert rows.loc["multiply", "file_hit"] and rows.loc["multiply", "target_hit"]
    assert rows.loc["multiply", "line_precision"] == pytest.approx(0.6) and rows.loc["multiply", "line_recall"] == pytest.approx(0.75)
    assert not rows.loc["push", "file_hit"] and rows.loc["push", "line_recall"] == 0
    assert math.isnan(rows.loc["divide", "line_precision"]) and rows.loc["divide", "rounds"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 3 and summary["completed"] == 2 and summary["abstained"] == 1
    assert summary["file_hits"] == 1 and summary["target_hits"] == 1
    assert summary["mean_line_precision"] == pytest.approx(0.3)  # (0.6 + 0) / 2 tasks that cited something
    assert summary["mean_line_recall"] == pytest.approx(0.25)  # (0.75 + 0 + 0) / 3
    assert summary["total_tokens"] > 0
    md = (out / "summary.md").read_text()
    assert "| multiply | completed | 1 | yes | yes | 0.60 | 0.75 | calc.py:10-14 |" in md
    for task in ("multiply", "push", "divide"):
        assert (out / "runs" / task / "run_meta.json").exists() and (out / "runs" / task / "tool_calls.parquet").exists()
    assert "| multiply |" in capsys.readouterr().out


def test_eval_keyword_policy_drives_the_executor(tmp_path):
    repos, path = make_repo(tmp_path)
    out = tmp_path / "kw"
    assert main(["eval", str(path), "--repos", str(repos), "--policy", "keyword", "--out", str(out)]) == 0
    rows = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    assert rows.loc["multiply", "target_hit"] and rows.loc["multiply", "line_recall"] == 1.0
    assert rows.loc["push", "target_hit"] and (rows["total_tokens"] == 0).all() and (rows["model"] == "keyword").all()
    calls = pd.read_parquet(out / "runs" / "multiply" / "tool_calls.parquet")
    assert list(calls["tool"])[:1] == ["grep"] and "finish" in set(calls["tool"])


def test_hydra_multirun_sweeps_policy_and_budget(tmp_path):
    import subprocess
    import sys

    repos, path = make_repo(tmp_path)
    root = tmp_path / "sweeps"
    cmd = [sys.executable, "-m", "searchbox.scout.sweep", "-m", "policy=keyword", "budget=1,3", f"tasks={path}", f"repos={repos}",
           f"sweep.root={root}", "sweep.name=tiny"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sweep = root / "tiny"
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["keyword-b1", "keyword-b3"]
    rows = pd.read_parquet(sweep / "tasks.parquet")
    assert len(rows) == 6 and set(rows["job"]) == {"keyword-b1", "keyword-b3"} and set(rows["budget"]) == {1, 3}
    summaries = {s["job"]: s for s in json.loads((sweep / "summary.json").read_text())}
    assert summaries["keyword-b1"]["target_hits"] == 0  # one round only greps: nothing is read, so nothing can be cited
    assert summaries["keyword-b3"]["target_hits"] >= 2
    assert (sweep / "keyword-b3" / "runs" / "multiply" / "turns.parquet").exists()
    assert "| keyword | keyword | 3 | 3 |" in (sweep / "summary.md").read_text()
