"""Issue 37: limits.* given on the sweep's command line hold for the sweep's identity, its plan and its runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sweep(args: list[str], root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1", "PYTHONPATH": str(ROOT)}
    env.pop("LLAMA_URL", None)
    return subprocess.run([sys.executable, "-m", "searchbox.sweep", "-m", "model=control-keyword", "tools=none", "questions.limit=1",
                           *args, f"sweep.root={root}", "harness.today=2026-01-01"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_limit_override_refuses_in_one_line_naming_it(tmp_path):
    proc = _sweep(["limits.max_files=5"], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "searchbox: refused jina-corpus.zip: 207 files exceeds max_files=5 (raise it with limits.max_files=N)"
    assert "Traceback" not in proc.stderr and "plan: not available" not in proc.stderr


def test_a_limit_override_that_admits_the_corpus_runs_and_plans(tmp_path):
    proc = _sweep(["limits.max_files=207"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[sweep] plan: 1 grid point(s) x 1 question(s) = 1 run(s)" in proc.stderr and "plan: not available" not in proc.stderr
    runs = list(tmp_path.glob("default/runs/*/run_meta.json"))
    assert len(runs) == 1
    assert sum(p.stat().st_size for p in runs[0].parent.joinpath("work").rglob("*") if p.is_file()) < 100_000  # no corpus copy
