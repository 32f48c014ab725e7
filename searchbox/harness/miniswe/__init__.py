"""mini-swe-agent (SWE-agent's minimal bash-only agent, PyPI `mini-swe-agent`) as the harness `mini-swe-agent`.

Its own agent loop (`minisweagent.agents.default.DefaultAgent`) runs in the harness's process with its own default
templates (`config/default.yaml`: system, instance, format-error and observation templates), its own action regex
(one ```mswea_bash_command block per reply, from its text-based model config) and its own submit sentinel
(`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`, read by its LocalEnvironment). What searchbox gives it is a Model
(loop.Model: every request to the run's model through the Accountant, as the native loop's) and an Environment
(loop.Environment: every command through the run's own boxed `bash` tool, so the harness writes the tool row and the
trace). Nothing of mini-swe-agent's own models (litellm) is imported.

This module holds what needs no import of mini-swe-agent (which writes a config folder and prints a banner when it
is imported): the pin, the check, the run key's identity (templates read from the installed package's files).
loop.py imports it, once the environment keeps its side effects inside the run.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import platform
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...config import RunConfig
from ...errors import ConfigError, SetupError
from ..base import Harness, RunContext

DIST = "mini-swe-agent"
PIN = "2.4.6"  # the one version this harness drives (pyproject.toml pins the same): its templates and loop are keyed
CONFIG = "config/default.yaml"  # mini-swe-agent's default config: the DefaultAgent's templates
ACTION_SOURCE = "models/litellm_textbased_model.py"  # where its text-based action regex is declared (read, never imported)
ACTION_CLASS, ACTION_FIELD = "LitellmTextbasedModelConfig", "action_regex"
SUPPORTED = ("none",)  # the named tiers it can run: the built-ins, each doable with bash


def installed_version() -> str | None:
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        return None


def require() -> Path:
    """The installed package's folder, at the pinned version (else SetupError naming the fix); nothing is imported."""
    fix = f"pip install {DIST}=={PIN} (scripts/install.sh installs it)"
    version = installed_version()
    if version is None:
        raise SetupError(f"harness=mini-swe-agent: {DIST} is not installed: {fix}")
    if version != PIN:
        raise SetupError(f"harness=mini-swe-agent is pinned to {DIST} {PIN}, {version} is installed: {fix}")
    spec = importlib.util.find_spec("minisweagent")  # a top-level find_spec runs nothing of the package
    if spec is None or not spec.submodule_search_locations:
        raise SetupError(f"harness=mini-swe-agent: the minisweagent package is missing: {fix}")
    return Path(list(spec.submodule_search_locations)[0])


@dataclasses.dataclass(frozen=True)
class Templates:
    """What mini-swe-agent's defaults make the agent send and parse: the whole default config and the action regex."""

    config_text: str
    agent: dict
    model: dict
    action_regex: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256((self.config_text + "\0" + self.action_regex).encode("utf-8")).hexdigest()


@lru_cache(maxsize=2)
def templates(root: Path) -> Templates:
    import yaml

    text = (root / CONFIG).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    try:
        agent, model = dict(data["agent"]), dict(data["model"])
        for part, keys in ((agent, ("system_template", "instance_template")),
                           (model, ("observation_template", "format_error_template"))):
            for key in keys:
                if not isinstance(part.get(key), str):
                    raise KeyError(key)
    except (KeyError, TypeError) as exc:
        raise SetupError(f"harness=mini-swe-agent: {root / CONFIG} lacks {exc}: reinstall {DIST}=={PIN}") from None
    return Templates(text, agent, model, action_regex(root))


