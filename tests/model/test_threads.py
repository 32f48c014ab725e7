"""The thread budget: one plan for llama-server, torch, BLAS and the runs in flight, from the cores this process may use."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from searchbox.model import threads
from searchbox.model.threads import ThreadPlan, plan


def test_one_run_on_a_quiet_machine_gets_every_core():
    p = plan(2, 1, True, load=0.0)
    assert (p.runs, p.server_threads, p.torch_threads, p.blas_threads) == (1, 2, 2, 1) and "every core" in p.why
    assert plan(8, 1, True, load=0.2).server_threads == 8  # a shell or a cron job is noise, not a core's worth
    assert plan(1, 1, True, load=3.0).server_threads == 1


def test_one_run_on_a_loaded_machine_leaves_the_busy_cores():
    p = plan(2, 1, True, load=1.0)  # a busy process on one core: the server takes the other
    assert (p.server_threads, p.torch_threads) == (1, 1) and "1 core(s) left to other work" in p.why and p.load == 1.0
    assert plan(8, 1, True, load=2.6).server_threads == 5
    assert plan(8, 1, True, load=40.0).server_threads == 1  # never below one thread, whatever the load
    assert plan(2, 1, True, load=0.31).server_threads == 1  # just past the noise floor: a core's worth


def test_an_allocation_is_used_whole_whatever_the_load():
    p = plan(2, 1, True, shared=False, load=1.5)  # Slurm's cpus_per_task, taskset: nobody else runs on these cores
    assert (p.server_threads, p.torch_threads) == (2, 2) and "left" not in p.why and p.load == 0.0
    assert plan(8, 1, False, shared=False, load=6.0).server_threads == 8


def test_reserve_rounds_measured_load_to_whole_cores():
    assert [threads.reserve_for(x, 4) for x in (0.0, 0.3, 0.31, 1.3, 1.31, 2.9, 9.0)] == [0, 0, 1, 1, 2, 3, 3]
    assert threads.reserve_for(5.0, 1) == 0


def test_whole_machine_follows_the_affinity_mask():
    code = ("import os; from searchbox.model.threads import whole_machine; a = whole_machine(); "
            "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); print(a, whole_machine())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, confined = out.stdout.split()
    assert confined == ("True" if (os.cpu_count() or 1) == 1 else "False")


def test_two_slots_on_two_cores_become_two_single_threaded_servers():
    p = plan(2, 2, True)
    assert (p.runs, p.server_threads, p.torch_threads, p.blas_threads) == (2, 1, 1, 1)
    assert (p.servers, p.slots_per_server) == (2, 1)
    p = plan(2, 4, True)  # never more server processes than cores
    assert (p.servers, p.slots_per_server, p.server_threads) == (2, 2, 1)
    p = plan(2, 2, True, may_split=False)  # threads given by hand, or weights not mmap'd: the asked layout stays
    assert (p.servers, p.slots_per_server, p.server_threads) == (1, 2, 1)
    p = plan(16, 2, True)
    assert (p.servers, p.server_threads, p.torch_threads) == (1, 11, 2)  # 4 cores to the embedders, one to the harnesses
    p = plan(16, 2, True, load=3.0)  # overlapping runs on a loaded machine: the busy cores come off the servers' share
    assert (p.servers, p.server_threads, p.torch_threads) == (1, 9, 2)
    p = plan(16, 4, False, servers=2)  # no dense tools: the servers share what is left
    assert (p.runs, p.server_threads, p.torch_threads) == (4, 7, 1)


def test_slots_are_shared_out_over_jobs_and_an_explicit_worker_count_wins():
    assert plan(16, 8, True, jobs=4).runs == 2
    assert plan(16, 8, True, runs=3).runs == 3
    assert plan(16, 1, True, jobs=4).runs == 1


def test_external_and_gpu_servers():
    p = plan(8, 4, True, server_local=False)
    assert p.server_threads is None and p.torch_threads == 2 and p.runs == 4
    g = plan(16, 4, True, server_gpu=True)
    assert g.server_threads == 1 and g.torch_threads == 3


@pytest.mark.parametrize("embeds", [True, False])
@pytest.mark.parametrize("load", [0.0, 1.0, 2.5])
def test_pools_leave_the_busy_cores_and_overlapping_runs_get_disjoint_shares(embeds, load):
    for cores, slots, servers, jobs in itertools.product([1, 2, 3, 4, 8, 16, 64], [1, 2, 3, 4, 8], [1, 2, 4], [1, 2, 4]):
        p = plan(cores, slots * servers, embeds, servers=servers, jobs=jobs, load=load)
        case = (cores, slots, servers, jobs, load, p)
        assert p.runs >= 1 and p.torch_threads >= 1 and p.server_threads >= 1 and p.blas_threads == 1, case
        assert p.servers * p.slots_per_server >= slots * servers and p.servers <= max(servers, cores), case
        busy = min(p.servers, p.in_flight)
        reserve = threads.reserve_for(load, cores)
        if p.servers > servers:  # spread over single-threaded processes, one per core at most
            assert p.server_threads == 1 and p.servers <= cores, case
        elif p.in_flight > 1 and cores > busy:
            # a core for the harnesses, and the busy ones (one thread per server at least)
            assert p.server_threads * busy <= cores - max(1, reserve) or p.server_threads == 1, case
            assert load or p.server_threads * busy <= cores - 1, case
        if p.in_flight == 1:
            assert p.server_threads == p.torch_threads == max(1, cores - reserve), case  # quiet: every core
        elif embeds and p.servers == servers and cores > 2 * busy:  # servers leave the embedders their quarter
            assert p.torch_threads * p.in_flight <= max(p.in_flight, cores // 4), case
            assert p.server_threads * busy + cores // 4 <= cores - max(1, reserve) or p.server_threads == 1, case


def test_own_work_is_counted_by_process_tree_and_taken_off_the_load():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 6\nwhile time.time() < end: pass"])
    sleeper = subprocess.Popen(["sleep", "6"])
    hz = os.sysconf("SC_CLK_TCK")
    try:
        time.sleep(0.3)
        mine, its = threads._own_ticks(os.getpid()), threads._own_ticks(sleeper.pid)
        time.sleep(1.5)
        mine, its = threads._own_ticks(os.getpid()) - mine, threads._own_ticks(sleeper.pid) - its
        load = threads.measure_load(0.5)
    finally:
        for proc in (spin, sleeper):
            proc.kill()
            proc.wait()
    # The spinning child is ours (a few ticks at least, even on a machine at load 13); the sleeper's tree is idle.
    assert mine >= 0.05 * hz and its <= 1, (mine, its, hz)
    assert 0.0 <= load <= (os.cpu_count() or 1)


def test_a_sweeps_load_is_decided_once_and_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "whole_machine", lambda: True)
    monkeypatch.delenv(threads.LOAD_ENV, raising=False)
    loads = iter([0.1, 1.7])
    monkeypatch.setattr(threads, "other_load", lambda: (next(loads), "measured"))
    assert threads.sweep_load(tmp_path) == 0.1
    assert threads.sweep_load(tmp_path) == 0.1  # a relaunch under another load plans as the first launch did
    stored = json.loads((tmp_path / threads.PLAN_FILE).read_text())
    assert stored["load"] == 0.1 and stored["source"] == "measured" and stored["cores"] == threads.available_cores()
    (tmp_path / threads.PLAN_FILE).write_text(json.dumps({**stored, "host": "another-node"}))
    assert threads.sweep_load(tmp_path) == 1.7  # another host measures for itself


def test_the_load_override_wins_and_must_be_a_number(monkeypatch, tmp_path):
    from searchbox.errors import ConfigError

    monkeypatch.setattr(threads, "whole_machine", lambda: True)
    monkeypatch.setenv(threads.LOAD_ENV, "1")
    assert threads.other_load() == (1.0, threads.LOAD_ENV)
    assert threads.sweep_load(tmp_path) == 1.0 and plan(2, 1, True, load=1.0).server_threads == 1  # the old one-core reserve
    monkeypatch.setenv(threads.LOAD_ENV, "lots")
    with pytest.raises(ConfigError, match=threads.LOAD_ENV):
        threads.other_load()


def test_exported_plan_is_used_only_on_its_own_host(monkeypatch):
    p = plan(4, 2, True)
    monkeypatch.setenv(threads.PLAN_ENV, p.to_env())
    assert threads.exported() == p
    monkeypatch.setenv(threads.PLAN_ENV, json.dumps({**json.loads(p.to_env()), "host": "another-node"}))
    assert threads.exported() is None  # Slurm copies the environment to other nodes: they plan for themselves
    monkeypatch.setenv(threads.PLAN_ENV, "{broken")
    assert threads.exported() is None


def test_cores_follow_the_affinity_mask():
    code = "import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); from searchbox.model.threads import available_cores; print(available_cores())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_apply_sets_loaded_pools_and_the_environment_of_children():
    code = """
