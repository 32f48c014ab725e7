"""Hydra sweeps: `python -m searchbox.sweep -m tools=high,low,none budget=1,10,30`.

Each Hydra job is one grid point and runs every question of the question set into
<sweep>/runs/<run key>/, skipping runs that already finished. Runs are written under a temporary
name and renamed when complete (with their grades), so a killed sweep loses nothing finished and a
relaunch redoes only what did not finish. After every run the sweep tables are re-collected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import queue
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from .. import errors
from . import folder as sweepdir
from ..model import threads

from ..config import DataroomLimits, HarnessConfig, IndexConfig, ModelConfig, NoiseConfig, RetrievalConfig, RunConfig
from ..errors import ConfigError
from ..paths import atomic_write

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_ROOT / "conf"
ENDPOINTS_ENV = "SEARCHBOX_ENDPOINTS"  # the sweep's embedded servers, comma-separated, for the jobs it launches
COLLECT_EVERY_S = 30.0  # sweep tables are refreshed at most this often while a job runs, and at its end


# ---- the structured config (Hydra validates every override against it) ----------------------
@dataclass
class ToolsChoice:
    select: Any = None  # none | high | low | all | [names]


@dataclass
class DataroomChoice:
    name: str = "builtin"
    path: Optional[str] = None  # zip or folder; null = the built-in dataroom


@dataclass
class QuestionsChoice:
    name: str = "builtin"
    path: Optional[str] = None  # jsonl; null = the built-in question set
    limit: Optional[int] = None
    ids: Optional[list[str]] = None


@dataclass
class GradingConfig:
    judge: bool = False
    judge_endpoint: Optional[str] = None  # null = the run's endpoint
    judge_model: Optional[str] = None
    confidence: bool = False  # ask each run for a `Confidence: NN%` line (harness.ask_confidence); calibration in the report
    judges: list = field(default_factory=list)  # [{name, endpoint, model, prompt}]: several judges at once (grading/judges.py)


@dataclass
class DistractorsChoice:
    seed: int = 0  # which distractors the noise axis draws
    source: Optional[str] = None  # zip or folder; null = the packaged distractor corpus


@dataclass
class SweepSettings:
    name: str = "default"
    root: str = "outputs/sweeps"
    workers: Optional[int] = None  # runs in flight per job; null = the pool's slots shared over the jobs on this host
    alpha: float = 0.05  # the plan's power figures: the level of each paired test
    target_effect: Optional[float] = None  # a difference (0.05 = 5 points): the plan says how many questions detect it
    discordance: Optional[float] = None  # share of questions two arms differ on; null = a pilot's (runs.parquet), else 0.5
    heartbeat_s: float = 60.0  # between the lines that say what is in flight while no run finishes (sweep/heartbeat.py)


@dataclass
class SweepConfig:
    """The composed Hydra config of one job: the axes plus everything a run needs."""

    model: ModelConfig = field(default_factory=ModelConfig)
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    backend: RetrievalConfig = field(default_factory=RetrievalConfig)
    limits: DataroomLimits = field(default_factory=DataroomLimits)
    index: IndexConfig = field(default_factory=IndexConfig)
    distractors: DistractorsChoice = field(default_factory=DistractorsChoice)
    tools: ToolsChoice = field(default_factory=ToolsChoice)
    dataroom: DataroomChoice = field(default_factory=DataroomChoice)
    questions: QuestionsChoice = field(default_factory=QuestionsChoice)
    grading: GradingConfig = field(default_factory=GradingConfig)
    sweep: SweepSettings = field(default_factory=SweepSettings)
    budget: int = 1
    budget_unit: str = "turns"
    token_metric: str = "total"
    force_budget: bool = True
    seed: int = 0
    epochs: int = 1  # repeats: every question runs with seeds seed+0..epochs-1, each its own run key, the conditions the same
    noise: float = 0.0  # distractor bytes as a multiple of the dataroom's (0, 1, 4, 16 ...)
    delivery: str = "inline"  # inline | file

    def run_config(self, epoch: int = 0) -> RunConfig:
        """The run config of repeat `epoch` (0..epochs-1): seed + epoch, and nothing else changed."""
        harness = HarnessConfig(**{**self.harness.__dict__, "budget": self.budget, "budget_unit": self.budget_unit,
                                   "token_metric": self.token_metric, "force_budget": self.force_budget, "delivery": self.delivery,
                                   "ask_confidence": self.harness.ask_confidence or self.grading.confidence})
        model = ModelConfig(**{**self.model.__dict__, "seed": self.seed + epoch})
        noise = NoiseConfig(ratio=self.noise, seed=self.distractors.seed, source=self.distractors.source)
        return RunConfig(model=model, harness=harness, retrieval=self.backend, limits=self.limits, index=self.index, noise=noise,
                         tools=self.tools.select).validate()


def _seeded(cfg: RunConfig, seed: int) -> RunConfig:
    """The same run config with another sampling seed (a repeat: epochs)."""
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seed=seed))


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="sweep_schema", node=SweepConfig)


def resolve_path(value: Optional[str]) -> Optional[Path]:
    """A config path as given, else relative to the project root (so configs work from any cwd)."""
    if not value:
        return None
    path = Path(value).expanduser()
    if path.exists() or path.is_absolute():
        return path
    alt = PROJECT_ROOT / path
    return alt if alt.exists() else path


# ---- axes and progress ---------------------------------------------------------------------
def axes_of(task_overrides: list[str], sc: SweepConfig) -> dict[str, Any]:
    """Axis columns: the standard axes always, plus every other key the job's overrides set (e.g. model.temperature)."""
    axes: dict[str, Any] = {
        "model": sc.model.name, "tools": _tools_label(sc.tools.select), "budget": sc.budget, "budget_unit": sc.budget_unit,
        "force_budget": sc.force_budget, "retriever": sc.backend.retriever, "backend": sc.backend.embedder,
        "dataroom": sc.dataroom.name, "questions": sc.questions.name, "noise": sc.noise, "delivery": sc.delivery,
    }
    groups = {"tools.select": "tools", "backend.retriever": "retriever", "backend.embedder": "backend", "model.name": "model",
              "dataroom.name": "dataroom", "questions.name": "questions"}
    named = {item.lstrip("+~").partition("=")[0] for item in task_overrides}
    for part in ("dataroom", "questions"):  # a path given without a name is labelled by its file, not the default's name
        path = getattr(sc, part).path
        if f"{part}.path" in named and f"{part}.name" not in named and path:
            axes[part] = Path(str(path)).name.rsplit(".", 1)[0] if Path(str(path)).suffix else Path(str(path)).name
    for item in task_overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key in axes or key in groups or key.startswith(("hydra", "sweep.")) or key in ("experiment", "epochs"):
            continue  # already a standard axis column (a group choice shows as its name)
        axes[key] = value
    return axes


