"""The repeats axis through a real Hydra sweep: epochs=K runs each question under seeds seed+0..K-1, each its own
key, in the same condition; the plan counts them and prints the power of the design's paired comparisons."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pandas as pd

from searchbox.analysis.frames import conditions
from searchbox.analysis.repeats import reducers, variance_split
from searchbox.sweep.power import pilot_discordance
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]


def _sweep(args: list[str], root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    env.pop("LLAMA_URL", None)
    return subprocess.run([*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_epochs_repeat_each_question_under_its_own_seed_and_key(tmp_path):
    args = ["model=control-keyword", "tools=none,grep_only", "epochs=3", "questions.limit=2", "sweep.target_effect=0.1"]
    first = _sweep(args, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    err = first.stderr
    assert "[sweep] plan: 2 grid point(s) x 2 question(s) x 3 epoch(s) = 12 run(s), 0 done, 12 to go" in err
    power = re.search(r"\[sweep\]   power +2 question\(s\), paired: a difference of (.+?) is detected with 80% power at "
                      r"alpha=0.05 \(repeats averaged, discordance 0.50: worst case, no pilot\)", err)
    assert power, err[-3000:]
    assert "sweep.target_effect=0.1 needs" in err
    assert "2 of 2 grid point(s) decode greedily" in err  # a control: the repeats are expected identical
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 12 and runs["run_id"].nunique() == 12
    assert sorted(runs["model.seed"].unique()) == [0, 1, 2]
    assert conditions(runs) == ["tools"]  # the seed is a repeat, not a condition
    per = runs.groupby(["tools", "question_id"])["run_id"].nunique()
    assert (per == 3).all()  # three keys per question and arm
    acting = runs[runs["tools"] == "grep_only"]
    split = variance_split(acting, "correct", ["tools"])
    assert split["repeat_var"].iloc[0] == 0.0  # a control answers the same under every seed
    assert set(reducers(acting, "correct", ["tools"])["reducer"]) == {"mean", "majority", "pass@3"}
    again = _sweep(args, tmp_path)  # everything done: found by key, seed by seed; now a pilot prices the power
    assert again.returncode == 0, again.stderr[-3000:]
    assert "12 done, 0 to go" in again.stderr
    psi, pairs = pilot_discordance(runs, ["tools"])
    assert pairs == 2  # one pair of arms over two questions (each question's repeats averaged first)
    expect = f"pilot: {pairs} paired question(s)" if psi > 0 else f"worst case, the pilot's {pairs} paired question(s) never differ"
    assert expect in again.stderr, again.stderr[-2000:]


def test_epochs_below_one_is_one_line(tmp_path):
    bad = _sweep(["model=control-keyword", "tools=none", "epochs=0", "questions.limit=1"], tmp_path)
    assert bad.returncode != 0 and "epochs=0: must be >= 1" in bad.stderr and "Traceback" not in bad.stderr
