"""Hydra sweeps: `python -m searchbox.sweep -m tools=high,low,none budget=1,10,30`.

Each Hydra job is one grid point and runs every question of the question set into
<sweep>/runs/<run key>/, skipping runs that already finished. Runs are written under a temporary
name and renamed when complete (with their grades), so a killed sweep loses nothing finished and a
relaunch redoes only what did not finish. After every run the sweep tables are re-collected.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .collect import run_dirs
from .config import DataroomLimits, HarnessConfig, IndexConfig, ModelConfig, NoiseConfig, RetrievalConfig, RunConfig
from .errors import SearchboxError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = PROJECT_ROOT / "conf"
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


@dataclass
class DistractorsChoice:
    seed: int = 0  # which distractors the noise axis draws
    source: Optional[str] = None  # zip or folder; null = the packaged distractor corpus


@dataclass
class SweepSettings:
    name: str = "default"
    root: str = "outputs/sweeps"


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
    noise: float = 0.0  # distractor bytes as a multiple of the dataroom's (0, 1, 4, 16 ...)
    delivery: str = "inline"  # inline | file

    def run_config(self) -> RunConfig:
        harness = HarnessConfig(**{**self.harness.__dict__, "budget": self.budget, "budget_unit": self.budget_unit,
                                   "token_metric": self.token_metric, "force_budget": self.force_budget, "delivery": self.delivery})
        model = ModelConfig(**{**self.model.__dict__, "seed": self.seed})
        noise = NoiseConfig(ratio=self.noise, seed=self.distractors.seed, source=self.distractors.source)
        return RunConfig(model=model, harness=harness, retrieval=self.backend, limits=self.limits, index=self.index, noise=noise,
                         tools=self.tools.select).validate()


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
    for item in task_overrides:
        key, _, value = item.lstrip("+~").partition("=")
        if key in axes or key in groups or key.startswith(("hydra", "sweep.")) or key == "experiment":
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


class Progress:
    """One line per finished run: done/total, failures, ETA from this process's pace."""

    def __init__(self, sweep_dir: Path, job_questions: int):
        self.sweep_dir = sweep_dir
        self.started = time.monotonic()
        self.finished_here = 0
        self.failed = 0
        info = sweep_dir / "sweep.json"
        jobs = json.loads(info.read_text()).get("jobs", 1) if info.exists() else 1
        self.total = jobs * job_questions

    def update(self, ok: bool, label: str) -> None:
        self.finished_here += 1
        self.failed += 0 if ok else 1
        done = len(run_dirs([self.sweep_dir]))
        pace = (time.monotonic() - self.started) / self.finished_here
        remaining = max(0, self.total - done)
        eta = time.strftime("%H:%M:%S", time.gmtime(pace * remaining)) if remaining else "0:00:00"
        print(f"[sweep] {done}/{self.total} runs done, {self.failed} failed here, ETA {eta} | {label}", file=sys.stderr, flush=True)


