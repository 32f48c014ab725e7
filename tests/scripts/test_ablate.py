"""The reference design's commands: `python -m scripts.ablate` (one row per config, through the run machinery) and
`bash scripts/run.sh` (then `cat OUTDIR/ANSWER.md`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from searchbox import knobs
from searchbox.corpus.dataroom import builtin_dataroom
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
ENV = {k: v for k, v in os.environ.items() if k not in knobs.BY_ENV and k != "LLAMA_URL"}


def _ablate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scripts.ablate", *args], cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=600)


def test_the_default_matrix_runs_three_configs_and_grades_them(tmp_path):
    out = tmp_path / "abl"
    proc = _ablate("--query", "Who led the restoration of Skerrow Point lighthouse?", "--dataroom", str(builtin_dataroom()),
                   "--budget", "1", "--out", str(out), "--policy", "keyword", "--gold", "Tobias Wren", "--gold-file", "people/staff.md")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["name"] for r in rows] == ["high_level", "low_level", "no_tools"]
    keys = {r["name"]: json.loads((Path(r["run_dir"]) / "key.json").read_text()) for r in rows}
    assert [keys[n]["config"]["tools"] for n in ("high_level", "low_level", "no_tools")] == ["high", "low", "none"]
    assert len({r["run_id"] for r in rows}) == 3  # three configs, three keys
    for r in rows:
        assert r["stop_reason"] == "budget_spent" and r["turns"] == 1 and r["grades"]["grader_version"]
        assert r["grades"]["correct"] == 1.0 and "Tobias Wren" in r["answer"]  # the keyword control finds it under every tier


def test_a_matrix_file_and_its_errors(tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("grep_file:\n  tools: [grep, read]\n  harness: {delivery: file}\n")
    out = tmp_path / "abl"
    proc = _ablate("--query", "Who led the restoration of Skerrow Point lighthouse?", "--dataroom", str(builtin_dataroom()),
                   "--budget", "1", "--matrix", str(matrix), "--out", str(out), "--policy", "keyword")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    config = json.loads((Path(row["run_dir"]) / "key.json").read_text())["config"]
    assert config["tools"] == ["grep", "read"] and config["harness"]["delivery"] == "file" and row["grades"] is None
    for text, said in (("x: {harness: {budgett: 2}}\n", "budgett"), ("- {tools: high}\n", "name"), ("[unclosed\n", "not valid YAML"),
                       ("'../up': {tools: high}\n", "config name")):
        matrix.write_text(text)
        proc = _ablate("--query", "q?", "--dataroom", str(builtin_dataroom()), "--matrix", str(matrix), "--out", str(tmp_path / "bad"),
                       "--policy", "keyword")
        assert proc.returncode == 2 and said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not (tmp_path / "bad").exists()  # every config is checked before anything is written


def test_run_sh_leaves_the_answer_at_outdir(tmp_path):
    with ScriptedServer([{"content": "Tobias Wren\nSources: people/staff.md"}] * 2) as srv:
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "run.sh"), "Who led the restoration?", str(builtin_dataroom()), "1", str(tmp_path / "o")],
                              cwd=tmp_path, env={**ENV, "LLAMA_URL": srv.url, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "o" / "ANSWER.md").read_text().startswith("Tobias Wren")
    assert (tmp_path / "o" / "key.json").is_file()  # the same run machinery: a keyed run folder
    usage = subprocess.run(["bash", str(ROOT / "scripts" / "run.sh"), "only a prompt"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: bash scripts/run.sh")
