"""Scale-out: an endpoint pool that survives a dead server, and the same sweep on Ray and submitit as on the basic launcher."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from searchbox.config import RunConfig
from searchbox.errors import ConfigError, SetupError
from searchbox.model.pool import Endpoint, EndpointPool, PoolExhausted, open_pool
from searchbox.sweep.job import launcher_jobs
from tests.fakes.commands import SWEEP
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
GRID = ["tools=none", "budget=1,2", "questions.limit=2"]  # 2 jobs x 2 questions = 4 runs
KEYS = ["run_id", "question_id", "tools", "budget", "stop_reason", "turns", "tokens_total", "f1", "contains", "answer_text"]


def _sweep(args, root, env=None, timeout=600):
    cmd = [*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01", "model.retries=0"]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HYDRA_FULL_ERROR": "1", **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def _rows(sweep_dir: Path) -> pd.DataFrame:
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    return runs[KEYS].sort_values("run_id").reset_index(drop=True)


class Proc:
    """A scripted server process whose request lines are collected as they come."""

    def __init__(self, script, model_id="scripted-model"):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.scripted_process", json.dumps(script), model_id], cwd=ROOT,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.url = self.proc.stdout.readline().strip()
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def requests(self) -> int:
        return sum(1 for ln in list(self.lines) if ln.startswith("request"))

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# ---- the pool ---------------------------------------------------------------------------------
def test_pool_hands_out_free_slots_least_busy_first_and_blocks_when_full():
    pool = EndpointPool([Endpoint("http://a", 2), Endpoint("http://b", 1)], log=lambda m: None, probe_fn=lambda u: None)
    got = [pool.acquire() for _ in range(3)]
    assert sorted(e.url for e in got) == ["http://a", "http://a", "http://b"]
    waited = []

    def late():
        waited.append(pool.acquire().url)

    t = threading.Thread(target=late)
    t.start()
    time.sleep(0.2)
    assert not waited  # every slot is held
    pool.release(got[2])
    t.join(5)
    assert waited == [got[2].url]


def test_dead_endpoint_is_taken_out_with_its_reason_and_the_last_one_leaves_an_error():
    said = []
    dead = {"http://a"}
    pool = EndpointPool([Endpoint("http://a", 1), Endpoint("http://b", 1)], log=said.append,
                        probe_fn=lambda u: "unreachable (ConnectError)" if u in dead else None)
    a = next(e for e in pool.endpoints if e.url == "http://a")
    assert pool.check(a) is False and a.dead == "unreachable (ConnectError)"
    assert said == ["endpoint http://a taken out of the pool: unreachable (ConnectError) (1 left)"]
    assert pool.acquire().url == "http://b" and pool.total_slots == 1
    dead.add("http://b")
    assert pool.check(pool.endpoints[1]) is False
    with pytest.raises(PoolExhausted, match="every endpoint"):
        pool.acquire()


def test_open_pool_refuses_mixed_models_and_drops_unreachable_endpoints():
    cfg = RunConfig(tools="none")
    with ScriptedServer([], model_id="model-a") as a, ScriptedServer([], model_id="model-b") as b, ScriptedServer([], model_id="model-a") as c:
        with pytest.raises(ConfigError, match="must all serve the same model") as err:
            open_pool([a.url, b.url], cfg, 1, log=lambda m: None)
        assert "\n" not in str(err.value) and "model-b" in str(err.value)
        said = []
        pool, served = open_pool(["http://127.0.0.1:9", a.url, c.url, a.url], cfg, 2, log=said.append)
        assert served.model_id == "model-a" and [e.url for e in pool.live] == [a.url, c.url] and pool.total_slots == 4
        assert any("http://127.0.0.1:9 taken out" in m for m in said)
    with pytest.raises(SetupError, match="no live model endpoint"):
        open_pool(["http://127.0.0.1:9"], cfg, 1, log=lambda m: None)


def test_launcher_jobs_reads_each_launchers_parallelism():
    assert launcher_jobs({"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"}, 6, 2) == 1
    assert launcher_jobs({"_target_": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "n_jobs": -1}, 6, 4) == 4
    ray = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    assert launcher_jobs({"_target_": ray, "ray": {"init": {"address": None}, "remote": {}}}, 6, 2) == 2
    assert launcher_jobs({"_target_": ray, "ray": {"init": {"address": None}, "remote": {"num_cpus": 2}}}, 6, 4) == 2
    assert launcher_jobs({"_target_": ray, "ray": {"init": {"address": "ray://head:10001"}}}, 6, 2) is None
    assert launcher_jobs({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"}, 6, 2) is None
    assert launcher_jobs({"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"}, 3, 2) == 3


# ---- a server killed mid-sweep ----------------------------------------------------------------
def test_killed_server_its_runs_finish_once_on_the_other(tmp_path):
    # A answers one request, then hangs on the next until it is killed; B answers everything, slowly enough to overlap.
    a = Proc([{"sleep": 0.2, "content": "from a"}, {"sleep": 300, "content": "never"}])
    b = Proc([{"sleep": 0.3, "content": "from b"}] * 40)
    try:
        cmd = [*SWEEP, "tools=none", "budget=2", "questions.limit=4", f"model.endpoints=[{a.url},{b.url}]",
               f"sweep.root={tmp_path}", "harness.today=2026-01-01", "model.retries=0"]
        sweep = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "HYDRA_FULL_ERROR": "1"}, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while a.requests() < 2 and time.monotonic() < deadline and sweep.poll() is None:
            time.sleep(0.1)
        assert a.requests() == 2, "the sweep never reached A's hanging request"
        a.kill()  # mid-request: the run on A loses its connection
        out, _ = sweep.communicate(timeout=300)
    finally:
        a.kill()
        b.kill()
    assert sweep.returncode == 0, out[-3000:]
    sweep_dir = tmp_path / "default"
    runs = pd.read_parquet(sweep_dir / "runs.parquet")
    assert len(runs) == 4 and runs["run_id"].is_unique and (runs["stop_reason"] == "budget_spent").all()
    served = [json.loads((sweep_dir / "runs" / r / "run_meta.json").read_text())["served"]["endpoint"] for r in runs["run_id"]]
    assert served == [b.url] * 4  # A never finished a run: the one it held was redone on B
    assert b.requests() == 8  # 4 runs x 2 turns on B, nothing done twice there
    assert f"endpoint {a.url} taken out of the pool" in out and "redoing it on another endpoint" in out
    assert "[sweep] 4/4 runs done" in out and "2 runs in flight" in out
    assert not list((sweep_dir / "runs").glob(".tmp-*"))


def test_ctrl_c_with_runs_in_flight_pauses_them_and_a_relaunch_finishes_the_rest(tmp_path):
    runs_dir = tmp_path / "default" / "runs"
    with ScriptedServer([{"sleep": 0.3, "content": "slow"}] * 400) as srv:
        args = ["tools=none", "budget=3", "questions.limit=6", "model.parallel=2"]
        cmd = [*SWEEP, *args, f"sweep.root={tmp_path}", "harness.today=2026-01-01", "model.retries=0"]
        sweep = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "LLAMA_URL": srv.url}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(runs_dir.glob("*/DONE")):
            time.sleep(0.1)
        time.sleep(0.4)  # both slots busy with the next runs
        sweep.send_signal(signal.SIGINT)
        out, _ = sweep.communicate(timeout=60)
        assert sweep.returncode == 130 and "waiting for the runs in flight" in out, out[-2000:]
        assert "Traceback" not in out and "searchbox: interrupted: finished runs are kept" in out, out[-2000:]
        kept = {p.parent.name: p.stat().st_mtime_ns for p in runs_dir.glob("*/DONE")}
        assert 1 <= len(kept) < 6
        code, out = _sweep(args, tmp_path, {"LLAMA_URL": srv.url})
        assert code == 0, out[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 6 and runs["run_id"].is_unique and (runs["stop_reason"] == "budget_spent").all()
    assert all((runs_dir / name / "DONE").stat().st_mtime_ns == mtime for name, mtime in kept.items())
    assert not list(runs_dir.glob(".tmp-*"))


def test_only_real_sweeps_count_as_swept_groups():
    from searchbox.sweep.job import swept_groups

    assert swept_groups(["model.server_args=[-t,2]", "tools=high,none", "model.temperature=0,1", "seed=0", "hydra/launcher=ray"]) == {"tools", "model"}


def test_mixed_pool_is_refused_in_one_line(tmp_path):
    with ScriptedServer([], model_id="model-a") as a, ScriptedServer([], model_id="model-b") as b:
        code, out = _sweep(["tools=none", "questions.limit=1", f"model.endpoints=[{a.url},{b.url}]"], tmp_path, timeout=120)
        assert code != 0 and not a.requests and not b.requests
    line = next(ln for ln in out.splitlines() if ln.startswith("searchbox: "))
    assert "model.endpoints must all serve the same model" in line and "model-b" in line


# ---- the same sweep on other launchers -------------------------------------------------------
@pytest.fixture(scope="module")
def basic_reference(tmp_path_factory):
    """The 4-run grid on the basic launcher (the reference), with the scripted server it ran against."""
    root = tmp_path_factory.mktemp("basic")
    srv = ScriptedServer([]).__enter__()
    code, out = _sweep(GRID, root, {"LLAMA_URL": srv.url, "SEARCHBOX_HOME": str(root / "home")})
    assert code == 0, out[-3000:]
    yield srv, _rows(root / "default")
    srv.__exit__(None, None, None)


def _launch_over_partial(launcher_args, tmp_path, srv, env=None):
    """Half the grid on the basic launcher, then the whole grid on `launcher_args`: it must do only the other half."""
    code, out = _sweep(["tools=none", "budget=1", "questions.limit=2"], tmp_path, {"LLAMA_URL": srv.url})
    assert code == 0, out[-3000:]
    before = len(srv.requests)
    code, out = _sweep([*GRID, *launcher_args], tmp_path, {"LLAMA_URL": srv.url, **(env or {})})
    assert code == 0, out[-3000:]
    return len(srv.requests) - before, out


@pytest.mark.e2e
def test_ray_local_cluster_same_rows_and_resume(tmp_path, basic_reference):
    srv, reference = basic_reference
    spent, out = _launch_over_partial(["hydra/launcher=ray", "hydra.launcher.ray.init.address=local",
                                                 "+hydra.launcher.ray.init.num_cpus=2"], tmp_path, srv)
    assert "Ray Launcher is launching 2 jobs" in out
    assert spent == 4  # the budget=2 job's two runs x 2 turns; the kept budget=1 runs cost nothing
    pd.testing.assert_frame_equal(_rows(tmp_path / "default"), reference)


@pytest.mark.e2e
def test_submitit_local_same_rows_and_resume(tmp_path, basic_reference):
    srv, reference = basic_reference
    spent, out = _launch_over_partial(["hydra/launcher=submitit_local"], tmp_path, srv)
    assert "Submitit 'local' sweep output dir" in out
    assert spent == 4
    assert list((tmp_path / "default" / ".submitit").glob("*/*_result.pkl"))  # the jobs ran through submitit's executor
    pd.testing.assert_frame_equal(_rows(tmp_path / "default"), reference)


@pytest.mark.e2e
def test_ray_existing_cluster_by_address(tmp_path, basic_reference):
    """A cluster started apart (`ray start --head`, token auth as Ray sets it up), joined by address via ray_cluster.yaml."""
    srv, reference = basic_reference
    temp = tempfile.mkdtemp(prefix="sbray", dir="/tmp")  # Ray's socket paths must stay short
    port = 20000 + secrets.randbelow(20000)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={port}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}", "--block"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code, out = _sweep([*GRID, "hydra/launcher=ray_cluster", f"hydra.launcher.ray.init.address=127.0.0.1:{port}",
                            f"model.endpoints=[{srv.url}]"], tmp_path,
                           {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": env["RAY_AUTH_TOKEN"]})
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head, its raylet and workers: the process group this test started
        head.wait()
        shutil.rmtree(temp, ignore_errors=True)  # with it the cluster's address file, so no later ray.init finds a dead head
    assert code == 0, out[-3000:]
    assert "Connected to Ray cluster" in out or "Connecting to existing Ray cluster" in out
    pd.testing.assert_frame_equal(_rows(tmp_path / "default"), reference)
