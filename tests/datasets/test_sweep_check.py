"""A sweep whose question file names a gold file its dataroom lacks fails before any run, in a line naming the file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]


def test_sweep_refuses_a_gold_file_missing_from_the_dataroom(tmp_path):
    room = tmp_path / "room"
    room.mkdir()
    (room / "a.md").write_text("The answer is 42.\n")
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"id": "q1", "question": "What is it?", "answer": "42", "gold_files": ["a.md"]}) + "\n"
                     + json.dumps({"id": "q2", "question": "And this?", "answer": "7", "gold_files": ["typo.md"]}) + "\n")
    cmd = [*SWEEP, f"dataroom.path={room}", f"questions.path={qfile}", f"sweep.root={tmp_path / 's'}", "harness.today=2026-01-01"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "LLAMA_URL": "http://127.0.0.1:9", "HYDRA_FULL_ERROR": "1"},
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "question 'q2' names 'typo.md', which is not in the dataroom" in out
    runs = tmp_path / "s" / "default" / "runs"
    assert not runs.exists() or not list(runs.iterdir())


def test_sweep_with_confidence_and_two_judges_through_hydra(tmp_path):
    import pandas as pd

    from tests.fakes.judge_server import JudgeServer
    from tests.fakes.scripted_server import ScriptedServer

    reply = {"content": "38.4 metres\n\nSources: reports/gannet-rock-survey.md\nConfidence: 90%"}
    with ScriptedServer([reply]) as srv, JudgeServer(["judge-a"]) as a, JudgeServer(["judge-b"], reply="INCORRECT") as b:
        judges = f'grading.judges=[{{name: a, endpoint: "{a.url}"}}, {{name: b, endpoint: "{b.url}"}}]'
        cmd = [*SWEEP, "tools=none", "budget=1", "questions.limit=1", "grading.confidence=true", judges,
               f"sweep.root={tmp_path}", "harness.today=2026-01-01", "model.retries=0"]
        proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "LLAMA_URL": srv.url, "HYDRA_FULL_ERROR": "1"},
                              capture_output=True, text=True, timeout=600)
        system = srv.requests[0]["messages"][0]["content"] if srv.requests else ""
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "Confidence: NN%" in system
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    row = runs.iloc[0]
    assert row["confidence"] == 0.9 and row["judge_a"] == 1.0 and row["judge_b"] == 0.0 and row["judge_a_model"] == "judge-a"
    assert row["citation_recall"] == 1.0 and row["search_calls"] == 0