def _tools_label(select: Any) -> str:
    if select is None:
        return "default"
    if isinstance(select, (list, tuple)):
        return ",".join(map(str, select)) or "none"
    return str(select) or "none"


def count_jobs(overrides: list[str]) -> int:
    """How many grid points a multirun's overrides expand to."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    total = 1
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.is_sweep_override():
            total *= max(1, sum(1 for _ in o.sweep_string_iterator()))
    return total


def swept_groups(overrides: list[str]) -> set[str]:
    """Top-level config groups the grid varies (`model=a,b` or `model.temperature=0,1`; a list value is no sweep)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return {o.key_or_group.split(".")[0].split("/")[0] for o in OverridesParser.create().parse_overrides(overrides) if o.is_sweep_override()}


class Progress:
    """One line per finished run: done/total of this launch (not of older runs in the directory), failures, ETA.

    Each job of a launch writes its run keys under `.launches/<launch id>/`, so a count can span jobs in other
    processes; runs found done count as done, runs another grid left in the directory do not. The ETA weights
    every run by the turns it is expected to take (the launch's plan.json, written by SweepCallback) and prices
    them at the launch's own pace, pooled over its jobs (each writes `<job>.pace`): runs of budget 1 and 30 no
    longer average into one pace per run. Each finished run also updates this machine's stored rate.
    """

    REFRESH_S = 2.0  # how often the key files and DONE markers are read again
    _told_first_estimate = False  # once per process: the estimate measured on the first run, when none was stored

    def __init__(self, sweep_dir: Path, job_num: int, keys: list[str], clock: Callable[[], float] = time.monotonic):
        from .plan import GridPoint

        self.clock = clock
        self.runs_root = sweep_dir / "runs"
        self.started = clock()
        self.finished_here = 0
        self.failed = 0
        self.job = job_num
        info = sweep_dir / "sweep.json"
        launch = json.loads(info.read_text()) if info.exists() else {}
        self.plans = sweep_dir / ".launches" / str(launch.get("launch", "single"))
        atomic_write(self.plans / f"{job_num}.keys", "\n".join(keys))
        plan: dict = {}
        with contextlib.suppress(OSError, ValueError):
            plan = json.loads((self.plans / "plan.json").read_text())
        self.plan = plan
        self.points = [GridPoint(**p) for p in plan.get("points") or []]
        self.weight_of = {p.job: p.weight for p in self.points}
        self.weight_of.setdefault(job_num, 1.0)  # a sweep without a plan (no multirun): every run weighs the same
        self.total = sum(p.runs for p in self.points) if self.points else launch.get("jobs", 1) * len(keys)
        exported = threads.exported()
        self.jobs_at_once = exported.jobs if exported else 1
        self.weight_here = 0.0
        self.done_by_job: dict[int, set[str]] = {}
        self.counted_at = -math.inf

    @property
    def done(self) -> set[str]:
        return set().union(*self.done_by_job.values()) if self.done_by_job else set()

    def count(self) -> int:
        from ..record import done

        if self.clock() - self.counted_at >= self.REFRESH_S:
            for f in self.plans.glob("*.keys"):
                if not f.stem.isdigit():
                    continue
                seen = self.done_by_job.setdefault(int(f.stem), set())
                seen |= {k for k in set(f.read_text().split()) - seen if done.is_done(self.runs_root / k)}
            self.counted_at = self.clock()
        return len(self.done)

    def weight_left(self) -> float:
        """The weight (expected turns and run overheads) of this launch's runs not done yet: jobs that started count
        their DONE markers, the others what the plan found done."""
        if not self.points:
            return max(0, self.total - len(self.done)) * self.weight_of[self.job]
        left = 0.0
        for p in self.points:
            done = len(self.done_by_job[p.job]) if p.job in self.done_by_job else (p.done or 0)
            left += p.weight * max(0, p.runs - done)
        return left

    def update(self, ok: bool, label: str, key: str) -> None:
        from ..humanize import duration
        from .plan import Load, Pace, eta_s, first_estimate, record_run, trace_speed

        self.finished_here += 1
        self.failed += 0 if ok else 1
        if ok:
            self.done_by_job.setdefault(self.job, set()).add(key)
            self.weight_here += self.weight_of[self.job]
            with contextlib.suppress(OSError, ValueError):  # the stored rate is a nicety: never cost the sweep a run
                record_run(json.loads((self.runs_root / key / "run_meta.json").read_text()), trace_speed(self.runs_root / key / "trace.jsonl"),
                           Load.now())
        with contextlib.suppress(OSError):
            atomic_write(self.plans / f"{self.job}.pace", json.dumps({"wall_s": self.clock() - self.started, "turns": self.weight_here}))
        paces = []
        for f in self.plans.glob("*.pace"):
            with contextlib.suppress(OSError, ValueError, TypeError):
                paces.append(Pace(**json.loads(f.read_text())))
        done = self.count()
        left = self.weight_left()
        seconds = eta_s(left, paces, self.jobs_at_once)
        eta = "0 s" if done >= self.total else "?" if seconds is None else duration(seconds)
        print(f"[sweep] {done}/{self.total} runs done, {self.failed} failed here, ETA {eta} | {label}", file=sys.stderr, flush=True)
        if self.points and not self.plan.get("priced") and not Progress._told_first_estimate and seconds is not None and done < self.total:
            Progress._told_first_estimate = True
            for line in first_estimate(self.points, left, paces, self.jobs_at_once, int(self.plan.get("questions") or 1)):
                print(f"[sweep] {line}", file=sys.stderr, flush=True)


