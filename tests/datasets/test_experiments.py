"""+experiment=browsecomp_plus end to end on an imported fixture, with the controls (no model server needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from searchbox.datasets.cli import do_import

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"


def test_browsecomp_plus_experiment_on_an_imported_fixture(tmp_path):
    data = tmp_path / "bcp"
    do_import("browsecomp-plus", FIX / "browsecomp-plus", data)
    cmd = [sys.executable, "-m", "searchbox.sweep", "-m", "+experiment=browsecomp_plus", "model=control-oracle,control-keyword,control-dense",
           "retriever=bm25", f"dataroom.path={data / 'dataroom'}", f"questions.path={data / 'questions.jsonl'}", f"sweep.root={tmp_path / 's'}"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HYDRA_FULL_ERROR": "1"}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    runs = pd.read_parquet(tmp_path / "s" / "browsecomp_plus" / "runs.parquet")
    assert len(runs) == 6 and set(runs["retriever"]) == {"bm25"}
    assert set(runs["retrieval.search_k"]) == {5}  # every search returns 5 results, as the paper's retriever
    calls = pd.read_parquet(tmp_path / "s" / "browsecomp_plus" / "tool_calls.parquet")
    searches = calls[calls["tool"] == "search_dataroom"]
    assert len(searches) and not searches["arguments"].str.contains('"k"').any() and searches["ok"].all()
    for col in ("citation_precision", "citation_recall", "gold_doc_recall", "evidence_doc_recall", "search_calls", "confidence"):
        assert col in runs.columns, col
    oracle = runs[runs["model"] == "control-oracle"]
    assert oracle["evidence_doc_recall"].notna().all()


def test_grep_paper_experiment_on_an_imported_longmemeval_fixture(tmp_path):
    data = tmp_path / "lme"
    do_import("longmemeval", FIX / "longmemeval_s.json", data)
    cmd = [sys.executable, "-m", "searchbox.sweep", "-m", "+experiment=grep_paper", "model=control-keyword,control-oracle",
           "harness=native", "noise=0", "tools=grep_only", f"dataroom.path={data / 'dataroom'}", f"questions.path={data / 'questions.jsonl'}",
           f"sweep.root={tmp_path / 's'}"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HYDRA_FULL_ERROR": "1"}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    runs = pd.read_parquet(tmp_path / "s" / "grep_paper" / "runs.parquet")
    assert len(runs) == 8 and set(runs["delivery"]) == {"inline", "file"}  # 2 controls x 2 deliveries x 2 questions
    assert runs["search_calls"].notna().all()
