"""Run identity, one source of truth: what the run sends and reads + question + dataroom content + what served it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional

from ..config import RunConfig, resolved_today
from ..config import DataroomLimits
from ..corpus.store import identity_of
from ..errors import DataroomError
from ..model.served import served_key
from ..record.record import Served
from ..record.spec import RunSpec

# model.server_args that only say where, with how many slots and how fast the server runs, each with the number
# of values it takes: they leave the key. Every other flag there (--chat-template, KV-cache types, batch sizes,
# flash attention, sampling defaults...) can change what the model says, so the key holds it. Threads are here
# because the embedded server is started so that its thread count does not change the numbers (llama.SERVER_FLAGS).
OPERATIONAL_SERVER_FLAGS: dict[str, int] = {
    "-t": 1, "--threads": 1, "-tb": 1, "--threads-batch": 1, "-np": 1, "--parallel": 1, "--threads-http": 1,
    "-C": 1, "--cpu-mask": 1, "-Cr": 1, "--cpu-range": 1, "--cpu-strict": 1, "--prio": 1, "--poll": 1,
    "-Cb": 1, "--cpu-mask-batch": 1, "-Crb": 1, "--cpu-range-batch": 1, "--cpu-strict-batch": 1, "--prio-batch": 1,
    "--poll-batch": 1, "--host": 1, "--port": 1, "--metrics": 0, "--slots": 0, "--no-slots": 0, "--slot-save-path": 1,
    "--api-key": 1, "--api-key-file": 1, "-to": 1, "--timeout": 1, "--log-file": 1, "--log-disable": 0, "-v": 0,
    "--verbose": 0, "-lv": 1, "--log-verbosity": 1, "--log-colors": 1, "--log-prefix": 0, "--log-timestamps": 0,
    "--mlock": 0, "--no-mmap": 0, "--mmap": 0, "--no-webui": 0, "--webui": 0,
}

# The controls that read the question's gold, and which of its fields: fixing those in a question file is another run.
GOLD_READERS: dict[str, tuple[str, ...]] = {"oracle": ("gold_files",)}


def dataroom_identity(source: Path | str, limits: Optional[DataroomLimits] = None) -> str:
    """The content hash a run of this source would record, under these limits (a refusal names the one passed).

    Computed once per corpus and reused while its stamp holds (corpus.store): the corpus is extracted into the
    shared store the first time, which every run then binds, so no job or launch reads it again.
    """
    src = Path(source)
    if not src.exists():
        raise DataroomError(f"dataroom not found: {src}")
    return identity_of(src, limits)


# ---- the pieces of a run key that the config only names ------------------------------------------------
class _NoServer:
    """What a control policy answers to a probe: nothing (protocol.choose then picks native, as the run does)."""

    def get_json(self, path: str) -> None:
        return None


def resolved_protocol(cfg: RunConfig, client: Any = None) -> str:
    """The tool protocol the run will speak: native|json as configured, or what `auto` picks from this server's /props,
    unless the harness always speaks one (Harness.speaks: the agent CLIs, native, whose keys once held the JSON prompt
    `auto` picked on a tool-less template while they sent native calls). A native protocol the server's template
    cannot render is a ConfigError when configured so (model.limits.check_tools_reach)."""
    from ..harness import load
    from ..model.limits import check_tools_reach, read_limits
    from ..model.protocol import choose

    server = client if client is not None and not cfg.model.policy else _NoServer()
    name = load(cfg.harness.kind).speaks or choose(cfg.model.protocol, server).name
    if not isinstance(server, _NoServer):
        check_tools_reach(name, cfg.model.protocol, read_limits(server))
    return name


def with_limits(cfg: RunConfig, client: Any = None, default_window: int = 8192) -> tuple[RunConfig, dict]:
    """The config the run really gets against this server (its context window and max_tokens where the server's beat
    the config: model.limits.effective) and the `limits` record saying which source won. A control: as given, {}."""
    from ..model.limits import effective, read_limits

    if cfg.model.policy or client is None:
        return cfg, {}
    model, record = effective(cfg.model, read_limits(client), default_window)
    return (cfg if model is cfg.model else dataclasses.replace(cfg, model=model)), record


def semantic_server_args(args: list[str]) -> list[str]:
    """model.server_args without OPERATIONAL_SERVER_FLAGS (and their values), in order: what can change the numbers."""
    out: list[str] = []
    skip = 0
    for arg in map(str, args):
        if skip:
            skip -= 1
            continue
        flag, eq, _ = arg.partition("=")
        if flag in OPERATIONAL_SERVER_FLAGS:
            skip = 0 if eq else OPERATIONAL_SERVER_FLAGS[flag]
            continue
        out.append(arg)
    return out


def run_prompt(cfg: RunConfig, protocol: str) -> dict:
    """What the run sends besides the conversation: its tools (names and schemas), the system prompt as sent (date
    resolved, protocol suffix included), and the request's fixed fields (native `tools`, json `response_format`)."""
    from ..harness.agent import system_prompt
    from ..model.protocol import choose
    from ..tools import offered

    specs = offered(cfg)  # as the model sees them: the selection, search_dataroom's k fixed where the config fixes it
    schemas = [s.schema() for s in specs]  # as the model sees them
    proto = choose(protocol, _NoServer())
    harness = dataclasses.replace(cfg.harness, today=resolved_today(cfg.harness))
    request = {k: v for k, v in proto.request([], schemas).items() if k != "messages"}
    return {"protocol": proto.name, "protocol_version": getattr(proto, "version", None),
            "tools": [s.schema(limits=True) for s in specs],  # with the limits what the model sends is checked against
            "system": system_prompt(harness, proto.system_suffix(schemas), [s.name for s in specs]), "request": request}


