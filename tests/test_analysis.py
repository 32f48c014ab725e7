"""Analysis on synthetic parquet with known answers: CIs cover the truth, counts match, every figure is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from searchbox.analysis import FIGURES, accuracy_table, bootstrap_ci, load, search_style_table, tokens_per_turn, tool_usage

ROOT = Path(__file__).resolve().parents[1]
TRUE_RATE = {("high", 1): 0.3, ("high", 4): 0.8, ("none", 1): 0.2, ("none", 4): 0.5}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A synthetic sweep: 200 runs per grid point with known accuracy, two turns each, mixed tool calls."""
    rng = np.random.default_rng(7)
    runs, turns, calls = [], [], []
    n = 0
    for (tier, budget), p in TRUE_RATE.items():
        for i in range(200):
            rid = f"r{n}"
            n += 1
            runs.append({"run_id": rid, "tools": tier, "budget": budget, "budget_unit": "turns", "model": "synthetic",
                         "question_id": f"q{i % 20}", "question_type": "factoid" if i % 2 else "aggregate",
                         "contains": float(rng.random() < p), "retrieval_hit": float(i % 3 != 0), "exact_match": np.nan,
                         "turns": 2, "elapsed_s": 10.0, "llm_s": 7.0, "tool_s": 2.0, "stop_reason": "budget_spent",
                         "tokens_prompt": 300, "tokens_cached": 100, "tokens_completion": 40, "tokens_total": 340, "tool_calls": 2})
            for t in (1, 2):
                turns.append({"run_id": rid, "turn": t, "tools": tier, "prompt_tokens": 100 * t + 50, "cached_tokens": 50 * t,
                              "completion_tokens": 20, "context_tokens": 200})
            calls.append({"run_id": rid, "turn": 1, "step": 1, "tool": "bash", "programs": ["grep", "wc"], "tools": tier})
            calls.append({"run_id": rid, "turn": 1, "step": 2, "tool": "search_dataroom" if tier == "high" else "read", "programs": [], "tools": tier})
    d = tmp_path_factory.mktemp("sweep")
    pd.DataFrame(runs).to_parquet(d / "runs.parquet")
    pd.DataFrame(turns).to_parquet(d / "turns.parquet")
    pd.DataFrame(calls).to_parquet(d / "tool_calls.parquet")
    return d


def test_bootstrap_ci_covers_true_rate():
    rng = np.random.default_rng(1)
    covered = 0
    for trial in range(40):
        x = (rng.random(300) < 0.7).astype(float)
        mean, lo, hi = bootstrap_ci(x, seed=trial)
        assert lo <= mean <= hi
        covered += lo <= 0.7 <= hi
    assert covered >= 34  # ~95% coverage; 34/40 leaves room for chance
    assert np.isnan(bootstrap_ci([np.nan, None])[0])


def test_accuracy_table_counts_and_bounds(sweep):
    frames = load([sweep])
    table = accuracy_table(frames.runs, "contains", ("tools", "budget"))
    assert len(table) == 4 and set(table["n"]) == {200}
    for _, row in table.iterrows():
        assert row["ci_low"] <= TRUE_RATE[(row["tools"], row["budget"])] <= row["ci_high"]
        assert row["ci_high"] - row["ci_low"] < 0.2
    missing = accuracy_table(frames.runs, "exact_match")
    assert set(missing["n"]) == {0} and missing["mean"].isna().all()  # NaN grades are missing, not zero


def test_tool_usage_splits_bash(sweep):
    usage = tool_usage(load([sweep]).calls, "tools")
    high = usage[usage["tools"] == "high"].set_index("choice")["count"]
    assert high["bash:grep"] == 400 and high["bash:wc"] == 400 and high["search_dataroom"] == 400
    assert abs(usage.groupby("tools")["share"].sum() - 1).max() < 1e-9


def test_tokens_per_turn(sweep):
    tpt = tokens_per_turn(load([sweep]).turns, "tools")
    row = tpt[(tpt["tools"] == "none") & (tpt["turn"] == 2)].iloc[0]
    assert (row["uncached_prompt"], row["cached_prompt"], row["completion"]) == (150, 100, 20)


def test_search_style(sweep):
    table = search_style_table(load([sweep]))
    assert set(table["style"]) == {"grep", "grep+dense"}
    assert table["n"].sum() == 800


def test_report_writes_every_figure(sweep, tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "searchbox.report", str(sweep), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in FIGURES:
        for ext in ("png", "svg"):
            f = out / f"{name}.{ext}"
            assert f.exists() and f.stat().st_size > 1000, f
    summary = (out / "summary.md").read_text()
    assert "| high | 4 | 200 |" in summary and "accuracy_vs_budget.png" in summary


def test_report_on_missing_dir_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "searchbox.report", str(tmp_path / "nope"), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_notebooks_execute_on_committed_results():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    results = ROOT / "results" / "tools_x_budget" / "runs.parquet"
    assert results.exists(), "the committed result set is missing"
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(books) >= 5
    for path in books:
        nb = nbformat.read(path, as_version=4)
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
        images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        assert images, f"{path.name} drew no figure"