import numpy, torch, threadpoolctl, os, json
from searchbox.model.threads import ThreadPlan, apply
apply(ThreadPlan(cores=2, jobs=1, runs=2, server_threads=1, torch_threads=1, blas_threads=1, why="test"))
blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"torch": torch.get_num_threads(), "blas": blas, "env": os.environ["OPENBLAS_NUM_THREADS"], "omp": os.environ["OMP_NUM_THREADS"]}))
"""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["torch"] == 1 and got["blas"] and set(got["blas"]) == {1} and got["env"] == "1" and got["omp"] == "1"


def test_describe_names_every_pool():
    text = plan(2, 2, True).describe()
    assert "llama-server x2 (1 slot(s), -t 1 each)" in text and "torch 1" in text and "BLAS 1" in text and "2 run(s) in flight" in text
    assert ThreadPlan.from_env(plan(2, 1, False).to_env()) == plan(2, 1, False)


# ---- a server started by hand on this host (issue 31) ----------------------------------------
def _fake_proc(tmp_path, pid: int, argv: list[str]):
    d = tmp_path / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_a_local_llama_server_is_found_by_its_port(tmp_path):
    from searchbox.model import localserver

    _fake_proc(tmp_path, 4242, ["/opt/llama/llama-server", "-m", "x.gguf", "--port", "8081", "-t", "2"])
    _fake_proc(tmp_path, 4343, ["/usr/bin/python", "-m", "http.server", "8082"])
    found = localserver.find("http://127.0.0.1:8081/v1", proc=str(tmp_path))
    assert found == localserver.LocalServer(4242, 2, 8081)
    assert localserver.find("http://127.0.0.1:8082", proc=str(tmp_path)) is None  # not a llama-server
    assert localserver.find("http://10.1.2.3:8081", proc=str(tmp_path)) is None  # another host
    _fake_proc(tmp_path, 4444, ["llama-server", "--threads=3"])  # default port 8080
    assert localserver.find("http://localhost:8080", proc=str(tmp_path)).threads == 3


def test_the_plan_counts_a_local_server_as_busy_cores():
    from searchbox.model import localserver

    elsewhere = threads.plan(4, 1, True, server_local=False)
    here = threads.plan(4, 1, True, server_local=False, local_server=localserver.LocalServer(7, 2, 8080))
    assert elsewhere.torch_threads == 4 and here.torch_threads == 2
    assert "on this host" in here.why and "pid 7" in here.why and "2 core(s) counted busy" in here.why
    # On 2 cores a 2-thread server still leaves one to the embedder, never none.
    assert threads.plan(2, 1, True, server_local=False, local_server=localserver.LocalServer(7, 2, 8080)).torch_threads == 1
