"""The repeats axis through a real Hydra sweep: epochs=K runs each question under seeds seed+0..K-1, each its own
key, in the same condition; the plan counts them and prints the power of the design's paired comparisons."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

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
    # two questions detect nothing: the line says so, with the test and the discordance it assumed
    power = re.search(r"\[sweep\]   power +2 question\(s\), paired: no difference is detected with 80% power at "
                      r"alpha=0.05, .*too few questions \(repeats averaged, discordance 0.50: worst case, no pilot\)", err)
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


@pytest.mark.e2e
def test_smollm2_sampled_repeats_vary_and_greedy_ones_do_not(tmp_path, real_home):
    """SmolLM2 at temperature 0.7 over a few questions, three seeds each: the answers move between seeds (repeat
    variance > 0); at temperature 0 the three seeds give one answer (repeat variance 0), as the plan said."""
    from searchbox.model import llama

    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    args = ["tools=none", "model.temperature=0,0.7", "epochs=3", "questions.limit=2", "budget=1", "model.max_tokens=48"]
    done = _sweep(args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 of 2 grid point(s) decode greedily" in done.stderr
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 12 and conditions(runs) == ["model.temperature"]
    split = variance_split(runs.assign(chars=runs["answer_chars"].astype(float)), "chars", ["model.temperature"]).set_index("model.temperature")
    assert split.loc[0.0, "repeat_var"] == 0.0  # greedy: every seed the same answer
    assert split.loc[0.7, "repeat_var"] > 0.0, split  # sampled: the seeds part
    answers = runs.groupby(["model.temperature", "question_id"])["answer_text"].nunique()
    assert (answers.loc[0.0] == 1).all() and (answers.loc[0.7] > 1).any()


def test_repeat_zero_is_the_run_without_epochs_and_only_the_seed_moves():
    from searchbox.sweep.job import SweepConfig

    plain, repeated = SweepConfig(), SweepConfig(epochs=3)
    assert repeated.run_config(0).semantic() == plain.run_config().semantic()  # raising epochs redoes nothing
    first, third = repeated.run_config(0).semantic(), repeated.run_config(2).semantic()
    assert third["model"]["seed"] == first["model"]["seed"] + 2
    third["model"]["seed"] = first["model"]["seed"]
    assert third == first  # nothing else in the key moves


def test_bad_power_settings_are_one_line_and_the_sweep_still_runs(tmp_path):
    done = _sweep(["model=control-keyword", "tools=none,grep_only", "questions.limit=1", "sweep.alpha=2"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "power   not computed: sweep.alpha=2 must lie between 0 and 1" in done.stderr
    assert "[sweep] plan: 2 grid point(s) x 1 question(s) = 2 run(s)" in done.stderr  # the rest of the plan stands
