"""Hydra sweeps against the scripted server: grid x questions in runs.parquet, kill-and-relaunch loses nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from searchbox.errors import ConfigError
from searchbox.sweep.job import SweepConfig, axes_of, count_jobs
from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]


def _sweep(args, url, root, **kw):
    env = {**os.environ, "LLAMA_URL": url, "HYDRA_FULL_ERROR": "1"}
    cmd = [*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01", "model.retries=0"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def test_grid_times_questions_in_runs_parquet(tmp_path):
    with ScriptedServer([]) as srv:
        proc = _sweep(["tools=high,low,none", "budget=1,2", "questions.limit=2"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    sweep = tmp_path / "default"
    runs = pd.read_parquet(sweep / "runs.parquet")
    assert len(runs) == 12 and runs["run_id"].is_unique
    grid = runs.groupby(["tools", "budget"]).size()
    assert set(grid.index) == {(t, b) for t in ("high", "low", "none") for b in (1, 2)} and set(grid) == {2}
    assert set(runs["question_id"]) == {"nw01", "nw02"}
    assert (runs.loc[runs["budget"] == 2, "turns"] == 2).all() and (runs.loc[runs["budget"] == 1, "turns"] == 1).all()
    for col in ("contains", "f1", "exact_match", "evidence_recall", "tokens_total", "stop_reason", "model", "retriever"):
        assert col in runs.columns, col
    assert "search_dataroom" in runs.loc[runs["tools"] == "high", "tools_enabled"].iloc[0]
    assert (runs["schema_version"] == 2).all() and runs["run_id"].map(lambda r: (sweep / "runs" / r / "DONE").exists()).all()
    turns = pd.read_parquet(sweep / "turns.parquet")
    assert len(turns) == runs["turns"].sum() and {"tools", "budget", "question_id"} <= set(turns.columns)
    assert "[sweep] 12/12 runs done" in out


def test_progress_counts_this_launch_only(tmp_path):
    # A second grid launched into a sweep that holds another grid's runs: done/total is this launch's (was 7/3).
    def launch(args):
        proc = _sweep([*args, "tools=none", "questions.limit=3"], "http://127.0.0.1:9", tmp_path)  # controls: no server
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        return [tuple(map(int, m)) for m in re.findall(r"\[sweep\] (\d+)/(\d+) runs done", out)]

    assert launch(["model=control-keyword", "budget=1,2"])[-1] == (6, 6)
    second = launch(["model=control-oracle"])
    assert second and all(done <= total == 3 for done, total in second) and second[-1] == (3, 3), second
    again = launch(["model=control-keyword", "budget=2"])  # all found done: nothing runs, nothing to report
    assert again == []


def test_killed_sweep_relaunch_loses_nothing(tmp_path):
    script = [{"sleep": 0.4, "content": "slow"}] * 400
    args = ["tools=none,high", "budget=1,2", "questions.limit=3"]
    runs_dir = tmp_path / "default" / "runs"
    with ScriptedServer(script) as srv:
        proc = _sweep(args, srv.url, tmp_path, start_new_session=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(runs_dir.glob("*/DONE"))) < 3:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        finished = {p.parent.name: p.stat().st_mtime_ns for p in runs_dir.glob("*/DONE")}
        assert 3 <= len(finished) < 12
        requests_before = len(srv.requests)
        proc = _sweep(args, srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
        requests_after = len(srv.requests) - requests_before
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 12 and runs["run_id"].is_unique
    for name, mtime in finished.items():  # finished runs were kept, not redone
        assert (runs_dir / name / "DONE").stat().st_mtime_ns == mtime
    assert not list(runs_dir.glob(".tmp-*"))
    assert requests_after < 18  # 12 runs x 1.5 turns on average in all; the kept ones cost nothing


def test_typo_fails_before_any_run(tmp_path):
    proc = _sweep(["tools=high", "harness.budgett=3"], "http://127.0.0.1:9", tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "budgett" in out
    assert not (tmp_path / "default" / "runs").exists() or not list((tmp_path / "default" / "runs").iterdir())
    proc = _sweep(["tools.select=[telepathy]"], "http://127.0.0.1:9", tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "unknown tool 'telepathy'" in out


def test_run_config_from_sweep_config():
    sc = SweepConfig(budget=7, force_budget=False, budget_unit="tokens", seed=3)
    sc.tools.select = ["rerank"]
    cfg = sc.run_config()
    assert cfg.harness.budget == 7 and cfg.harness.force_budget is False and cfg.model.seed == 3 and cfg.tools == ["rerank"]
    sc.budget_unit = "minutes"
    with pytest.raises(ConfigError, match="budget_unit"):
        sc.run_config()


def test_axes_and_job_count():
    assert count_jobs(["tools=high,low,none", "budget=1,10,30", "questions.limit=2"]) == 9
    axes = axes_of(["tools=high", "budget=10", "harness.compact_at=0.5"], SweepConfig(budget=10))
    assert axes["budget"] == 10 and axes["harness.compact_at"] == "0.5" and axes["tools"] == "default"


def test_joblib_launcher_runs_jobs_in_parallel_workers(tmp_path):
    with ScriptedServer([]) as srv:
        proc = _sweep(["tools=none,high", "budget=1", "questions.limit=1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert sorted(runs["tools"]) == ["high", "none"]


@pytest.mark.parametrize("name, expect", [("grep_vs_dense", "jina-corpus.zip"), ("tools_x_budget", "name: tools_x_budget")])
def test_named_experiments_compose(name, expect):
    proc = subprocess.run([sys.executable, "-m", "searchbox.sweep", f"+experiment={name}", "--cfg", "job"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expect in proc.stdout


def test_sweep_grades_with_a_judge_at_its_own_endpoint(tmp_path):
    from tests.fakes.judge_server import JudgeServer

    with ScriptedServer([{"content": "38.4 metres"}, {"content": "no idea"}]) as srv, JudgeServer(["judge-7b"]) as judge:
        proc = _sweep(["tools=none", "budget=1", "questions.limit=2", "grading.judge=true", f"grading.judge_endpoint={judge.url}"],
                      srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet").set_index("question_id")
    assert runs.loc["nw01", "judge"] == 1.0 and runs.loc["nw02", "judge"] == 0.0
    assert (runs["judge_model"] == "judge-7b").all() and len(judge.requests) == 2
    proc = _sweep(["tools=none", "budget=1", "questions.limit=1", "grading.judge=true", "grading.judge_endpoint=http://127.0.0.1:9"],
                  srv.url, tmp_path / "dead")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 2 and "judge" in out and "Traceback" not in out  # a dead judge fails before any run


def test_a_model_that_only_sends_nul_commands_still_gives_results(tmp_path):
    """Every call the model makes is malformed (bash refuses NUL): the runs are results, counted in runs.parquet, exit 0."""
    nul = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo a\u0000b"}}]}
    with ScriptedServer([nul] * 200) as srv:
        proc = _sweep(["tools=none", "budget=2", "questions.limit=2", "harness.max_steps_per_turn=3"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 2 and (runs["malformed_calls"] > 0).all() and set(runs["stop_reason"]) == {"budget_spent"}
    calls = pd.read_parquet(tmp_path / "default" / "tool_calls.parquet")
    assert calls["malformed"].all() and "incomplete" not in out


def test_harness_group_and_flag(tmp_path):
    for args in (["harness=native"], ["harness=default"], []):
        proc = subprocess.run([sys.executable, "-m", "searchbox.sweep", *args, "--cfg", "job"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0 and "kind: native" in proc.stdout, proc.stderr[-2000:]
    proc = _sweep(["harness.kind=telepathy", "questions.limit=1"], "http://127.0.0.1:9", tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "harness.kind='telepathy'" in out and "native" in out and "Traceback" not in out


# ---- the sweep directory under faults (issue 20): one launch at a time, claimed runs, stale temporaries, a full disk -----
def test_second_launch_into_a_held_directory_refuses_in_one_line(tmp_path):
    from searchbox.sweep.folder import SweepBusy, hold_launch

    lock = hold_launch(tmp_path / "sw", "first")
    probe = subprocess.run([sys.executable, "-c", "import sys; from searchbox.sweep.folder import hold_launch; hold_launch(sys.argv[1])",
                            str(tmp_path / "sw")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "SweepBusy" in probe.stderr and f"pid {os.getpid()}" in probe.stderr
    with pytest.raises(SweepBusy, match="in use by another launch"):
        hold_launch(tmp_path / "sw")  # another open of the lock file, in this process too
    lock.release()
    hold_launch(tmp_path / "sw").release()  # free again once released


def test_stale_tmp_folders_of_dead_processes_are_removed_and_claimed_ones_kept(tmp_path):
    from searchbox.sweep.folder import claim_run, clean_stale

    runs = tmp_path / "sw" / "runs"
    dead = runs / ".tmp-aaaa-999999"
    (dead / "work" / "dataroom").mkdir(parents=True)
    os.chmod(dead / "work" / "dataroom", 0o555)  # read-only, as a run's dataroom is
    live = runs / ".tmp-bbbb-123"
    live.mkdir()
    with claim_run(runs, "bbbb") as mine:
        assert mine
        assert clean_stale(runs) == [dead.name]
        assert live.exists() and not dead.exists()
        with claim_run(runs, "bbbb", give_up=lambda: True) as again:  # a second claimant (another thread or job) waits or gives up
            assert again is False
    assert clean_stale(runs) == [live.name]


def test_atomic_write_leaves_no_temporary_when_the_write_fails(tmp_path, monkeypatch):
    import errno

    from searchbox import paths

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(paths.os, "fsync", full)
    with pytest.raises(OSError):
        paths.atomic_write(tmp_path / "state.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_disk_full_is_one_line_naming_the_path():
    import errno

    from searchbox.errors import DiskFull, cli

    @cli
    def main():
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/nonexistent/sweep/runs/x/trace.jsonl")
        except OSError as exc:
            raise RuntimeError("a later failure") from exc

    assert main() == 2
    text = str(DiskFull.of(OSError(errno.EDQUOT, "Disk quota exceeded", "/nonexistent/a"), "/"))
    assert text.startswith("disk full writing /nonexistent/a (") and "free space on that file system" in text and "\n" not in text


def test_jobs_of_one_launch_with_the_same_run_keys_share_the_directory(tmp_path):
    # sweep.workers is no part of a run key: two joblib jobs at once get the same keys. Each run is run once (the
    # other job waits on its claim and finds it done); neither deletes the other's .tmp folder as stale.
    proc = _sweep(["model=control-keyword", "tools=none", "budget=1", "questions.limit=4", "sweep.workers=1,2",
                   "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], "http://127.0.0.1:9", tmp_path)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    runs_dir = tmp_path / "default" / "runs"
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 4 and runs["run_id"].is_unique
    assert len(list(runs_dir.glob("*/DONE"))) == 4 and not list(runs_dir.glob(".tmp-*"))
    starts = {r: json.loads((runs_dir / r / "run_meta.json").read_text())["started_at"] for r in runs["run_id"]}
    assert len(set(starts.values())) == 4


def test_the_plan_counts_the_slots_a_hand_started_server_reports(tmp_path):
    """Issue 31.3: a server started by hand with -np 4 runs four at once; the plan prices four in flight (its /props
    total_slots), not the one the thread plan would assume, and the job runs one per slot."""
    with ScriptedServer([], slots=4) as srv:
        proc = _sweep(["tools=none", "budget=1", "questions.limit=4"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    import json

    plan = json.loads(next((tmp_path / "default" / ".launches").glob("*/plan.json")).read_text())
    assert plan["in_flight"] == 4, plan
    assert "4 runs in flight on 4 slot(s)" in out, out[-3000:]


def test_a_real_sweep_says_what_is_in_flight_while_a_slow_server_holds_a_run(tmp_path):
    """Issue 31.3: with one run held by a slow server, the sweep prints heartbeat lines naming it between finished runs,
    not a frozen ETA (the interval shortened by sweep.heartbeat_s)."""
    with ScriptedServer([{"sleep": 3.0, "content": "done"}]) as srv:
        proc = _sweep(["tools=none", "budget=1", "questions.limit=1", "sweep.heartbeat_s=0.5"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    beats = [line for line in out.splitlines() if line.startswith("[sweep] heartbeat: 1 run(s) in flight")]
    assert len(beats) >= 2 and "0/1 runs done" in beats[0], out[-3000:]
    bad = _sweep(["tools=none", "sweep.heartbeat_s=0"], "http://127.0.0.1:9", tmp_path / "bad")
    text, _ = bad.communicate(timeout=300)
    assert bad.returncode != 0 and "sweep.heartbeat_s=0" in text
