"""The main job shows something on the first try: ./main.sh sweeps the embedded model beside the controls, and its
report puts them side by side (a scripted server stands in for SmolLM2, the tiny dataroom for the packaged corpus)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from searchbox.analysis import report
from tests.fakes.scripted_server import ScriptedServer
from tests.sweep.test_sweep import _sweep

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"smollm2-135m", "control-keyword", "control-dense", "control-oracle"}


def test_main_sh_runs_the_main_experiment():
    script = (ROOT / "main.sh").read_text()
    assert re.search(r"python -m searchbox\.sweep -m \+experiment=main\b", script)
    proc = subprocess.run([sys.executable, "-m", "searchbox.sweep", "+experiment=main", "--cfg", "hydra"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "model: smollm2,control-keyword,control-dense,control-oracle" in proc.stdout and "tools: none,high" in proc.stdout


def test_the_main_job_reports_the_model_beside_the_controls(tmp_path):
    with ScriptedServer([]) as srv:  # the stand-in model answers "done" and calls nothing: zeros, like SmolLM2's
        proc = _sweep(["+experiment=main", "questions.limit=2"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=1200)
    assert proc.returncode == 0, out[-3000:]
    runs = pd.read_parquet(tmp_path / "main" / "runs.parquet")
    assert len(runs) == 32 and set(runs["model"]) == MODELS
    assert (runs.groupby("model")["served_model_id"].first()["smollm2-135m"]) == "scripted-model"
    # n/a stays missing outside the report too (issue 31.5): control-dense under tools=none had nothing to call
    inert = runs[(runs["model"] == "control-dense") & (runs["tools"] == "none")]
    assert len(inert) == 4 and inert["correct"].isna().all() and inert["evidence_recall"].isna().all()
    assert inert["cannot_act"].str.startswith("control-dense needs search_dataroom").all()
    assert runs.loc[runs["model"] == "control-oracle", "correct"].notna().all()
    from searchbox.web.sweeps import sweep_detail  # the web's table: null cells (shown n/a), so its means leave them out
    web = tmp_path / "web" / "sweeps" / "main"
    web.mkdir(parents=True)
    (web / "runs.parquet").write_bytes((tmp_path / "main" / "runs.parquet").read_bytes())  # as a committed result's table
    rows = [r for r in sweep_detail(tmp_path / "web", "main")["rows"] if r["model"] == "control-dense" and r["tools"] == "none"]
    assert len(rows) == 4 and all(r["correct"] is None and r["cannot_act"] for r in rows)
    dest = tmp_path / "report"
    assert report.main([str(tmp_path / "main"), "--out", str(dest)]) == 0
    summary = (dest / "summary.md").read_text()
    accuracy = summary.split("## Accuracy (correct) per condition\n\n")[1].split("\n\n")[0]
    oracle = [line for line in accuracy.splitlines() if "| control-oracle |" in line]
    assert len(oracle) == 4 and all(float(line.split("|")[6]) > 0 for line in oracle)  # mean: something beside the model's 0
    dense_none = [line for line in accuracy.splitlines() if line.startswith("| none | 1 | control-dense") or
                  line.startswith("| none | 2 | control-dense")]
    assert len(dense_none) == 2 and all("| n/a |" in line for line in dense_none)  # no search to call: no result, not a 0
    assert (dest / "accuracy_vs_budget.png").exists() and "![accuracy_vs_budget](accuracy_vs_budget.png)" in summary
    assert "Conditions (every design column that varies): tools, budget, model." in summary