# ---- one job -------------------------------------------------------------------------------
def uses_embedder(embedder: str, tools: Any) -> bool:
    """Whether runs embed in-process (retrieval tools with the local embedder): the thread plan asks."""
    from ..tools import select

    return embedder == "local" and any(s.tier != "builtin" for s in select(tools))


@contextlib.contextmanager
def job_endpoints(cfg: RunConfig, sc: SweepConfig, sweep_dir: Optional[Path] = None) -> Iterator[tuple[list[Optional[str]], threads.ThreadPlan]]:
    """The job's endpoints and thread plan: model.endpoints, else the one endpoint (model.endpoint, the sweep's
    embedded servers, $LLAMA_URL), else embedded servers started here (model.servers x model.parallel slots,
    planned for the load stored with the sweep: threads.sweep_load)."""
    base = threads.exported()  # the sweep's plan when it launched this job on this host
    cores = base.cores if base else (threads.ray_assigned_cores() or threads.available_cores())
    jobs = base.jobs if base else 1
    embeds = uses_embedder(cfg.retrieval.embedder, cfg.tools)
    if cfg.model.policy:
        yield [None], threads.plan(cores, sc.sweep.workers or 1, embeds, jobs=jobs, runs=sc.sweep.workers, server_local=False)
        return
    given = list(cfg.model.endpoints) or [u for u in [cfg.model.endpoint] if u]
    given = given or [u for u in os.environ.get(ENDPOINTS_ENV, "").split(",") if u] or [u for u in [os.environ.get("LLAMA_URL")] if u]
    if given:
        if base and base.server_threads is not None:  # the sweep's own servers: the plan they were started with
            p = dataclasses.replace(base, runs=sc.sweep.workers) if sc.sweep.workers else base
        else:
            from ..model import localserver

            beside = next((found for found in map(localserver.find, given) if found is not None), None)  # started by hand here
            p = threads.plan(cores, max(1, len(given) * cfg.model.parallel), embeds, jobs=jobs, runs=sc.sweep.workers, server_local=False,
                             local_server=beside)
        yield given, p
        return
    from ..model.llama import stop_servers

    p = embedded_plan(cfg.model, cores, embeds, jobs, sc.sweep.workers, threads.sweep_load(sweep_dir))
    servers = start_embedded(cfg.model, p)
    # In the job's own log (a Slurm job's, on its node): how it used its allocation.
    print(f"[sweep] this job's embedded llama-server at {', '.join(srv.url for srv in servers)} ({p.slots_per_server} slot(s) each); "
          f"threads: {p.describe()}", file=sys.stderr, flush=True)
    try:
        yield [srv.url for srv in servers], p
    finally:
        stop_servers(servers)


def embedded_plan(model: ModelConfig, cores: int, embeds: bool, jobs: int, workers: Optional[int], load: float = 0.0) -> threads.ThreadPlan:
    """The thread plan (and server layout) for the embedded default's model.servers x model.parallel slots, with
    `load` cores of other work on the machine (threads.sweep_load)."""
    from ..model.llama import GPU_LAYER_FLAGS, THREAD_FLAGS, find_server, server_devices

    binary = find_server(model.server_bin)
    gpu = bool(binary and server_devices(binary))
    # Threads set by hand, or weights not mmap'd (each process would hold its own copy): keep the asked layout.
    args = list(model.server_args)
    by_hand = any(a in (*THREAD_FLAGS, *GPU_LAYER_FLAGS, "--no-mmap", "--mlock") for a in args)
    p = threads.plan(cores, model.servers * model.parallel, embeds, servers=model.servers, jobs=jobs, runs=workers,
                     server_gpu=gpu, may_split=not by_hand, shared=threads.whole_machine(), load=load)
    given = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--threads")), None)
    if given is not None and given.lstrip("-").isdigit():  # model.server_args win: say so
        p = dataclasses.replace(p, server_threads=int(given), why=f"{p.why}; -t {given} from model.server_args")
    return p


def start_embedded(model: ModelConfig, p: threads.ThreadPlan) -> list:
    from ..model.llama import start_servers

    return start_servers(dataclasses.replace(model, parallel=p.slots_per_server), p.servers, p.server_threads)


@dataclass
class Outcome:
    question: Any
    meta: dict
    ok: bool
    endpoint: Optional[str]
    redone: int = 0
    key: str = ""