def gold_read(cfg: RunConfig, gold: Any) -> Optional[dict]:
    """The gold fields a control policy reads (GOLD_READERS), else None: a model never sees the gold."""
    fields = GOLD_READERS.get(cfg.model.policy or "", ())
    if not fields:
        return None
    return {f: list(getattr(gold, f, None) or []) if f != "answer" else getattr(gold, f, "") for f in fields}


def resolve(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served, *,
            protocol: str, gold: Any = None) -> RunSpec:
    """The run resolved once (record.spec.RunSpec): the semantic config with its date resolved, the question and its id,
    the dataroom's content hash, what served the run (weights and build, or the control), the tools and system prompt
    as sent, the gold a control reads, the server flags that can change the numbers, and what the harness adds.

    protocol: the resolved tool protocol (resolved_protocol); gold: the question's gold (a Gold or Question), read only
    for the controls that read it. The key is this object's hash, and the run sends what it holds."""
    config = cfg.semantic()
    config["harness"]["today"] = resolved_today(cfg.harness)
    return RunSpec(config=config, question_id=question_id or "", question=question, dataroom=dataroom_id,
                   served=served_key(served), prompt=run_prompt(cfg, protocol), gold_read=gold_read(cfg, gold),
                   server_args=None if cfg.model.policy else semantic_server_args(cfg.model.server_args),
                   harness=harness_identity(cfg))


def key_inputs(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served, *,
               protocol: str, gold: Any = None) -> dict:
    """Everything the run key hashes, as plain data (RunSpec.key_inputs)."""
    return resolve(cfg, question_id, question, dataroom_id, served, protocol=protocol, gold=gold).key_inputs()


def harness_identity(cfg: RunConfig) -> dict:
    """What the run's harness adds to the key (Harness.identity): e.g. Pi's pinned version, searchbox's extension to it,
    the task appended to its prompt and its settings."""
    from ..harness import load

    return load(cfg.harness.kind).identity(cfg)


def run_key(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served, *,
            protocol: str, gold: Any = None) -> str:
    """The run's identity (RunSpec.key of resolve's object)."""
    return resolve(cfg, question_id, question, dataroom_id, served, protocol=protocol, gold=gold).key


def describe_key(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served, *,
                 protocol: str, gold: Any = None) -> str:
    """The run key's inputs as JSON, written beside a run so a key can be explained (RunSpec.describe)."""
    return resolve(cfg, question_id, question, dataroom_id, served, protocol=protocol, gold=gold).describe()
