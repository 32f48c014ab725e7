"""Slurm for real: the sweep through a running one-node cluster (scripts/slurm-local.sh), and the faults a cluster
brings: a job requeued mid-sweep, a job at its time limit, the whole array cancelled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from searchbox.model import threads
from hydra_plugins.searchbox_slurm.slurm_launcher import _own_error, varying
from tests.fakes.commands import SWEEP
from tests.fakes.scripted_server import ScriptedServer
from tests.sweep.test_scaleout import ROOT, _launch_over_partial, _rows, _sweep, basic_reference  # noqa: F401 (a fixture)

# Small jobs: the test node has 2 CPUs, and memory is only checked against the node's (CR_CPU).
SLURM = ["hydra/launcher=slurm", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=10"]
FAST = {"sleep": 0.05, "content": "fast"}


def _cli(env: dict, *cmd: str) -> str:
    out = subprocess.run(list(cmd), env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{' '.join(cmd)}: {out.stderr}"
    return out.stdout


def _job_fields(env: dict, job: str) -> dict[str, str]:
    """`scontrol show job -o`: one line of Key=Value fields (values here hold no spaces but Command's)."""
    line = _cli(env, "scontrol", "show", "job", "-o", job).splitlines()[0]
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def _jobs(sweep_dir: Path) -> list[str]:
    """The sweep's Slurm jobs as submitit recorded them: `<id>` for a single job, `<array id>_<index>` in an array."""
    return sorted(p.parent.name for p in sweep_dir.glob(".submitit/*/*_submitted.pkl"))


def _wait(what: str, cond, timeout: float = 180, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the sweep ended (exit {proc.returncode}) before {what}:\n{proc.stdout.read()[-3000:] if proc.stdout else ''}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def _start(args: list[str], root: Path, env: dict) -> subprocess.Popen:
    cmd = [*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01", "model.retries=0"]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _done(runs_dir: Path) -> dict[str, int]:
    """Finished runs, each with its DONE marker's mtime (a run written twice would change it)."""
    return {p.parent.name: p.stat().st_mtime_ns for p in runs_dir.glob("*/DONE") if not p.parent.name.startswith(".")}


def _gone(env: dict, job: str) -> bool:
    """No part of `job` is left on the cluster, COMPLETING included: its processes are dead (squeue lists nothing)."""
    out = subprocess.run(["squeue", "-h", "-j", job], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    return not out.stdout.strip()  # an id already purged is an error here, and gone too


def _job_logs(sweep_dir: Path) -> str:
    """What the jobs printed (submitit's own log lines go to stdout, the sweep's to stderr), every start appended."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(sweep_dir.glob(".submitit/*/*_log.*")))


# ---- without a cluster -------------------------------------------------------------------------
def test_a_slurm_job_plans_for_its_cpus_where_the_site_does_not_bind_them(monkeypatch):
    mask = len(os.sched_getaffinity(0))
    for name in ("SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        monkeypatch.delenv(name, raising=False)
    assert threads.slurm_cores() is None and threads.available_cores() == mask
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "1")
    assert threads.available_cores() == 1 and not threads.whole_machine()
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(mask + 8))  # more than the mask allows: the mask wins
    assert threads.available_cores() == mask and not threads.whole_machine()  # an allocation, even of the whole node


def test_unfinished_jobs_are_named_by_their_grid_point():
    jobs = [["tools=none", "budget=1", "sweep.root=/s"], ["tools=none", "budget=2", "sweep.root=/s"]]
    assert varying(jobs) == ["budget=1", "budget=2"]
    assert varying([["tools=none"]]) == [""]  # one job: the sweep itself


def test_a_failed_jobs_own_reason_is_read_from_its_log(tmp_path):
    log = tmp_path / "1_0_log.err"
    log.write_text("[sweep] 0/1 runs done\nsearchbox: model.parallel must be >= 1\nsrun: error: vm: task 0: Exited with exit code 2\n")
    assert _own_error(log) == "model.parallel must be >= 1"
    log.write_text("slurmstepd: error: *** JOB 1 ON vm CANCELLED ***\n")
    assert _own_error(log) == "" and _own_error(tmp_path / "missing") == ""


# ---- the cluster itself ------------------------------------------------------------------------
def test_jobs_plan_threads_for_their_allocation_not_the_node(slurm_cluster):
    """A job sees the cores Slurm gave it: by its affinity mask (task/affinity binds), and by SLURM_CPUS_PER_TASK
    where the site does not bind (--cpu-bind=none stands for TaskPlugin=task/none); either way it is an allocation,
    used whole, not a shared machine."""
    code = "from searchbox.model.threads import available_cores, whole_machine; print(available_cores(), whole_machine())"
    seen = {}
    for cpus, bind in ((1, "cores"), (2, "cores"), (1, "none")):
        out = _cli(slurm_cluster, "srun", "--quiet", f"--cpus-per-task={cpus}", f"--cpu-bind={bind}", f"--chdir={ROOT}",
                   sys.executable, "-c", code)
        seen[(cpus, bind)] = out.split()
    assert seen == {(1, "cores"): ["1", "False"], (2, "cores"): ["2", "False"], (1, "none"): ["1", "False"]}


# ---- the same sweep ----------------------------------------------------------------------------
def test_slurm_same_rows_and_resume(tmp_path, basic_reference, slurm_cluster):  # noqa: F811
    srv, reference = basic_reference
    spent, out = _launch_over_partial(SLURM, tmp_path, srv, slurm_cluster)
    assert "Submitit 'slurm' sweep output dir" in out
    assert spent == 4  # the budget=2 job's two runs x 2 turns; the kept budget=1 runs cost nothing
    sweep_dir = tmp_path / "default"
    jobs = _jobs(sweep_dir)
    array = jobs[0].split("_")[0]
    # slurmdbd records an array's tasks a moment after they end (seen in CI: the array's one pending record, `4`)
    states = _wait("sacct to record both tasks", lambda: (s := sorted(_cli(slurm_cluster, "sacct", "-X", "-n", "-P", "-o",
                                                                          "JobID,State", "-j", array).split())) and len(s) == 2 and s, timeout=60)
    assert states == [f"{array}_0|COMPLETED", f"{array}_1|COMPLETED"] == [f"{j}|COMPLETED" for j in jobs]  # an array of two
    pd.testing.assert_frame_equal(_rows(sweep_dir), reference)


# ---- faults ------------------------------------------------------------------------------------
def test_requeued_job_loses_only_its_unfinished_runs(tmp_path, slurm_cluster):
    """`scontrol requeue` mid-sweep: Slurm kills the job and starts it again; the restart skips the runs that
    finished, redoes the ones cut off, and the sweep's own command ends normally.

    submitit's job ignores the SIGTERM and works on until KillWait (5 s here) ends it: the four runs left take 8 s
    (4 turns of 1 s, two at a time), so the first start is cut off and the restart has work to do."""
    sweep_dir = tmp_path / "default"
    runs_dir = sweep_dir / "runs"
    with ScriptedServer([{"sleep": 1.0, "content": "slow"}] * 500) as srv:
        sweep = _start(["tools=none", "budget=4", "questions.limit=6", "model.parallel=2", *SLURM], tmp_path,
                       {"LLAMA_URL": srv.url, **slurm_cluster})
        try:
            kept = _wait("two finished runs", lambda: (d := _done(runs_dir)) and len(d) >= 2 and d, proc=sweep)
            [job] = _jobs(sweep_dir)  # one grid point: one job, not an array
            _cli(slurm_cluster, "scontrol", "requeue", job)
            requeued_at = len(srv.requests)
            out, _ = sweep.communicate(timeout=300)
        finally:
            sweep.kill()
    assert sweep.returncode == 0, out[-3000:]
    assert int(_job_fields(slurm_cluster, job)["Restarts"]) == 1
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    assert len(runs) == 6 and runs["run_id"].is_unique and (runs["stop_reason"] == "budget_spent").all()
    assert {k: v for k, v in _done(runs_dir).items() if k in kept} == kept  # nothing finished was done again
    # 6 runs x 4 turns, plus at most the turns of the two runs in flight when the job was killed
    assert 24 <= len(srv.requests) <= 24 + 2 * 4 and requeued_at < len(srv.requests)
    logs = _job_logs(sweep_dir)
    assert logs.count("Starting with JobEnvironment") == 2  # the first start and the restart, in one log (--open-mode=append)
    assert "threads: 1 cores: 1 job(s) x 2 run(s)" in logs  # the job's plan follows cpus_per_task=1, not the node's 2
    assert not list(runs_dir.glob(".tmp-*"))


def test_job_at_its_time_limit_requeues_itself_and_finishes(tmp_path, slurm_cluster):
    """A 1-minute job with 70 s of work: Slurm's USR2 before the limit (signal_delay_s) makes submitit requeue it,
    and the restart does only what the first start left. slurmctld checks limits every 30 s and sends the signal
    up to one period early, so here it comes 20-50 s in: the test takes about a minute."""
    sweep_dir = tmp_path / "default"
    runs_dir = sweep_dir / "runs"
    with ScriptedServer([{"sleep": 1.5, "content": "slow"}] * 500) as srv:
        sweep = _start(["tools=none", "budget=8", "questions.limit=6", *SLURM, "hydra.launcher.timeout_min=1",
                        "hydra.launcher.signal_delay_s=10"], tmp_path, {"LLAMA_URL": srv.url, **slurm_cluster})
        try:
            [job] = _wait("the job", lambda: _jobs(sweep_dir), proc=sweep)
            _wait("the requeue", lambda: int(_job_fields(slurm_cluster, job).get("Restarts", 0)) >= 1, timeout=240, proc=sweep)
            kept = _done(runs_dir)
            srv.script[:] = [FAST] * 500  # the restart's turns are quick: it must not meet the limit again
            out, _ = sweep.communicate(timeout=300)
        finally:
            sweep.kill()
    assert sweep.returncode == 0, out[-3000:]
    assert len(kept) < 6, kept  # the limit cut the first start short
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    assert len(runs) == 6 and runs["run_id"].is_unique and (runs["stop_reason"] == "budget_spent").all()
    assert {k: v for k, v in _done(runs_dir).items() if k in kept} == kept
    assert 48 <= len(srv.requests) <= 48 + 8  # 6 runs x 8 turns, plus the turns of the one cut off
    logs = _job_logs(sweep_dir)
    assert "Caught signal SIGUSR2" in logs and "Requeued job" in logs and logs.count("Starting with JobEnvironment") == 2
    assert not list(runs_dir.glob(".tmp-*"))


def test_scancel_of_the_array_leaves_tables_that_collect_and_a_relaunch_finishes(tmp_path, slurm_cluster):
    sweep_dir = tmp_path / "default"
    runs_dir = sweep_dir / "runs"
    args = ["tools=none", "budget=1,2", "questions.limit=4", *SLURM]
    with ScriptedServer([{"sleep": 1.0, "content": "slow"}] * 500) as srv:
        env = {"LLAMA_URL": srv.url, **slurm_cluster}
        sweep = _start(args, tmp_path, env)
        try:
            _wait("two finished runs", lambda: len(_done(runs_dir)) >= 2, proc=sweep)
            array = _jobs(sweep_dir)[0].split("_")[0]
            _cli(slurm_cluster, "scancel", array)
            out, _ = sweep.communicate(timeout=300)  # submitit reads the jobs' end from sacct
        finally:
            sweep.kill()
        assert sweep.returncode != 0
        line = next((ln for ln in out.splitlines() if ln.startswith("searchbox: ")), "")
        assert "CANCELLED" in line and array in line, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        # sacct says CANCELLED at once, but the job ignores the SIGTERM and may finish one more run until KillWait's
        # SIGKILL: the sweep returns only once the jobs are gone, so what it collected is every finished run.
        assert _gone(slurm_cluster, array)
        kept = _done(runs_dir)
        assert 2 <= len(kept) < 8
        collected = subprocess.run([*SWEEP[:1], "-m", "searchbox.collect", str(sweep_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert collected.returncode == 0, collected.stderr
        runs = pd.read_parquet(sweep_dir / "runs.parquet")
        assert sorted(runs["run_id"]) == sorted(kept)  # exactly the finished runs, each once
        assert (runs["stop_reason"] == "budget_spent").all()
        srv.script[:] = [FAST] * 500
        code, out = _sweep([*args], tmp_path, env)
    assert code == 0, out[-3000:]
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    assert len(runs) == 8 and runs["run_id"].is_unique
    assert {k: v for k, v in _done(runs_dir).items() if k in kept} == kept
    assert not list(runs_dir.glob(".tmp-*"))


def test_ctrl_c_while_waiting_leaves_the_jobs_running_and_says_so(tmp_path, slurm_cluster):
    sweep_dir = tmp_path / "default"
    with ScriptedServer([{"sleep": 1.0, "content": "slow"}] * 500) as srv:
        sweep = _start(["tools=none", "budget=2", "questions.limit=4", *SLURM], tmp_path, {"LLAMA_URL": srv.url, **slurm_cluster})
        try:
            [job] = _wait("the job", lambda: _jobs(sweep_dir), proc=sweep)
            _wait("a request from the job", lambda: srv.requests, proc=sweep)
            sweep.send_signal(signal.SIGINT)
            out, _ = sweep.communicate(timeout=60)
            running = _cli(slurm_cluster, "squeue", "-h", "-o", "%i %T", "-j", job).split()
        finally:
            sweep.kill()
            subprocess.run(["scancel", job], env={**os.environ, **slurm_cluster}, timeout=60)
    assert sweep.returncode == 130, out[-3000:]
    line = next((ln for ln in out.splitlines() if ln.startswith("searchbox: ")), "")
    assert "the Slurm jobs run on" in line and f"scancel {job}" in line and "Traceback" not in out, out[-3000:]
    assert running == [job, "RUNNING"]


# ---- the embedded llama-server, one per job ------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.timeout(1800)  # a run of the bundled model on a busy 2-core box took 4 minutes, plus two server starts
def test_slurm_jobs_start_their_own_embedded_server_and_key_runs_as_the_basic_launcher(tmp_path, slurm_cluster, real_home):
    """Without model.endpoints each job starts llama-server on its node, sized to its allocation (2 CPUs, used
    whole), and its runs get the keys the basic launcher gives them: relaunched there, nothing is redone."""
    grid = ["tools=none", "budget=1", "questions.limit=1"]
    code, out = _sweep([*grid, "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=2", "hydra.launcher.mem_gb=2",
                        "hydra.launcher.timeout_min=20"], tmp_path, slurm_cluster, timeout=1200)
    assert code == 0, out[-3000:]
    assert "embedded llama-server at" not in out  # the sweep's own process started none: each job did
    sweep_dir = tmp_path / "default"
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    assert len(runs) == 1 and (runs["stop_reason"] == "budget_spent").all()
    metas = [json.loads((sweep_dir / "runs" / r / "run_meta.json").read_text()) for r in runs["run_id"]]
    assert all(m["served"]["gguf_sha256"] and m["served"]["llama_cpp"] for m in metas)  # the embedded server's identity
    logs = _job_logs(sweep_dir)
    assert "threads: 2 cores: 1 job(s) x 1 run(s) in flight, llama-server (1 slot(s), -t 2)" in logs, logs[-3000:]
    done = _done(sweep_dir / "runs")
    code, out = _sweep(grid, tmp_path, timeout=1200)  # the basic launcher: the same keys, so nothing to do
    assert code == 0, out[-3000:]
    assert _done(sweep_dir / "runs") == done and len(pd.read_parquet(sweep_dir / "runs.parquet")) == 1