def _dispatch(todo: list, workers: int, attempt: Callable[..., Outcome], on_done: Callable[[Outcome], None],
              stop: threading.Event) -> None:
    """attempt(item) for every item on `workers` threads, on_done in this (the main) thread as each ends.

    One worker runs in this thread, so Ctrl-C reaches the run itself (stop reason `interrupted`). With more,
    Ctrl-C (or SIGTERM) sets `stop`: every run ends as `paused` at its next step, finished work is kept, and
    KeyboardInterrupt is raised once they have; a second Ctrl-C leaves at once (relaunch redoes the rest).
    """
    if workers <= 1:
        for item in todo:
            on_done(attempt(item))
        return
    items: queue.Queue = queue.Queue()
    for item in todo:
        items.put(item)
    results: queue.Queue = queue.Queue()

    def worker() -> None:
        while not stop.is_set():
            try:
                item = items.get_nowait()
            except queue.Empty:
                return
            try:
                results.put(attempt(item))
            except BaseException as exc:  # handed to the main thread, which stops the others
                results.put(exc)
                return

    pool = [threading.Thread(target=worker, daemon=True, name=f"sweep-run-{i}") for i in range(min(workers, len(todo)))]
    for t in pool:
        t.start()
    error: Optional[BaseException] = None
    pending = len(todo)
    try:
        while pending and any(t.is_alive() for t in pool) or not results.empty():
            try:
                got = results.get(timeout=0.5)
            except queue.Empty:
                continue
            pending -= 1
            if isinstance(got, BaseException):
                error = error or got
                stop.set()
                continue
            try:
                on_done(got)
            except BaseException as exc:  # Ctrl-C handled below; anything else stops the job the same way
                error = error or exc
                stop.set()
    except KeyboardInterrupt:
        stop.set()
        print("[sweep] interrupted: waiting for the runs in flight to stop at their next step (Ctrl-C again to leave now)",
              file=sys.stderr, flush=True)
        for t in pool:
            t.join()
        raise
    if error is not None:
        raise error


def prepare_index(cfg: RunConfig, dataroom: Path) -> None:
    """Build the index the job's runs search before its first run (not inside a run holding a model slot), in lines:
    what is built, progress every few seconds, how long it took. Nothing is said when it is already built. A build
    that fails (a dead embedding API) is said in one line and left to the runs, which stop as tool_error and are
    redone by the next launch, as before."""
    from ..retrieval.index.console import showing
    from ..run.index_ready import ensure

    try:
        with showing(Path(dataroom).name, prefix="[sweep]", tty=False):
            ensure(cfg, dataroom)
    except errors.SearchboxError as exc:
        print(f"[sweep] the index of {Path(dataroom).name} could not be built before the runs ({exc}); the runs that search "
              "will try again and record why", file=sys.stderr, flush=True)


