"""The real sweep (Hydra multirun) over damaged run folders: a run whose record is empty or a link is not done, so the
relaunch redoes it and its table write succeeds; nothing of a host file reaches runs.parquet."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd

from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["model=control-keyword", "tools=none", "budget=1", "questions.limit=3", "harness.today=2026-01-01"]


def _launch(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SWEEP, *ARGS, f"sweep.root={root}"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_FULL_ERROR": "1"})


def test_a_relaunch_redoes_runs_whose_record_is_empty_or_a_link(tmp_path):
    first = _launch(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    sweep = tmp_path / "default"
    keys = sorted(p.name for p in (sweep / "runs").iterdir() if not p.name.startswith("."))
    assert len(keys) == 3
    empty, linked = sweep / "runs" / keys[0], sweep / "runs" / keys[1]
    (empty / "run_meta.json").write_text("")
    host = tmp_path / "host.json"
    host.write_text(json.dumps({**json.loads((linked / "run_meta.json").read_text()), "question": "HOST-SECRET"}))
    (linked / "run_meta.json").unlink()
    (linked / "run_meta.json").symlink_to(host)
    again = _launch(tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "UserWarning" not in again.stderr and "Traceback" not in again.stderr
    assert again.stderr.count("is damaged") == 2, again.stderr[-3000:]
    runs = pd.read_parquet(sweep / "runs.parquet")
    assert sorted(runs["run_id"]) == keys and "HOST-SECRET" not in runs.to_string()
    assert not (linked / "run_meta.json").is_symlink() and json.loads((empty / "run_meta.json").read_text())["run_id"] == keys[0]
