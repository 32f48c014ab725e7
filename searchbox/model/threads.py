"""The thread budget: llama-server threads, torch threads, BLAS threads and parallel runs, planned together from the cores."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from ..errors import ConfigError
from .localserver import LocalServer

PLAN_ENV = "SEARCHBOX_THREAD_PLAN"  # the sweep's plan, handed to the jobs it launches on this host
LOAD_ENV = "SEARCHBOX_OTHER_LOAD"  # cores of other work to plan for instead of measuring (1 = the old one-core reserve)
PLAN_FILE = "threads.json"  # beside a sweep's sweep.json: the load its plan was decided under, reused on relaunch
# Other work below this share of a core is noise (a shell, a cron job, the kernel's own threads): it costs the
# server's pool less than the core it would cost to leave one free.
NOISE_CORES = 0.3
LOAD_SAMPLE_S = 1.0  # how long the /proc/stat sample runs
TORCH_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # torch's intra-op pool (OpenMP) and its MKL
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
# numpy's BLAS only ever multiplies one query against a chunk matrix here: a pool of threads costs more in
# wake-ups than it saves (a warm search_dataroom measured p95 ~100 ms with 2 BLAS threads, 11 ms with one).
BLAS_THREADS = 1


def slurm_cores() -> Optional[int]:
    """Inside a Slurm job: the CPUs it was given per task (SLURM_CPUS_PER_TASK, else SLURM_CPUS_ON_NODE); None outside one.

    A site whose TaskPlugin does not bind CPUs (task/none) leaves the affinity mask at the whole node: these say
    what the job may use."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def available_cores() -> int:
    """The cores this process may run on (its affinity mask: Slurm's and taskset's limits count, and a Slurm job's
    CPU count where the mask is wider), not the machine's."""
    try:
        mask = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        mask = max(1, os.cpu_count() or 1)
    given = slurm_cores()
    return min(mask, given) if given else mask


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
    load: float = 0.0  # cores' worth of other work measured on the machine when the plan was made

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
    other work may share the cores at any time, and the plan leaves it the cores it is measured to use. A Slurm job
    is an allocation even when it holds every core of its node."""
    return slurm_cores() is None and available_cores() >= (os.cpu_count() or 1)


def reserve_for(load: float, cores: int) -> int:
    """Whole cores to leave to other work measured at `load` cores (a share under NOISE_CORES is no core)."""
    return min(max(0, cores - 1), max(0, math.ceil(load - NOISE_CORES)))


def plan(cores: int, slots: int, embedder_on: bool, *, servers: int = 1, jobs: int = 1, runs: Optional[int] = None,
         server_local: bool = True, server_gpu: bool = False, may_split: bool = True, shared: bool = True,
         load: float = 0.0, local_server: Optional["LocalServer"] = None) -> ThreadPlan:
    """Share `cores` between the embedded llama-server(s) and the jobs' embedders, and size the runs in flight.

    slots: model slots in the whole pool (servers x slots each); jobs: sweep processes running at once on
    these cores; runs: runs in flight per job (default: the slots shared out over the jobs); load: cores'
    worth of other work running on the machine, measured (measure_load) and not counting searchbox's own.

    On a shared machine (shared: the cores are the whole machine's, not an allocation) the pools leave the
    cores that other work is measured to keep busy (reserve_for): llama.cpp's and OpenMP's pools wait for every
    thread at each step, so a pool as wide as the machine stalls whenever anything else is scheduled (on
    a busy 2-core box llama-server -t 2 decoded 3-8 tokens/s, -t 1 28-47, and -tb 2 prefilled slower than
    -tb 1). With nothing else running, one run in flight gets every core: its generation, tools and embedding
    take turns, never run at once (on a quiet 2-core box the same run took 186 s with -t 2, 314 s with -t 1).
    An allocation (Slurm, taskset) is used whole. Runs in flight together get disjoint shares (a torch embedding
    beside a generating server collapsed decode from 77.6 to 0.3 tokens/s) and leave at least one core to the
    harnesses running beside the servers; one run at a time alternates generation and embedding, so both get
    the same share. When the servers' share is under two threads per
    slot, the slots are spread over single-threaded server processes, one per core at most (may_split: one
    server asked for, on the CPU, weights mmap'd so the processes share them): processes need no barrier
    between them, so two slots use two cores where one 1-thread server with two slots uses one.
    """
    cores, slots, servers, jobs = max(1, cores), max(1, slots), max(1, servers), max(1, jobs)
    runs = max(1, runs if runs else math.ceil(slots / jobs))
    in_flight = jobs * runs
    load = max(0.0, float(load)) if shared else 0.0  # an allocation's cores are its own, whatever runs beside it
    reserve = reserve_for(load, cores)
    if in_flight > 1 and shared and cores > 1:
        reserve = max(1, reserve)  # overlapping runs' harnesses and tools run beside the servers
    spare = cores - reserve  # what the pools may use between them
    per_server_slots = max(1, slots // servers)
    busy = f"{load:.1f} core(s) busy elsewhere"
    left = ("" if not shared or cores == 1 else f"; every core ({busy})" if not reserve else
            f"; {reserve} core(s) left to other work ({busy})" if in_flight == 1 else f"; {reserve} core(s) left to the harnesses and other work ({busy})")

    def made(budget: Optional[int], torch: int, why: str, n: int = servers, each: int = per_server_slots) -> ThreadPlan:
        threads = None if budget is None else max(1, budget // min(n, in_flight))
        return ThreadPlan(cores, jobs, runs, threads, torch, BLAS_THREADS, why, server_gpu and server_local, n, each, socket.gethostname(),
                          round(load, 2))

    if not server_local and local_server is not None:
        # A server the user started on this host: its threads' cores are taken, the embedders share the rest.
        taken = min(cores - 1, local_server.threads) if cores > 1 else 0
        return made(None, max(1, (cores - taken) // in_flight),
                    f"model served on this host by {local_server.describe()}: {taken} core(s) counted busy, the rest go to the embedders")
    if not server_local:
        # The model runs elsewhere: the cores are the embedders', shared by every run that may embed at once.
        return made(None, max(1, cores // in_flight), "model served elsewhere: the cores go to the embedders")
    if server_gpu:
        # Fully offloaded, llama-server's CPU threads only feed the GPU.
        return made(min(servers, in_flight), max(1, (cores - servers) // in_flight), "model on the GPU: one CPU thread per server")
    if in_flight == 1:
        return made(spare, spare, "one run at a time: generation and embedding take turns" + left)
    if not embedder_on:
        budget, torch, why = spare, 1, "no dense tools: the cores go to the servers" + left
    elif cores <= 2:
        budget, torch, why = 1, 1, "runs overlap on 1-2 cores: one thread for the servers, one per embedding"
    else:
        embed_share = max(1, cores // 4)  # embedding a query is short next to decoding a reply
        budget, torch, why = max(1, spare - embed_share), max(1, embed_share // in_flight), "runs overlap: disjoint shares for servers and embedders" + left
    if may_split and servers == 1 and slots > 1 and budget < 2 * slots:
        # Single-threaded processes never wait on each other, so together they may take every core.
        n = min(slots, cores)
        return made(n, torch, why + "; single-threaded servers instead of one wider pool", n=n, each=math.ceil(slots / n))
    return made(budget, torch, why)


# ---- measured load --------------------------------------------------------------------------
def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every CPU of the machine since boot, from /proc/stat's first line."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal  # guest time is already inside user
    return busy, busy + idle + iowait


def _own_ticks(root: int) -> int:
    """CPU ticks (user + system) used so far by process `root` and every live descendant of it."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()  # the name (in parentheses) may hold spaces
        except (OSError, IndexError):
            continue  # gone meanwhile
        pid = int(entry)
        parents[pid] = int(rest[1])
        ticks[pid] = int(rest[11]) + int(rest[12])  # utime, stime
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def measure_load(sample_s: float = LOAD_SAMPLE_S, root: Optional[int] = None) -> float:
    """Cores' worth of work the machine ran over a short /proc/stat sample, less this process's own and its
    children's (searchbox's servers and tools): what else competes for the cores. Without /proc: the 1-minute
    load average less this process."""
    root = os.getpid() if root is None else root
    try:
        busy0, total0 = _cpu_ticks()
        own0 = _own_ticks(root)
        time.sleep(sample_s)
        busy1, total1 = _cpu_ticks()
        own1 = _own_ticks(root)
    except (OSError, ValueError):
        return max(0.0, os.getloadavg()[0] - 1.0) if hasattr(os, "getloadavg") else 0.0
    span = total1 - total0
    if span <= 0:
        return 0.0
    cpus = os.cpu_count() or 1
    return max(0.0, ((busy1 - busy0) - (own1 - own0)) / span * cpus)


_MEASURED: dict[str, float] = {}


def other_load(max_age_s: float = 60.0) -> tuple[float, str]:
    """The load a plan made now should assume, and where it came from: $SEARCHBOX_OTHER_LOAD when set, else a
    measurement (one per process per minute, so the server's plan and the process's own agree)."""
    given = os.environ.get(LOAD_ENV, "").strip()
    if given:
        try:
            return max(0.0, float(given)), LOAD_ENV
        except ValueError as exc:
            raise ConfigError(f"{LOAD_ENV}={given!r}: expected a number of cores") from exc
    if time.monotonic() - _MEASURED.get("at", -math.inf) > max_age_s:
        _MEASURED.update(load=measure_load(), at=time.monotonic())
    return _MEASURED["load"], "measured"


def sweep_load(sweep_dir: Optional[Path]) -> float:
    """The load a sweep's plan is made for: decided at its first launch and stored in <sweep>/threads.json, then
    reused by every relaunch on the same host and cores, so the plan (and any run key that holds the server's
    threads) does not follow the load of the moment. $SEARCHBOX_OTHER_LOAD overrides it (and is stored)."""
    if not whole_machine():
        return 0.0  # an allocation is used whole: nothing to measure
    path = Path(sweep_dir) / PLAN_FILE if sweep_dir else None
    stored: dict = {}
    if path is not None and path.exists():
        with contextlib.suppress(OSError, ValueError):
            stored = json.loads(path.read_text())
    same_host = stored.get("host") == socket.gethostname() and stored.get("cores") == available_cores()
    if same_host and isinstance(stored.get("load"), (int, float)) and not os.environ.get(LOAD_ENV, "").strip():
        return float(stored["load"])
    load, source = other_load()
    if path is not None:
        from ..paths import atomic_write

        atomic_write(path, json.dumps({"host": socket.gethostname(), "cores": available_cores(), "load": round(load, 2), "source": source,
                                       "decided_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
    return round(load, 2)


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
