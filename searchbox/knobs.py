"""The environment knobs of the reference design ("everything is an env knob"), each the config field it stands for.

A knob is read once, at an entry point (run, sweep, serve), and becomes that field's value, so it is in the
resolved config (key.json) and in the run key exactly as the same value given as an override would be. The
command line wins: a knob whose field the command line also sets is not applied. A bad value is a one-line
ConfigError naming the knob. `searchbox doctor` lists the knobs that are set; docs/configuration.md maps each
knob to its override (tests/test_knobs.py checks that table against this one).

LLAMA_URL, MODEL_ID, SEARCHBOX_TOKEN and JINA_API_KEY were read before this table existed; LLAMA_URL and
SEARCHBOX_TOKEN stay where they are read (they say where to reach things, not what a run computes).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Optional

from .config import EMBEDDERS, RERANKERS, TOKEN_METRICS
from .errors import ConfigError

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _tools(value: str) -> Any:
    """SEARCHBOX_TOOLS: empty is no tools, `a,b` exactly those tools, one word a tier (or one tool)."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        return "none"
    return names[0] if len(names) == 1 else names


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value
    return parse


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise ValueError("expected a whole number of at least 1")
    return n


def _mb_as_gb(value: str) -> float:
    mb = float(value)
    if not mb >= 0:
        raise ValueError("expected megabytes, 0 or more")
    return mb / 1024


def _flag(value: str) -> bool:
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ValueError(f"expected one of {', '.join(TRUE + FALSE)}")


def _text(value: str) -> str:
    if not value or len(value) > 500 or "\x00" in value:
        raise ValueError("expected a name of 1 to 500 characters")
    return value


@dataclass(frozen=True)
class Knob:
    env: str
    path: Optional[str]  # the RunConfig field (dotted); None: not a run's (the web scheduler's own)
    sweep: Optional[str]  # the Hydra override key of a sweep; None: not a sweep's
    parse: Callable[[str], Any]
    what: str
    when: Optional[tuple[str, str]] = None  # applies only where this field has this value (API_* model names)


KNOBS: tuple[Knob, ...] = (
    Knob("SEARCHBOX_TOOLS", "tools", "tools.select", _tools, "a tier (none, high, low, all, ...), `a,b` for exactly those tools, empty for none"),
    Knob("TURN_BUDGET", "harness.budget", "budget", _positive_int, "the budget, in turns (or tokens with budget_unit=tokens)"),
    Knob("BUDGET_METRIC", "harness.token_metric", "token_metric", _choice(TOKEN_METRICS), "what a token budget counts"),
    Knob("CONTEXT_WINDOW", "model.context_window", "model.context_window", _positive_int, "the context window compaction plans against"),
    Knob("MODEL_ID", "model.model", "model.model", _text, "the model id sent in requests"),
    Knob("EMBED_BACKEND", "retrieval.embedder", "backend.embedder", _choice(EMBEDDERS), "embeddings in-process (local) or over HTTP (api)"),
    Knob("EMBED_MODEL", "retrieval.embed_model", "backend.embed_model", _text, "the local embedder", when=("retrieval.embedder", "local")),
    Knob("API_EMBED_MODEL", "retrieval.embed_model", "backend.embed_model", _text, "the API embedder", when=("retrieval.embedder", "api")),
    Knob("RERANK_BACKEND", "retrieval.reranker", "backend.reranker", _choice(RERANKERS), "reranking: none, cross-encoder or api"),
    Knob("RERANK_MODEL", "retrieval.rerank_model", "backend.rerank_model", _text, "the local reranker", when=("retrieval.reranker", "cross-encoder")),
    Knob("API_RERANK_MODEL", "retrieval.rerank_model", "backend.rerank_model", _text, "the API reranker", when=("retrieval.reranker", "api")),
    Knob("EMBED_DEVICE", "retrieval.device", "backend.device", _choice(("auto", "cpu", "cuda")), "where the embedder runs"),
    Knob("MIN_FREE_VRAM_MB", "retrieval.min_free_vram_gb", "backend.min_free_vram_gb", _mb_as_gb, "free GPU memory below which device=auto uses the CPU (MB)"),
    Knob("PREEMPT_FOREGROUND", None, None, _flag, "the web app's scheduler: a new job pauses a running one (serve --preempt)"),
    Knob("AUTO_BACKFILL", None, None, _flag, "the web app's scheduler: idle slots resume paused jobs (serve --backfill)"),
)
BY_ENV = {k.env: k for k in KNOBS}


def read(environ: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """{env name: parsed value} of every knob that is set (an empty SEARCHBOX_TOOLS is set: it means none)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for knob in KNOBS:
        if knob.env not in environ or (environ[knob.env] == "" and knob.env != "SEARCHBOX_TOOLS"):
            continue
        raw = environ[knob.env].strip()
        try:
            out[knob.env] = knob.parse(raw)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"${knob.env}={raw[:60]!r}: {exc}") from None
    return out


def _field(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _set(cfg: Any, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        cfg = getattr(cfg, part)
    setattr(cfg, last, value)


def apply(cfg: Any, given: frozenset[str] = frozenset(), environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """Set each knob's RunConfig field on `cfg`, except the fields in `given` (the command line set them).
    Conditional knobs (API_EMBED_MODEL ...) apply after the fields they depend on. Returns the knobs applied."""
    values, applied = read(environ), []
    for knob in sorted((k for k in KNOBS if k.env in values and k.path), key=lambda k: k.when is not None):
        if knob.path in given or (knob.when and _field(cfg, knob.when[0]) != knob.when[1]):
            continue
        _set(cfg, knob.path, values[knob.env])
        applied.append(knob.env)
    return applied


def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(value) + "]"
    return str(value)


def sweep_overrides(argv: list[str], environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """The Hydra overrides the knobs stand for, left out where the command line already sets that key (`tools=low`
    sets tools.select). A group the command line picks (`backend=api`) decides which conditional knobs apply."""
    values = read(environ)
    given = {a.lstrip("+~").split("=", 1)[0] for a in argv if "=" in a and not a.startswith("-")}
    out = []
    chosen = {"backend.embedder": values.get("EMBED_BACKEND", "local"), "backend.reranker": values.get("RERANK_BACKEND", "none")}
    for a in argv:
        key, _, val = a.lstrip("+~").partition("=")
        if key == "backend":  # the group: conf/backend/api.yaml embeds and reranks over the API, local.yaml reranks nothing
            chosen.update({"backend.embedder": val, "backend.reranker": "api" if val == "api" else "none"})
        if key in chosen:
            chosen[key] = val
    for knob in KNOBS:
        if knob.env not in values or not knob.sweep:
            continue
        if knob.sweep in given or (knob.sweep == "tools.select" and "tools" in given):  # `tools=low` is tools.select=low
            continue
        if knob.when and chosen.get("backend." + knob.when[0].split(".")[1]) != knob.when[1]:
            continue
        out.append(f"{knob.sweep}={_hydra_value(values[knob.env])}")
    return out


def with_overrides(argv: list[str], environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """Hydra's argv with the knobs' overrides placed beside the command line's own (argparse takes the overrides
    as one run of positionals: after the last `key=value`, or at the end when there is none)."""
    extra = sweep_overrides(argv, environ)
    last = max((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), default=len(argv) - 1)
    return [*argv[:last + 1], *extra, *argv[last + 1:]]


def described(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """`KNOB=value -> field` for each knob set (for doctor)."""
    values = read(environ)
    return [f"{k.env}={values[k.env]!r} -> {k.path or 'web scheduler'}" for k in KNOBS if k.env in values]


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with these values for the block, then as it was (a variable that was unset is unset again)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
