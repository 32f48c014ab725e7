"""Hydra sweeps of the scout evaluator: `python -m searchbox.scout.sweep -m policy=keyword,model budget=2,4`.

Each Hydra job is one grid point (policy x model x budget x ...): it evaluates the task set into
<sweep>/<policy>-<model>-b<budget>/ (runs/<task>/ with the usual run artifacts, tasks.parquet,
summary.json, summary.md). When the multirun ends, the callback stacks every job's rows into
<sweep>/tasks.parquet and writes <sweep>/summary.json and summary.md, one line per grid point.
One embedded llama-server is shared by all jobs unless an endpoint is given or the model is swept.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..config import ModelConfig
from .. import errors
from .config import ExecutorLimits, ScoutConfig, scout_model

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_ROOT / "conf"


@dataclass
class ScoutSweepSettings:
    name: str = "scout"
    root: str = "outputs/sweeps"


@dataclass
class ScoutSweepConfig:
    """The composed config of one scout job; Hydra checks every override against it."""

    model: ModelConfig = field(default_factory=scout_model)
    limits: ExecutorLimits = field(default_factory=ExecutorLimits)
    sweep: ScoutSweepSettings = field(default_factory=ScoutSweepSettings)
    policy: str = "model"  # model | keyword
    budget: int = ScoutConfig.budget  # rounds
    max_actions: int = ScoutConfig.max_actions
    max_chars: int = ScoutConfig.max_chars  # characters of cited source per search
    timeout_s: Optional[float] = ScoutConfig.timeout_s  # deadline of one search
    seed: int = 42
    tasks: str = "benchmarks/scout_tasks/dev.json"  # task file (relative paths resolve against the project root)
    repos: Optional[str] = None  # one checkout per repository name; null = $SEARCHBOX_HOME/scout-repos
    limit: Optional[int] = None  # only the first N tasks

    def scout_config(self) -> ScoutConfig:
        model = ModelConfig(**{**self.model.__dict__, "seed": self.seed})
        return ScoutConfig(policy=self.policy, budget=self.budget, max_actions=self.max_actions, max_chars=self.max_chars,
                           timeout_s=self.timeout_s, limits=ExecutorLimits(**{**self.limits.__dict__,
                                                                             "priority_dirs": list(self.limits.priority_dirs)}),
                           model=model).validate()


def label(policy: str, model_name: str) -> str:
    """A grid point's name for its policy: the keyword control has no model."""
    return "keyword" if policy == "keyword" else model_name


def register_schema() -> None:
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    ConfigStore.instance().store(name="scout_schema", node=ScoutSweepConfig)
    if not OmegaConf.has_resolver("scout_label"):
        OmegaConf.register_new_resolver("scout_label", label)


def _path(value: Optional[str]) -> Optional[Path]:
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() or path.exists() else PROJECT_ROOT / path


def run_job(sc: ScoutSweepConfig, job_dir: Path, overrides: list[str]) -> dict:
    """Evaluate the task set under this grid point into job_dir."""
    from ..paths import home
    from ..run.runner import endpoint_for
    from .evaluate import evaluate
    from .tasks import load, verify

    cfg = sc.scout_config()
    tasks = load(_path(sc.tasks))
    repos = _path(sc.repos) or home() / "scout-repos"
    verify(tasks, repos, tasks.tasks[: sc.limit] if sc.limit else None)
    axes = {k.lstrip("+~"): v for k, v in (o.split("=", 1) for o in overrides if "=" in o) if not k.startswith("hydra")}
    if cfg.policy == "keyword":
        _, summary = evaluate(cfg, tasks, repos, None, job_dir, sc.limit, axes=axes)
    else:
        with endpoint_for(cfg) as url:  # reads cfg.model only; LLAMA_URL (set by the callback) wins over starting a server
            _, summary = evaluate(cfg, tasks, repos, url, job_dir, sc.limit, axes=axes)
    (job_dir / "axes.json").write_text(json.dumps(axes, indent=2))
    return summary


def combine(sweep_dir: Path) -> list[dict]:
    """Stack every job's tasks.parquet under sweep_dir and write the sweep's tables; the job summaries."""
    import pandas as pd

    from ..paths import atomic_write
    from .evaluate import summary_line_table

    frames, summaries = [], []
    for summary_path in sorted(sweep_dir.glob("*/summary.json")):
        job = summary_path.parent
        summary = json.loads(summary_path.read_text())
        axes = json.loads((job / "axes.json").read_text()) if (job / "axes.json").exists() else {}
        summary = {**summary, "job": job.name, "axes": axes}
        summaries.append(summary)
        frame = pd.read_parquet(job / "tasks.parquet")
        frame["job"] = job.name
        frames.append(frame)
    if not frames:
        return []
    pd.concat(frames, ignore_index=True).to_parquet(sweep_dir / "tasks.parquet", index=False)
    atomic_write(sweep_dir / "summary.json", json.dumps(summaries, indent=2))
    atomic_write(sweep_dir / "summary.md", f"# scout sweep: {sweep_dir.name}\n\n{summary_line_table(summaries)}\n")
    return summaries


try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # hydra missing: the module still imports for the schema
    _Callback = object  # type: ignore[assignment,misc]


class ScoutSweepCallback(_Callback):
    """Starts one embedded llama-server for the whole multirun (when a job needs it) and writes the sweep tables."""

    def __init__(self) -> None:
        self.server = None

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import OmegaConf

        from ..model.llama import LlamaServer

        overrides = list(config.hydra.overrides.task)
        policies = next((o.split("=", 1)[1].split(",") for o in overrides if o.split("=")[0] == "policy"), [config.policy])
        model_swept = any(o.split("=")[0].lstrip("+~").startswith("model") and "," in o for o in overrides)
        if "model" not in policies or os.environ.get("LLAMA_URL") or config.model.endpoint or model_swept:
            return
        model_cfg = ModelConfig(**OmegaConf.to_container(config.model, resolve=True))
        self.server = LlamaServer.from_config(model_cfg).start()
        os.environ["LLAMA_URL"] = self.server.url
        print(f"[scout sweep] embedded llama-server at {self.server.url}", file=sys.stderr)

    def on_multirun_end(self, config, **kwargs) -> None:
        try:
            sweep_dir = Path(config.hydra.sweep.dir)
            summaries = combine(sweep_dir)
            print(f"[scout sweep] {len(summaries)} grid points -> {sweep_dir}/summary.md", file=sys.stderr)
        finally:
            if self.server is not None:
                self.server.stop()
                os.environ.pop("LLAMA_URL", None)


def main() -> None:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from ..errors import sigterm_as_interrupt

    register_schema()
    sigterm_as_interrupt()
    logging.getLogger("httpx").setLevel(logging.WARNING)

    @hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="scout/config")
    @errors.task
    def entry(cfg) -> Optional[dict]:
        hc = HydraConfig.get()
        sc: ScoutSweepConfig = OmegaConf.to_object(cfg)
        multirun = hc.mode.name == "MULTIRUN"
        job_dir = Path(hc.sweep.dir) / hc.sweep.subdir if multirun else Path(hc.run.dir)
        return run_job(sc, job_dir, list(hc.overrides.task))

    entry()


if __name__ == "__main__":
    main()