def run_job(sc: SweepConfig, sweep_dir: Path, task_overrides: list[str], job_num: int = 0) -> dict:
    """Run every question under this grid point on the job's endpoint pool; return counts.

    job_num spreads jobs running at once over a shared pool: each starts with a different endpoint first
    (the pools of separate processes cannot see each other's load)."""
    from ..harness.agent import INFRA_STOPS
    from ..record import done
    from ..record.collect import DONE, collect, write
    from ..corpus.dataroom import builtin_dataroom, remove_tree
    from ..grading import Judge, grade, load_questions
    from ..config import resolved_today
    from ..run.identity import dataroom_identity, resolve, resolved_protocol, with_limits
    from ..model.llm import ChatClient
    from ..model.pool import open_pool
    from ..model.served import model_label
    from ..record.record import Gold, update_grades
    from ..record.stale import gold_changed
    from .. import harness as harnesses
    from ..run.runner import RunInfo, execute
    from ..tools import select
    from .unfinished import JobNotes
    from .heartbeat import Heartbeat

    cfg = sc.run_config()
    if sc.epochs < 1:
        raise ConfigError(f"epochs={sc.epochs}: must be >= 1 (the runs of each question, seeds seed+0..epochs-1)")
    select(cfg.tools)  # unknown tool names fail before any run
    harnesses.load(cfg.harness.kind).check(cfg)  # so does a harness that cannot run here
    if cfg.model.servers < 1 or cfg.model.parallel < 1 or (sc.sweep.workers is not None and sc.sweep.workers < 1):
        raise ConfigError("model.servers, model.parallel and sweep.workers must be >= 1")
    if not sc.sweep.heartbeat_s > 0:
        raise ConfigError(f"sweep.heartbeat_s={sc.sweep.heartbeat_s}: must be > 0 (seconds between heartbeat lines)")
    dataroom = resolve_path(sc.dataroom.path) or builtin_dataroom()
    qpath = resolve_path(sc.questions.path) or Path(__file__).resolve().parents[1] / "builtin" / "questions.jsonl"
    questions = load_questions(qpath, sc.questions.limit, sc.questions.ids)
    from ..datasets.check import require

    require(questions, dataroom, qpath)  # a gold file name that resolves nowhere fails here, in one line, before any run
    data_id = dataroom_identity(dataroom, cfg.limits)  # limits.* overrides hold from the first look at the corpus
    axes = axes_of(task_overrides, sc)
    runs_root = sweep_dir / "runs"
    runs_root.mkdir(parents=True, exist_ok=True)
    counts = {"done": 0, "skipped": 0, "failed": 0, "redone": 0, "regraded": 0}
    last_collect = [time.monotonic()]
    stop = threading.Event()
    with job_endpoints(cfg, sc, sweep_dir) as (urls, plan):
        # What serves this job is part of every run key: another model behind the same URL is another run.
        # Every endpoint of a pool must serve the same model (open_pool refuses a mixed one).
        first = job_num % len(urls)
        pool, served = open_pool(urls[first:] + urls[:first], cfg, cfg.model.parallel)
        axes["model"] = model_label(cfg, served)  # the served model's id where model.name is only a preset's
        cfg.harness.today = resolved_today(cfg.harness)  # every run of the job says (and is keyed by) one date, past midnight too
        probe_client = ChatClient(cfg.model, pool.live[0].url) if pool.live[0].url else None
        protocol = resolved_protocol(cfg, probe_client)
        got, _ = with_limits(cfg, probe_client)  # keyed by the window and max_tokens the server really gives (execute redoes it)
        todo, keys, specs, cfgs = [], [], {}, {}
        regrades: list = []  # (question, key) of done runs whose question's gold changed since they were graded
        for epoch in range(sc.epochs):  # repeats: the seed moves, so does the key (epoch 0 is the run without epochs)
            cfg_e, got_e = (cfg, got) if epoch == 0 else (_seeded(cfg, sc.seed + epoch), _seeded(got, sc.seed + epoch))
            for q in questions:
                spec = resolve(got_e, q.id, q.question, data_id, served, protocol=protocol, gold=q)  # the run uses this very object
                key = spec.key
                keys.append(key)
                specs[key], cfgs[key] = spec, cfg_e
                why = done.check(runs_root / key)
                if why is None:
                    counts["skipped"] += 1
                    if gold_changed(done.read_record(runs_root / key).grades, q.gold_hash, " | ".join(q.golds)):
                        regrades.append((q, key))  # done, but graded against a gold the file no longer holds
                else:
                    if done.marked(runs_root / key):  # a DONE marker beside a damaged record: no result, so it is redone
                        print(f"[sweep] {q.id}: run {key} is damaged ({why}); redoing it", file=sys.stderr, flush=True)
                    todo.append((q, key))
        if todo:  # before the pace clock starts, on every core while the model idles, before the thread plan applies
            prepare_index(cfg, dataroom)
        progress = Progress(sweep_dir, job_num, keys)
        planned = next((p.seconds for p in progress.points if p.job == job_num), None)
        beat = Heartbeat(planned, status=lambda: f"{progress.count()}/{progress.total} runs done", every_s=sc.sweep.heartbeat_s)
        notes = JobNotes(progress.plans, job_num, {key: q.id for q, key in zip(questions * sc.epochs, keys)})
        if not todo and not regrades:
            return counts
        if todo:
            if sc.sweep.workers is None and pool.total_slots != len(urls) * cfg.model.parallel:
                plan = dataclasses.replace(plan, runs=max(1, math.ceil(pool.total_slots / plan.jobs)))  # slots as the servers report them
            threads.apply(plan)
            workers = min(plan.runs, len(todo))
            if workers > 1 or len(pool.endpoints) > 1:
                print(f"[sweep] {workers} runs in flight on {pool.total_slots} slot(s) of {len(pool.live)} endpoint(s); threads: {plan.describe()}",
                      file=sys.stderr, flush=True)
        judge = None
        if sc.grading.judge:  # asks the judge's endpoint what it serves now, so a wrong one fails before any run
            judge = Judge.connect(sc.grading.judge_endpoint or pool.live[0].url, sc.grading.judge_model or cfg.model.model, base=cfg.model)
        from ..grading.judges import connect as connect_judges

        judge_set = connect_judges(list(sc.grading.judges or []), cfg.model)  # each endpoint asked what it serves, before any run
        for q, key in regrades:  # a done run is kept, but never with the grade of an old gold: regraded as the run was graded
            with sweepdir.claim_run(runs_root, key):  # one job of a launch at a time; the next finds it regraded
                if gold_changed(done.read_record(runs_root / key).grades, q.gold_hash, " | ".join(q.golds)):
                    update_grades(runs_root / key, grade(runs_root / key, q, judge, judge_set))
                    counts["regraded"] += 1
                    print(f"[sweep] {q.id}: run {key} was graded against another gold than {qpath} now holds; regraded",
                          file=sys.stderr, flush=True)
        if not todo:
            write(sweep_dir, *collect([sweep_dir]))
            return counts

        def attempt(item) -> Outcome:
            q, key = item
            # One process per run (sweepdir): jobs whose grid points give the same key wait for each other.
            with sweepdir.claim_run(runs_root, key, give_up=stop.is_set) as mine:
                if not mine:
                    return Outcome(q, {"stop_reason": "paused"}, False, None, 0, key)
                if done.is_done(runs_root / key):  # the other one finished it meanwhile
                    return Outcome(q, done.read_record(runs_root / key).to_dict(), True, None, 0, key)
                try:
                    return run_claimed(q, key)
                except OSError as exc:  # a full disk: the run records its stop where it can; the sweep ends in one line
                    if not sweepdir.is_disk_full(exc):
                        raise
                    raise sweepdir.record_disk_full(runs_root / f".tmp-{key}-{os.getpid()}", exc) from None

        def run_claimed(q, key) -> Outcome:
            beat.started(key, f"{q.id} {axes['tools']} budget={axes['budget']}")
            counted = False
            try:
                out = _run_claimed(q, key)
                counted = out.ok
                return out
            finally:
                beat.finished(key, counted)

        def _run_claimed(q, key) -> Outcome:
            final = runs_root / key
            tmp = runs_root / f".tmp-{key}-{os.getpid()}"
            info = RunInfo(run_id=key, question_id=q.id, question_type=q.type, questions_path=str(qpath.resolve()),
                           gold=Gold(q.answer, list(q.aliases), list(q.gold_files), q.type), axes=axes, sweep=sc.sweep.name,
                           spec=specs[key])
            redone = 0
            while True:
                ep = pool.acquire()  # PoolExhausted when every endpoint was taken out
                info.slot = ep.slot  # the run is pinned to this llama-server slot, erased before its first request
                try:
                    for stale in [final, *sweepdir.leftovers(runs_root, key)]:
                        if os.path.lexists(stale):  # unfinished, damaged, or a link in its place (ours alone to remove: claimed): redo it
                            remove_tree(stale)
                    meta = execute(cfgs[key], q.question, dataroom, tmp, ep.url, info=info,
                                   should_pause=lambda: stop.is_set() or (tmp / "PAUSE").exists())
                finally:
                    pool.release(ep)
                # A run cut off by its endpoint's death is no result: redo it on a live endpoint, now.
                if meta["stop_reason"] == "model_error" and not stop.is_set() and not pool.check(ep):
                    redone += 1
                    print(f"[sweep] {q.id}: endpoint {ep.url} died under it; redoing it on another endpoint", file=sys.stderr, flush=True)
                    continue
                break
            ok = meta["stop_reason"] not in INFRA_STOPS
            if ok:
                grades = grade(tmp, q, judge, judge_set)
                update_grades(tmp, grades)
                (tmp / DONE).write_text(meta["stop_reason"])
                os.replace(tmp, final)
            return Outcome(q, meta, ok, ep.url, redone, key)

        def on_done(out: Outcome) -> None:
            counts["done" if out.ok else "failed"] += 1
            counts["redone"] += out.redone
            where = f" @ {out.endpoint}" if len(pool.endpoints) > 1 else ""
            progress.update(out.ok, f"{out.question.id} {axes['tools']} budget={axes['budget']}: {out.meta['stop_reason']}{where}", out.key)
            if not out.ok:  # no result: listed at the end of the sweep with its reason, redone by the next launch
                notes.note(out.question.id, out.key, f"tools={axes['tools']} budget={axes['budget']}", out.meta["stop_reason"],
                           out.meta.get("stop_detail") or "")
            if out.meta["stop_reason"] == "interrupted":
                raise KeyboardInterrupt  # Ctrl-C stops the sweep, not just this run; finished runs are kept
            if time.monotonic() - last_collect[0] > COLLECT_EVERY_S:
                write(sweep_dir, *collect([sweep_dir]))
                last_collect[0] = time.monotonic()

        try:
            with beat:
                _dispatch(todo, workers, attempt, on_done, stop)
        finally:
            write(sweep_dir, *collect([sweep_dir]))
    return counts