# ---- one job -------------------------------------------------------------------------------
def run_job(sc: SweepConfig, sweep_dir: Path, task_overrides: list[str]) -> dict:
    """Run every question under this grid point; return counts."""
    from .agent import INFRA_STOPS
    from .collect import DONE, collect, write
    from .dataroom import builtin_dataroom, make_writable
    from .grading import Judge, grade, load_questions
    from .identity import dataroom_identity, run_key, served_identity
    from .llm import ChatClient
    from .record import Gold, update_grades
    from .run import RunInfo, endpoint_for, execute
    from .tools import select

    cfg = sc.run_config()
    select(cfg.tools)  # unknown tool names fail before any run
    dataroom = resolve_path(sc.dataroom.path) or builtin_dataroom()
    qpath = resolve_path(sc.questions.path) or Path(__file__).parent / "builtin" / "questions.jsonl"
    questions = load_questions(qpath, sc.questions.limit, sc.questions.ids)
    data_id = dataroom_identity(dataroom)
    axes = axes_of(task_overrides, sc)
    runs_root = sweep_dir / "runs"
    runs_root.mkdir(parents=True, exist_ok=True)
    progress = Progress(sweep_dir, len(questions))
    counts = {"done": 0, "skipped": 0, "failed": 0}
    last_collect = time.monotonic()
    with endpoint_for(cfg) as url:
        # What serves this job is part of every run key: another model behind the same URL is another run.
        served = served_identity(ChatClient(cfg.model, url) if url else None, cfg, url)
        todo = []
        for q in questions:
            key = run_key(cfg, q.id, q.question, data_id, served)
            if (runs_root / key / DONE).exists():
                counts["skipped"] += 1
            else:
                todo.append((q, key))
        if not todo:
            return counts
        judge = None
        if sc.grading.judge:
            jcfg = ModelConfig(**{**cfg.model.__dict__, "model": sc.grading.judge_model or cfg.model.model})
            judge = Judge(ChatClient(jcfg, sc.grading.judge_endpoint or url), jcfg.model or jcfg.name)
        for q, key in todo:
            final = runs_root / key
            tmp = runs_root / f".tmp-{key}-{os.getpid()}"
            for stale in [final, *runs_root.glob(f".tmp-{key}-*")]:
                if stale.exists():  # an unfinished attempt: redo it from scratch
                    make_writable(stale)
                    shutil.rmtree(stale, ignore_errors=True)
            info = RunInfo(run_id=key, question_id=q.id, question_type=q.type, questions_path=str(qpath.resolve()),
                           gold=Gold(q.answer, list(q.aliases), list(q.gold_files), q.type), axes=axes, sweep=sc.sweep.name)
            meta = execute(cfg, q.question, dataroom, tmp, url, info=info)
            ok = meta["stop_reason"] not in INFRA_STOPS
            if ok:
                grades = grade(tmp, q, judge)
                update_grades(tmp, {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in grades.items()})
                (tmp / DONE).write_text(meta["stop_reason"])
                os.replace(tmp, final)
                counts["done"] += 1
            else:
                counts["failed"] += 1
            progress.update(ok, f"{q.id} {axes['tools']} budget={axes['budget']}: {meta['stop_reason']}")
            if meta["stop_reason"] == "interrupted":
                raise KeyboardInterrupt  # Ctrl-C stops the sweep, not just this run; finished runs are kept
            if time.monotonic() - last_collect > COLLECT_EVERY_S:
                write(sweep_dir, *collect([sweep_dir]))
                last_collect = time.monotonic()
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
    return run_job(sc, sweep_dir, list(hc.overrides.task))


try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # hydra missing: the module still imports for the schema
    _Callback = object  # type: ignore[assignment,misc]


class SweepCallback(_Callback):
    """Shares one embedded llama-server across a multirun and writes the final tables."""

    def __init__(self) -> None:
        self.server = None

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from .llama import LlamaServer

        # The grid: sweeper params from the config (experiments), overridden by the command line.
        params = config.hydra.sweeper.get("params")
        params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
        grid = {k: f"{k}={v}" for k, v in params.items()}
        grid.update({o.split("=")[0]: o for o in config.hydra.overrides.task})
        overrides = list(grid.values())
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / "sweep.json").write_text(json.dumps({"jobs": count_jobs(overrides), "overrides": overrides,
                                                          "started_at": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
        model_swept = any(o.split("=")[0].lstrip("+~").startswith("model") for o in overrides if "," in o)
        if os.environ.get("LLAMA_URL") or config.model.endpoint or config.model.get("policy") or model_swept:
            return
        model_cfg = ModelConfig(**OmegaConf.to_container(config.model, resolve=True))
        self.server = LlamaServer.from_config(model_cfg).start()
        os.environ["LLAMA_URL"] = self.server.url  # jobs (and joblib workers started later) inherit it
        print(f"[sweep] embedded llama-server at {self.server.url} ({model_cfg.parallel} slots)", file=sys.stderr)

    def on_multirun_end(self, config, **kwargs) -> None:
        from .collect import collect, write

        try:
            sweep_dir = Path(config.hydra.sweep.dir)
            runs, turns, calls = collect([sweep_dir])
            write(sweep_dir, runs, turns, calls)
            print(f"[sweep] {len(runs)} runs -> {sweep_dir}/runs.parquet", file=sys.stderr)
        finally:
            if self.server is not None:
                self.server.stop()
                os.environ.pop("LLAMA_URL", None)


def main() -> None:
    import hydra

    from .run import sigterm_as_interrupt

    register_schema()
    sigterm_as_interrupt()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown the progress lines

    @hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")
    def entry(cfg) -> Optional[dict]:
        try:
            return _task(cfg)
        except SearchboxError as exc:
            print(f"searchbox: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    entry()


if __name__ == "__main__":
    main()