def action_regex(root: Path) -> str:
    """The regex mini-swe-agent's text-based model reads one action with, from its source (importing that module
    would import litellm, which this harness never runs)."""
    tree = ast.parse((root / ACTION_SOURCE).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == ACTION_CLASS:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", "") == ACTION_FIELD \
                        and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                    return item.value.value
    raise SetupError(f"harness=mini-swe-agent: {ACTION_CLASS}.{ACTION_FIELD} not found in {root / ACTION_SOURCE}: "
                     f"reinstall {DIST}=={PIN}")


def task(cfg: RunConfig) -> str:
    """The task appended to mini-swe-agent's system message: the native loop's system prompt for bash (date resolved),
    as Pi gets it appended to its own."""
    from ...config import resolved_today
    from ..agent import system_prompt

    harness = dataclasses.replace(cfg.harness, today=resolved_today(cfg.harness))
    return system_prompt(harness, "", ["bash"])


def system_vars() -> dict[str, str]:
    """What the instance template's <system_information> shows. The kernel's release and build are left out: they
    would make the prompt, and so the run key, differ from machine to machine for the same run."""
    return {"system": platform.system(), "release": "", "version": "", "machine": platform.machine()}


def agent_config(cfg: RunConfig, t: Templates) -> dict:
    """The DefaultAgent's config: its templates; its step limit is the turn's (harness.max_steps_per_turn); no cost or
    wall-time limit (the harness's ceilings and budget hold); its own format-error limit as released."""
    return {"system_template": t.agent["system_template"], "instance_template": t.agent["instance_template"],
            "step_limit": int(cfg.harness.max_steps_per_turn), "cost_limit": 0.0, "wall_time_limit_seconds": 0}


def check_tools(cfg: RunConfig) -> None:
    from ...tools.catalog import BY_NAME, select

    names = [s.name for s in select(cfg.tools)]
    others = [n for n in names if BY_NAME[n].tier != "builtin"]
    if others or "bash" not in names:
        why = f"has the dataroom tools {', '.join(others)}" if others else "has no bash"
        raise ConfigError(f"harness=mini-swe-agent is bash-only: it runs tools={' or '.join(SUPPORTED)} (or built-ins that include "
                          f"bash; the file tools are done through bash), not high, low, all, grep_only or vector_only; "
                          f"tools={cfg.tools!r} {why}")


def identity(cfg: RunConfig) -> dict:
    """What the run key needs beyond the config: the pin, the templates and regex (hashed), what searchbox sets."""
    t = templates(require())
    return {"mini_swe_agent": PIN, "templates": t.sha256[:16], "action_regex": t.action_regex, "task": task(cfg),
            "agent": {k: v for k, v in agent_config(cfg, t).items() if not k.endswith("_template")},
            "system_vars": system_vars(), "tools": ["bash"]}


QUIET = {"MSWEA_SILENT_STARTUP": "1"}  # no banner on import (nor the global cost limit's line)
CONFIG_DIR_VAR = "MSWEA_GLOBAL_CONFIG_DIR"


def load(run_dir: Path) -> Any:
    """loop.py, importing mini-swe-agent (once per process) with what its import does kept in the run: it creates its
    global config folder and loads the `.env` there into os.environ, which would be ~/.config/mini-swe-agent (a
    user's API keys among them); here it is a new, empty folder under the run's miniswe/, and its banner is off.
    The variables are the process's only while it imports: nothing else of mini-swe-agent reads them later."""
    if "minisweagent" not in sys.modules:
        folder = Path(run_dir) / "miniswe" / "config"
        folder.mkdir(parents=True, exist_ok=True)
        from ...knobs import environ_set

        with environ_set({**QUIET, CONFIG_DIR_VAR: str(folder)}):
            importlib.import_module(f"{__name__}.loop")
    return importlib.import_module(f"{__name__}.loop")


class MiniSweHarness(Harness):
    """mini-swe-agent's DefaultAgent over the run's model and boxed bash; `check` refuses what it cannot run."""

    kind = "mini-swe-agent"

    def check(self, cfg: RunConfig) -> None:
        self.refuse_control(cfg)
        check_tools(cfg)
        templates(require())

    def identity(self, cfg: RunConfig) -> dict:
        return identity(cfg)

    def protocol(self, spec: Any) -> str:
        return "text"  # one ```mswea_bash_command block in the reply's text, parsed by mini-swe-agent

    def run(self, ctx: RunContext) -> None:
        load(ctx.workspace.run_dir).MiniRun(ctx, templates(require())).run()

    def restore(self, checkpoint: dict) -> Any:
        from .state import restore

        return restore(checkpoint)

    def resume(self, ctx: RunContext, checkpoint: dict) -> None:
        from .state import restore

        load(ctx.workspace.run_dir).MiniRun(ctx, templates(require()), restore(checkpoint)).run(resumed=True)