# ---- Hydra entry points ----------------------------------------------------------------------
def _task(cfg) -> dict:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    hc = HydraConfig.get()
    sc: SweepConfig = OmegaConf.to_object(cfg)
    multirun = hc.mode.name == "MULTIRUN"
    sweep_dir = Path(hc.sweep.dir if multirun else hc.run.dir)
    if not sweep_dir.is_absolute():  # a launcher's worker (Ray) may start elsewhere: relative to where the sweep was launched
        sweep_dir = Path(hc.runtime.cwd) / sweep_dir
    logging.getLogger("httpx").setLevel(logging.WARNING)  # again here: launchers' workers configure logging afresh
    # A multirun's launcher holds the sweep directory for all its jobs (SweepCallback); a single run holds it itself.
    lock = None if multirun else sweepdir.hold_launch(sweep_dir)
    try:
        counts = run_job(sc, sweep_dir, list(hc.overrides.task), int(hc.job.num) if multirun else 0)
    finally:
        if lock is not None:
            lock.release()
    if not multirun:  # one job, no multirun end: say here what did not finish, and exit so
        from .unfinished import report

        code = report(sweep_dir, jobs=[0])
        if code:
            raise SystemExit(code)
    return counts


try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # hydra missing: the module still imports for the schema
    _Callback = object  # type: ignore[assignment,misc]


