"""The thread budget: one plan for llama-server, torch, BLAS and the runs in flight, from the cores this process may use."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from searchbox import threads
from searchbox.threads import ThreadPlan, plan


def test_one_run_at_a_time_shares_all_but_one_core_with_both_pools():
    p = plan(2, 1, True)
    assert (p.runs, p.server_threads, p.torch_threads, p.blas_threads) == (1, 1, 1, 1)
    p = plan(8, 1, True)
    assert (p.server_threads, p.torch_threads) == (7, 7)
    assert plan(1, 1, True).server_threads == 1


def test_an_allocation_is_used_whole():
    p = plan(2, 1, True, shared=False)  # Slurm's cpus_per_task, taskset: nobody else runs on these cores
    assert (p.server_threads, p.torch_threads) == (2, 2) and "left" not in p.why
    assert plan(8, 1, False, shared=False).server_threads == 8


def test_whole_machine_follows_the_affinity_mask():
    code = ("import os; from searchbox.threads import whole_machine; a = whole_machine(); "
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
    assert (p.servers, p.server_threads, p.torch_threads) == (1, 11, 2)  # 4 cores to the embedders, one spare
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
def test_pools_leave_a_core_spare_and_overlapping_runs_get_disjoint_shares(embeds):
    for cores, slots, servers, jobs in itertools.product([1, 2, 3, 4, 8, 16, 64], [1, 2, 3, 4, 8], [1, 2, 4], [1, 2, 4]):
        p = plan(cores, slots * servers, embeds, servers=servers, jobs=jobs)
        case = (cores, slots, servers, jobs, p)
        assert p.runs >= 1 and p.torch_threads >= 1 and p.server_threads >= 1 and p.blas_threads == 1, case
        assert p.servers * p.slots_per_server >= slots * servers and p.servers <= max(servers, cores), case
        busy = min(p.servers, p.in_flight)
        if p.servers > servers:  # spread over single-threaded processes, one per core at most
            assert p.server_threads == 1 and p.servers <= cores, case
        elif cores > busy:
            assert p.server_threads * busy <= cores - 1, case  # one core for the harness and the neighbours
        if p.in_flight == 1:
            assert p.server_threads == p.torch_threads == max(1, cores - 1), case
        elif embeds and p.servers == servers and cores > 2 * busy:  # servers leave the embedders their quarter
            assert p.torch_threads * p.in_flight <= max(p.in_flight, cores // 4), case
            assert p.server_threads * busy + cores // 4 <= cores - 1 or p.server_threads == 1, case


def test_exported_plan_is_used_only_on_its_own_host(monkeypatch):
    p = plan(4, 2, True)
    monkeypatch.setenv(threads.PLAN_ENV, p.to_env())
    assert threads.exported() == p
    monkeypatch.setenv(threads.PLAN_ENV, json.dumps({**json.loads(p.to_env()), "host": "another-node"}))
    assert threads.exported() is None  # Slurm copies the environment to other nodes: they plan for themselves
    monkeypatch.setenv(threads.PLAN_ENV, "{broken")
    assert threads.exported() is None


def test_cores_follow_the_affinity_mask():
    code = "import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); from searchbox.threads import available_cores; print(available_cores())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_apply_sets_loaded_pools_and_the_environment_of_children():
    code = """
import numpy, torch, threadpoolctl, os, json
from searchbox.threads import ThreadPlan, apply
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
