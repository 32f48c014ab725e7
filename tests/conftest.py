"""Shared fixtures: an isolated SEARCHBOX_HOME, the scripted server, and a one-call run helper."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from searchbox.config import RunConfig
from searchbox.run.runner import execute
from tests.fakes.scripted_server import ScriptedServer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
SLURM_LOCAL = Path(__file__).resolve().parents[1] / "scripts" / "slurm-local.sh"
REAL_HOME = os.environ.get("SEARCHBOX_HOME")  # the cache holding the llama-server build and model


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("sbhome")
    monkeypatch.setenv("SEARCHBOX_HOME", str(home))
    monkeypatch.delenv("LLAMA_URL", raising=False)
    return home


@pytest.fixture
def real_home(monkeypatch):
    """Undo the isolated home for tests that need the real llama-server build and model cache."""
    if REAL_HOME:
        monkeypatch.setenv("SEARCHBOX_HOME", REAL_HOME)
    else:
        monkeypatch.delenv("SEARCHBOX_HOME", raising=False)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real one-node Slurm (scripts/slurm-local.sh), started once per session and stopped at its end unless it
    was up before; yields the environment its clients need (SLURM_CONF). Skips where it cannot run (exit 2)."""
    def script(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SLURM_LOCAL), command], capture_output=True, text=True, timeout=900)

    was_up = script("status").returncode == 0
    started = script("start")
    if started.returncode == 2:
        pytest.skip(started.stderr.strip().splitlines()[-1])
    assert started.returncode == 0, f"slurm-local.sh start failed:\n{started.stderr[-3000:]}"
    env = dict(line.removeprefix("export ").split("=", 1) for line in script("env").stdout.split("\n") if line)
    yield env
    if not was_up:
        script("stop")


@pytest.fixture
def shared_data():
    if not (SHARED / "jina-corpus.zip").exists():
        pytest.skip(f"shared test data not found at {SHARED} (clone beside ../shared to run this test)")
    return SHARED


def make_cfg(**harness) -> RunConfig:
    cfg = RunConfig(tools="none")
    cfg.harness.today = "2026-01-01"
    cfg.model.retries = 1
    cfg.model.backoff_s = 0.01
    for k, v in harness.items():
        setattr(cfg.harness, k, v)
    return cfg


def run_script(tmp_path, script, cfg=None, question="How tall is Gannet Rock?", dataroom=None, name="run", server_kw=None, **kw):
    """Run the agent against a scripted server; return (meta, server, run_dir)."""
    cfg = cfg or make_cfg()
    with ScriptedServer(list(script), **(server_kw or {})) as srv:
        run_dir = tmp_path / name
        meta = execute(cfg, question, dataroom, run_dir, srv.url, **kw)
    return meta, srv, run_dir


def tables(run_dir):
    return pd.read_parquet(run_dir / "turns.parquet"), pd.read_parquet(run_dir / "tool_calls.parquet")


def trace(run_dir):
    return [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]


@contextlib.contextmanager
def llama_by_hand(tmp_path: Path, *flags: str):
    """The embedded default's llama-server started by hand as a user would (port, -c 2048, one thread, one slot, and
    `flags`): yields its URL once /health answers; skips when setup has not installed it."""
    import time

    import httpx

    from searchbox.model import llama

    binary, model = llama.find_server(), llama.find_model()
    if binary is None or model is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    port = llama.free_port()
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen([str(binary), "-m", str(model), "--port", str(port), "-c", "2048", "-t", "1", "-np", "1", *flags],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            pytest.fail("llama-server did not come up: " + (tmp_path / "server.log").read_text()[-2000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def kill_during_call(code: str, srv: ScriptedServer, calls: int = 2, cwd: Path = Path(__file__).resolve().parents[1]) -> None:
    """Run `code` (a run, in a child Python) until the server has taken `calls` requests, then SIGKILL it: no stop
    handler runs, as when a machine loses the process mid-turn."""
    import signal
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(srv.requests) < calls and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.1)
        assert len(srv.requests) == calls, child.stderr.read().decode()[-2000:] if child.poll() is not None else "no call in flight"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
