"""The thread budget: llama-server threads, torch threads, BLAS threads and parallel runs, planned together from the cores."""

from __future__ import annotations

import json
import math
import os
import socket
import sys
from dataclasses import asdict, dataclass
from typing import Optional

PLAN_ENV = "SEARCHBOX_THREAD_PLAN"  # the sweep's plan, handed to the jobs it launches on this host
TORCH_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch's intra-op pool (OpenMP) and its MKL
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
# numpy's BLAS only ever multiplies one query against a chunk matrix here: a pool of threads costs more in
# wake-ups than it saves (a warm search_dataroom measured p95 ~100 ms with 2 BLAS threads, 11 ms with one).
BLAS_THREADS = 1


def available_cores() -> int:
    """The cores this process may run on (its affinity mask: Slurm's and taskset's limits count), not the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ThreadPlan:
    """Who gets how many threads on this host; every number is for one process unless named per server."""

    cores: int  # cores the plan shares out
    jobs: int  # sweep jobs (processes) running at once on these cores
    runs: int  # runs in flight inside one job (one per model slot)
    server_threads: Optional[int]  # -t/-tb of each embedded llama-server; None: not ours (external endpoint)
    torch_threads: int  # torch.set_num_threads in each job
    blas_threads: int  # OpenBLAS & co. in each job
    why: str
    server_gpu: bool = False  # the embedded servers offload every layer
    servers: int = 1  # embedded llama-server processes to start
    slots_per_server: int = 1
    host: str = ""

    @property
    def in_flight(self) -> int:
        return self.jobs * self.runs

    def describe(self) -> str:
        if self.server_threads is None:
            server = "llama-server threads: its own (external)"
        else:
            layout = f" x{self.servers}" if self.servers > 1 else ""
            server = f"llama-server{layout} ({self.slots_per_server} slot(s), -t {self.server_threads}{' each' if layout else ''})"
        return (f"{self.cores} cores: {self.jobs} job(s) x {self.runs} run(s) in flight, {server}, torch {self.torch_threads}, "
                f"BLAS {self.blas_threads} ({self.why})")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> "ThreadPlan":
        return cls(**json.loads(text))


def whole_machine() -> bool:
    """Whether this process may run on every core of the machine (no Slurm allocation, taskset or cpuset): then
    other work may share the cores at any time, and the plan keeps one free."""
    return available_cores() >= (os.cpu_count() or 1)


def plan(cores: int, slots: int, embedder_on: bool, *, servers: int = 1, jobs: int = 1, runs: Optional[int] = None,
         server_local: bool = True, server_gpu: bool = False, may_split: bool = True, shared: bool = True) -> ThreadPlan:
    """Share `cores` between the embedded llama-server(s) and the jobs' embedders, and size the runs in flight.

    slots: model slots in the whole pool (servers x slots each); jobs: sweep processes running at once on
    these cores; runs: runs in flight per job (default: the slots shared out over the jobs).

    On a shared machine (shared: the cores are the whole machine's, not an allocation) one core is left to
    the harness, its tools and whatever else runs there: llama.cpp's and OpenMP's pools wait for every
    thread at each step, so a pool as wide as the machine stalls whenever anything else is scheduled (on
    a busy 2-core box llama-server -t 2 decoded 3-8 tokens/s, -t 1 28-47, and -tb 2 prefilled slower than
    -tb 1; idle, -t 2 was 1.6x faster). An allocation (Slurm, taskset) is used whole. Runs in flight together get disjoint shares (a torch embedding
    beside a generating server collapsed decode from 77.6 to 0.3 tokens/s); one run at a time alternates
    generation and embedding, so both get the same share. When the servers' share is under two threads per
    slot, the slots are spread over single-threaded server processes, one per core at most (may_split: one
    server asked for, on the CPU, weights mmap'd so the processes share them): processes need no barrier
    between them, so two slots use two cores where one 1-thread server with two slots uses one.
    """
    cores, slots, servers, jobs = max(1, cores), max(1, slots), max(1, servers), max(1, jobs)
    runs = max(1, runs if runs else math.ceil(slots / jobs))
    in_flight = jobs * runs
    spare = cores - 1 if cores > 1 and shared else cores  # what the pools may use between them
    per_server_slots = max(1, slots // servers)

    def made(budget: Optional[int], torch: int, why: str, n: int = servers, each: int = per_server_slots) -> ThreadPlan:
        threads = None if budget is None else max(1, budget // min(n, in_flight))
        return ThreadPlan(cores, jobs, runs, threads, torch, BLAS_THREADS, why, server_gpu and server_local, n, each, socket.gethostname())

    if not server_local:
        # The model runs elsewhere: the cores are the embedders', shared by every run that may embed at once.
        return made(None, max(1, cores // in_flight), "model served elsewhere: the cores go to the embedders")
    if server_gpu:
        # Fully offloaded, llama-server's CPU threads only feed the GPU.
        return made(min(servers, in_flight), max(1, (cores - servers) // in_flight), "model on the GPU: one CPU thread per server")
    if in_flight == 1:
        return made(spare, spare, "one run at a time: generation and embedding take turns" + ("; one core left to the rest" if spare < cores else ""))
    if not embedder_on:
        budget, torch, why = spare, 1, "no dense tools: the cores go to the servers" + ("; one left to the rest" if spare < cores else "")
    elif cores <= 2:
        budget, torch, why = 1, 1, "runs overlap on 1-2 cores: one thread for the servers, one per embedding"
    else:
        embed_share = max(1, cores // 4)  # embedding a query is short next to decoding a reply
        budget, torch, why = max(1, spare - embed_share), max(1, embed_share // in_flight), "runs overlap: disjoint shares for servers and embedders"
    if may_split and servers == 1 and slots > 1 and budget < 2 * slots:
        # Single-threaded processes never wait on each other, so together they may take every core.
        n = min(slots, cores)
        return made(n, torch, why + "; single-threaded servers instead of one wider pool", n=n, each=math.ceil(slots / n))
    return made(budget, torch, why)


def preset_blas_env() -> None:
    """One BLAS thread for every process searchbox starts from here on, before numpy loads (user settings win)."""
    for name in BLAS_ENV:
        os.environ.setdefault(name, str(BLAS_THREADS))


def apply(p: ThreadPlan) -> None:
    """Set this process's pools to the plan: environment for libraries not loaded yet, runtime calls for loaded ones."""
    for name in BLAS_ENV:
        os.environ[name] = str(p.blas_threads)
    for name in TORCH_ENV:
        os.environ[name] = str(p.torch_threads)
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=p.blas_threads, user_api="blas")
        except ImportError:  # without threadpoolctl only processes started later follow the plan
            pass
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(p.torch_threads)


def exported() -> Optional[ThreadPlan]:
    """The plan a sweep exported for its jobs, if it was made for this host (Slurm copies the environment across hosts)."""
    text = os.environ.get(PLAN_ENV)
    if not text:
        return None
    try:
        p = ThreadPlan.from_env(text)
    except (ValueError, TypeError):
        return None
    return p if p.host == socket.gethostname() else None


def ray_assigned_cores() -> Optional[int]:
    """Inside a Ray task: the CPUs Ray reserved for it (Ray runs no more tasks than it has CPUs for)."""
    if "ray" not in sys.modules:
        return None
    try:
        import ray

        if not ray.is_initialized():
            return None
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
        return max(1, int(cpus)) if cpus else None
    except Exception:  # not inside a worker, or an older Ray: plan from the affinity mask
        return None