def launcher_jobs(launcher, n_jobs: int, cores: int) -> Optional[int]:
    """How many of the sweep's jobs run at once on this host, from the launcher config; None when they run on
    other hosts (Slurm, a Ray cluster by address), where each job plans for its own node."""
    target = str(launcher.get("_target_", "")) if launcher is not None else ""
    if "SlurmLauncher" in target:
        return None
    if "RayLauncher" in target:
        ray = launcher.get("ray") or {}
        init = ray.get("init") or {}
        if init.get("address") not in (None, "", "local"):
            return None
        per_task = float((ray.get("remote") or {}).get("num_cpus") or 1)
        return max(1, min(n_jobs, int((init.get("num_cpus") or cores) // per_task)))
    if "JoblibLauncher" in target:
        n = int(launcher.get("n_jobs") or 1)
        return max(1, min(n_jobs, n if n > 0 else max(1, cores + 1 + n)))  # joblib: -1 = all cores, -2 = all but one
    if "LocalLauncher" in target:  # submitit's local executor starts every job at once
        return max(1, n_jobs)
    return 1


def job_inputs(sc: SweepConfig) -> tuple[Path, Path]:
    """A job's dataroom and question file (the packaged ones unless the config names others)."""
    from ..corpus.dataroom import builtin_dataroom

    dataroom = resolve_path(sc.dataroom.path) or builtin_dataroom()
    return dataroom, resolve_path(sc.questions.path) or Path(__file__).resolve().parents[1] / "builtin" / "questions.jsonl"


def sweep_grid(config) -> list[str]:
    """The multirun's overrides: sweeper params from the config (experiments), overridden by the command line."""
    from omegaconf import OmegaConf

    params = config.hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
    grid = {k: f"{k}={v}" for k, v in params.items()}
    grid.update({o.split("=")[0]: o for o in config.hydra.overrides.task})
    return list(grid.values())


def announce_plan(config, sweep_dir: Path) -> list[str]:
    """The sweep's plan: every job's config composed as Hydra will compose it, its runs keyed as run_job keys them
    (those already DONE counted), each weighted by its expected turns and priced at this machine's stored rate.
    Writes .launches/<launch>/plan.json for the jobs' ETA; returns the lines to print."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf, open_dict

    from ..record.done import is_done
    from ..grading import load_questions
    from ..run.identity import dataroom_identity, run_key, with_limits
    from .plan import OVERHEAD_TURNS, GridPoint, describe, expected_load, expected_turns, load_rate, plan_record, run_s

    overrides = sweep_grid(config)
    parsed = OverridesParser.create().parse_overrides(overrides)
    swept = {o.key_or_group: [str(v) for v in o.sweep_string_iterator()] for o in parsed if o.is_sweep_override()}
    fixed = [o.input_line for o in parsed if not o.is_sweep_override() and not o.key_or_group.startswith(("hydra", "sweep."))]
    jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    loader = GlobalHydra.instance().config_loader()
    composed: list[SweepConfig] = []
    for job in jobs:
        job_cfg = loader.load_sweep_config(config, list(job))
        with open_dict(job_cfg):
            del job_cfg["hydra"]
        composed.append(OmegaConf.to_object(job_cfg))
    served_by: dict[Any, Any] = {}
    server_slots = 0
    points = []
    rates: dict[str, Any] = {}  # "<model>, tools=<tier>": the stored rate that priced its points
    questions_n = measured = 0
    exported = threads.exported()
    contention = expected_load(exported).contention  # stored rates are a quiet machine's: priced for the load to come
    for num, (job, sc) in enumerate(zip(jobs, composed)):
        dataroom, qpath = job_inputs(sc)
        questions = load_questions(qpath, sc.questions.limit, sc.questions.ids)
        questions_n = max(questions_n, len(questions))
        cfg = sc.run_config()
        found = _served_for(cfg, served_by)
        done = None
        if found is not None:
            served, protocol, client = found
            got, limits = with_limits(cfg, client)  # keyed as the job will key it: by the limits the server gives
            data_id = dataroom_identity(dataroom, cfg.limits)
            done = sum(is_done(sweep_dir / "runs" / run_key(_seeded(got, sc.seed + e), q.id, q.question, data_id, served, protocol=protocol, gold=q))
                       for e in range(sc.epochs) for q in questions)
            if limits.get("slots") and sc.sweep.workers is None:  # the job runs one per slot the server reports
                server_slots = max(server_slots, limits["slots"])
        levels = dict(o.split("=", 1) for o in job if "=" in o and o.split("=")[0] in swept)
        label = " ".join(f"{k}={v}" for k, v in levels.items()) or "(one grid point)"
        tier = _tools_label(sc.tools.select)
        rate = load_rate(sc.model.name, tier, sc.harness.kind)  # this machine's, for the model, harness and tool tier
        rate = rate.priced_at(contention) if rate else None
        priced_by = f"{sc.model.name}, tools={tier}" + (f", harness={sc.harness.kind}" if sc.harness.kind != "native" else "")
        if rate:
            rates[priced_by] = rate
        turns = expected_turns(sc.budget, sc.budget_unit, sc.force_budget, sc.harness.max_turns, sc.token_metric,
                               rate.tokens_per_turn if rate else None)
        points.append(GridPoint(num, label, len(questions) * sc.epochs, done, turns, rate.overhead_turns if rate else OVERHEAD_TURNS,
                                run_s(turns, rate) if rate else None, levels, priced_by if rate else ""))
        measured = max(measured, rate.runs if rate else 0)
    if any(p.seconds is None for p in points):  # one unit for every weight: turns, until every point is priced
        points = [dataclasses.replace(p, seconds=None) for p in points]
    in_flight = exported.in_flight if exported else 1
    in_flight = max(in_flight, server_slots)  # a server started by hand with -np 4 runs 4 at once, whatever the plan assumed
    info = json.loads((sweep_dir / "sweep.json").read_text())
    atomic_write(sweep_dir / ".launches" / str(info["launch"]) / "plan.json",
                 json.dumps(plan_record(points, swept, questions_n, in_flight, measured), indent=2))
    lines = describe(points, swept, questions_n, in_flight, fixed, measured, epochs=composed[0].epochs if composed else 1, rates=rates)
    return lines + _power_lines(composed, swept, questions_n, sweep_dir)


def _power_lines(composed: list[SweepConfig], swept: dict[str, list[str]], questions: int, sweep_dir: Path) -> list[str]:
    """The plan's power lines (sweep/power.py): the difference the design's paired comparisons can detect, with the
    discordance of finished runs in this sweep directory when there are any."""
    import pandas as pd

    from .power import describe as describe_power, plan_design, settings_problem

    if not composed:
        return []
    settings = composed[0].sweep
    width = max([len(k) for k in swept] + [6])
    problem = settings_problem(settings.alpha, settings.target_effect, settings.discordance)
    if problem:  # the power lines only inform: the rest of the plan stands, and the sweep runs
        return [f"  {'power':<{width}}  not computed: {problem}"]
    pilot = None
    with contextlib.suppress(OSError, ValueError, ImportError):
        if (sweep_dir / "runs.parquet").exists():
            pilot = pd.read_parquet(sweep_dir / "runs.parquet")
    design = plan_design(swept, questions, composed[0].epochs, settings.alpha, settings.discordance, pilot)
    lines = [f"  {'power':<{width}}  one arm: no paired comparison to power"] if design is None else describe_power(design, settings.target_effect, width)
    fixed = [sc for sc in composed if sc.model.policy or not sc.model.temperature]
    if composed[0].epochs > 1 and fixed:  # each repeat is its own key and costs a run; greedy decoding repeats itself
        lines.append(f"  {'epochs':<{width}}  {len(fixed)} of {len(composed)} grid point(s) decode greedily (temperature 0 or a "
                     f"control): their {composed[0].epochs} repeats are expected identical (repeat variance 0), a check of determinism")
    return lines


def _served_for(cfg: RunConfig, cache: dict):
    """What will serve a job, the tool protocol it will speak and the client that asked (for its limits), as the job
    will find them (None when its server starts only with the job, or does not answer now)."""
    from ..model.served import served_identity
    from ..run.identity import resolved_protocol
    from ..model.llm import ChatClient
    from ..model.pool import probe

    if cfg.model.policy:
        return served_identity(None, cfg, None), resolved_protocol(cfg), None
    given = list(cfg.model.endpoints) or [u for u in [cfg.model.endpoint] if u]
    given = given or [u for u in os.environ.get(ENDPOINTS_ENV, "").split(",") if u] or [u for u in [os.environ.get("LLAMA_URL")] if u]
    if not given:
        return None
    url = given[0]
    if (url, cfg.model.model, cfg.model.protocol) not in cache:
        client = ChatClient(cfg.model, url)
        cache[(url, cfg.model.model, cfg.model.protocol)] = (
            None if probe(url) is not None else (served_identity(client, cfg, url), resolved_protocol(cfg, client), client))
    return cache[(url, cfg.model.model, cfg.model.protocol)]


class SweepCallback(_Callback):
    """Plans the threads of a multirun, shares its embedded llama-server(s) across the jobs, writes the final tables."""

    def __init__(self) -> None:
        self.servers: list = []
        self.exported: list[str] = []

    def __getstate__(self) -> dict:
        # Ray and submitit pickle the callbacks with every job: the server processes (and the lock) stay with the sweep.
        return {"servers": [], "exported": [], "lock": None}

    def _export(self, name: str, value: str) -> None:
        os.environ[name] = value  # jobs (local launchers' workers, started later) inherit it
        self.exported.append(name)

    def on_multirun_start(self, config, **kwargs) -> None:
        # Hydra only warns when a callback raises and goes on: a refusal here is one line and SystemExit.
        try:  # the sweep directory is this launch's until its jobs end (sweepdir); a second launch into it refuses
            self.lock = sweepdir.hold_launch(Path(config.hydra.sweep.dir))
        except errors.SearchboxError as exc:
            sweepdir.refuse(exc)
        try:
            self._start(config)
        except Exception as exc:
            if not sweepdir.is_disk_full(exc):
                raise
            sweepdir.refuse(errors.DiskFull.of(exc, config.hydra.sweep.dir))
        self._announce_plan(config)

    def _announce_plan(self, config) -> None:
        """Print the plan before the first run (grid, runs done and to go, the estimate) and store it for the jobs'
        progress lines. A plan that cannot be made is said in one line; the sweep goes on without it."""
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            lines = announce_plan(config, sweep_dir)
        except errors.DataroomError as exc:  # a refused corpus: every run would be refused too, so say it once and stop
            sweepdir.refuse(exc)
        except Exception as exc:  # the plan informs; it must never stop a sweep that would run
            lines = [f"plan: not available ({type(exc).__name__}: {exc})"]
        for line in lines:
            print(f"[sweep] {line}", file=sys.stderr, flush=True)

    def _start(self, config) -> None:
        from omegaconf import OmegaConf

        overrides = sweep_grid(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        n_jobs = count_jobs(overrides)
        (sweep_dir / "sweep.json").write_text(json.dumps({"jobs": n_jobs, "overrides": overrides, "launch": uuid.uuid4().hex[:12],
                                                          "started_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
        cores = threads.available_cores()
        jobs_here = launcher_jobs(config.hydra.get("launcher"), n_jobs, cores)
        if jobs_here is None:
            return  # the jobs run elsewhere: each starts its own server (or uses model.endpoints) and plans its own node
        model_cfg = ModelConfig(**OmegaConf.to_container(config.model, resolve=True))
        swept = swept_groups(overrides)
        tools = OmegaConf.to_container(config.tools, resolve=True).get("select")
        embeds = bool(swept & {"tools", "backend"}) or uses_embedder(config.backend.embedder, tools)
        workers = config.sweep.get("workers")
        external = bool(os.environ.get("LLAMA_URL") or model_cfg.endpoint or model_cfg.endpoints)
        if external or model_cfg.policy or "model" in swept:
            p = threads.plan(cores, max(1, len(model_cfg.endpoints)) * model_cfg.parallel, embeds, jobs=jobs_here, runs=workers,
                             server_local=False)
            self._export(threads.PLAN_ENV, p.to_env())
            return
        p = embedded_plan(model_cfg, cores, embeds, jobs_here, workers, threads.sweep_load(sweep_dir))
        self.servers = start_embedded(model_cfg, p)
        self._export(threads.PLAN_ENV, p.to_env())
        self._export(ENDPOINTS_ENV, ",".join(srv.url for srv in self.servers))
        self._export("LLAMA_URL", self.servers[0].url)
        print(f"[sweep] embedded llama-server at {', '.join(srv.url for srv in self.servers)} ({p.slots_per_server} slot(s) each); "
              f"threads: {p.describe()}", file=sys.stderr, flush=True)

    def on_multirun_end(self, config, **kwargs) -> None:
        from ..record.collect import collect, write
        from ..model.llama import stop_servers

        from .unfinished import report

        code = 0
        try:
            sweep_dir = Path(config.hydra.sweep.dir)
            left_out: list[str] = []
            runs, turns, calls = collect([sweep_dir], left_out)
            for line in left_out:
                print(f"[sweep] {line}", file=sys.stderr)
            write(sweep_dir, runs, turns, calls)
            print(f"[sweep] {len(runs)} runs -> {sweep_dir}/runs.parquet", file=sys.stderr)
            code = report(sweep_dir)  # every run of this launch that did not finish, with its reason
        finally:
            stop_servers(self.servers)
            self.servers = []
            for name in self.exported:
                os.environ.pop(name, None)
            self.exported = []
            if getattr(self, "lock", None) is not None:
                self.lock.release()
                self.lock = None
        if code:
            raise SystemExit(code)  # Hydra passes it through (callbacks swallow only Exception): the sweep is incomplete


def main() -> None:
    import hydra

    from ..errors import sigterm_as_interrupt

    threads.preset_blas_env()  # before numpy loads here and in every process the launchers start
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # Ray would fold the jobs' progress lines into "[repeated 3x]"
    register_schema()
    sigterm_as_interrupt()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown the progress lines

    from .. import knobs

    try:  # $SEARCHBOX_TOOLS, $TURN_BUDGET ...: the overrides they stand for, where the command line sets none
        sys.argv[1:] = knobs.with_overrides(sys.argv[1:])
    except errors.ConfigError as exc:
        print(f"searchbox: {exc}", file=sys.stderr)
        raise SystemExit(2) from None

    @hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")
    @errors.task
    def entry(cfg) -> Optional[dict]:
        return _task(cfg)

    entry()


if __name__ == "__main__":
    main()
