"""The run's artifacts and their schemas (SPEC §6): one typed, versioned RunRecord; the Recorder is their only writer."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from . import SCHEMA_VERSION
from .paths import atomic_write

TURN_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("turn", pa.int32()),
    ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("cached_tokens", pa.int64()),
    ("prompt_tokens_cum", pa.int64()), ("completion_tokens_cum", pa.int64()), ("cached_tokens_cum", pa.int64()),
    ("context_tokens", pa.int64()), ("llm_calls", pa.int32()), ("llm_ms", pa.float64()), ("tool_ms", pa.float64()),
    ("setup_ms", pa.float64()), ("tool_calls", pa.int32()), ("malformed", pa.int32()), ("estimated_calls", pa.int32()),
    ("compactions", pa.int32()), ("answer_chars", pa.int64()), ("answer_changed", pa.bool_()),
    ("elapsed_ms", pa.float64()), ("ended_by", pa.string()),
])

TOOL_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("turn", pa.int32()), ("step", pa.int32()), ("call_id", pa.string()), ("tool", pa.string()),
    ("arguments", pa.string()), ("programs", pa.list_(pa.string())), ("paths", pa.list_(pa.string())),
    ("duration_ms", pa.float64()), ("setup_ms", pa.float64()), ("ok", pa.bool_()), ("error", pa.string()),
    ("output_chars", pa.int64()), ("delivered", pa.string()),
])

ARTIFACTS = ("run_meta.json", "turns.parquet", "tool_calls.parquet", "trace.jsonl", "snapshots/")
STATE_FILE = "state.json"  # the agent's checkpoint after every step, for --resume


# ---- the run record -------------------------------------------------------------------------
@dataclass
class Tokens:
    """Tokens the server billed over the run (prompt includes the cached part)."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    total: int = 0
    uncached_prompt: int = 0
    estimated_calls: int = 0  # responses without usage: their counts are the harness's estimate


@dataclass
class Served:
    """What actually answered: the server's own model id, and for llama-server its GGUF and build."""

    model_id: Optional[str] = None  # as /v1/models reports it (or the control policy's name)
    endpoint: Optional[str] = None
    gguf_sha256: Optional[str] = None
    llama_cpp: Optional[str] = None  # llama-server build info
    policy: Optional[str] = None  # set for the non-neural controls


@dataclass
class DataroomInfo:
    """The corpus the run saw: its source, identity before noise, and content hash after."""

    source: str = ""
    identity: str = ""  # content hash of the source (the run key uses it)
    sha256: str = ""  # content hash of what the agent saw (identity + distractors)
    files: int = 0
    bytes: int = 0
    noise: list = field(default_factory=list)  # distractors added: [{path, source, bytes}]


@dataclass
class Gold:
    """The question's gold as of the run (grading re-reads the question file when it still exists)."""

    answer: str = ""
    aliases: list = field(default_factory=list)
    gold_files: list = field(default_factory=list)
    type: str = ""


@dataclass
class RunRecord:
    """run_meta.json: everything said about one run. Written only by the Recorder (and grading through it)."""

    run_id: str = ""
    question: str = ""
    schema_version: int = SCHEMA_VERSION
    status: str = "running"  # running | complete
    question_id: str = ""
    question_type: str = ""
    questions_path: Optional[str] = None
    gold: Optional[Gold] = None
    sweep: str = ""
    axes: dict = field(default_factory=dict)
    model: str = ""  # the label in figures (config model.name)
    served: Served = field(default_factory=Served)
    protocol: str = ""
    context_window: int = 0
    budget: int = 0
    budget_unit: str = "turns"
    token_metric: str = "total"
    force_budget: bool = True
    tools: list = field(default_factory=list)
    sandbox: str = ""
    delivery: str = "inline"
    config: dict = field(default_factory=dict)
    dataroom: DataroomInfo = field(default_factory=DataroomInfo)
    searchbox_version: str = ""
    started_at: str = ""
    finished_at: str = ""
    stop_reason: str = ""
    stop_detail: str = ""
    turns: int = 0
    continues_sent: int = 0
    compactions: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    malformed_replies: int = 0
    resumes: int = 0
    tokens: Tokens = field(default_factory=Tokens)
    elapsed_s: float = 0.0
    llm_s: float = 0.0
    tool_s: float = 0.0
    setup_s: float = 0.0
    answer_present: bool = False
    answer_chars: int = 0
    answer_source: str = "none"  # model | backstop | none
    answer: str = ""
    server: dict = field(default_factory=dict)  # llama-server /metrics throughput
    retrieval: dict = field(default_factory=dict)
    grades: dict = field(default_factory=dict)
    scout: dict = field(default_factory=dict)  # repository-search runs: the verified result (status, references)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunRecord":
        """Any schema version; unknown keys are dropped, missing ones take their defaults."""
        data = upgrade(dict(data))
        nested = {"served": Served, "dataroom": DataroomInfo, "tokens": Tokens, "gold": Gold}
        kwargs = {}
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in data.items():
            if key not in names:
                continue
            if key in nested and isinstance(value, dict):
                sub = nested[key]
                known = {f.name for f in dataclasses.fields(sub)}
                value = sub(**{k: v for k, v in value.items() if k in known})
            kwargs[key] = value
        kwargs["schema_version"] = SCHEMA_VERSION
        return cls(**kwargs)


def upgrade(data: dict) -> dict:
    """Bring an older run_meta.json to the current schema (v1: untyped, model id in `model`, gold_answer top level)."""
    version = int(data.get("schema_version", 1))
    if version < 2:
        served = {"model_id": data.get("model"), "endpoint": data.get("endpoint")}
        data["model"] = data.get("model_label") or data.get("model") or ""
        data.setdefault("served", served)
        if "gold_answer" in data:
            data.setdefault("gold", {"answer": data["gold_answer"]})
        ds = data.get("dataroom") or {}
        ds.setdefault("identity", ds.get("sha256", ""))
        data["dataroom"] = ds
        grades = data.get("grades") or {}
        grades.setdefault("grader_version", "v1")
        data["grades"] = grades
    return data


# ---- writing ----------------------------------------------------------------------------------
def write_table(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    """Rows to parquet with the schema and its version in the file metadata, atomically."""
    names = schema.names
    table = pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows], schema=schema)
    table = table.replace_schema_metadata({"searchbox_schema_version": str(SCHEMA_VERSION)})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def read_rows(path: Path) -> list[dict]:
    """A run table's rows (empty when it does not exist yet); older files gain the new columns as nulls."""
    if not Path(path).exists():
        return []
    return pq.read_table(path).to_pylist()


class Recorder:
    """Appends the trace as it happens; rewrites the tables after every turn so a crash loses no finished turn."""

    def __init__(self, run_dir: Path, record: RunRecord, resume: bool = False):
        self.run_dir = Path(run_dir)
        self.record = record
        self.run_id = record.run_id
        self.turns: list[dict] = read_rows(self.run_dir / "turns.parquet") if resume else []
        self.calls: list[dict] = read_rows(self.run_dir / "tool_calls.parquet") if resume else []
        (self.run_dir / "snapshots").mkdir(parents=True, exist_ok=True)
        # A stray undecodable character must never cost the log: it is replaced, not raised.
        self._trace = open(self.run_dir / "trace.jsonl", "a", encoding="utf-8", errors="replace")

    def event(self, kind: str, turn: int, **data: Any) -> None:
        """One trace line: a message the conversation gained, or a harness event (compaction, stop)."""
        line = {"type": kind, "turn": turn, "t": round(time.time(), 3), **data}
        self._trace.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._trace.flush()

    def tool_call(self, row: dict) -> None:
        self.calls.append({"run_id": self.run_id, **row})

    def turn(self, row: dict) -> None:
        self.turns.append({"run_id": self.run_id, **row})
        self.flush()

    def truncate(self, turns: int, calls: int) -> None:
        """Forget rows past a checkpoint (a resumed run redoes the turn that was cut)."""
        self.turns = [r for r in self.turns if r["turn"] <= turns]
        self.calls = self.calls[:calls]
        self.flush()

    def snapshot(self, turn: int, text: str) -> None:
        atomic_write(self.run_dir / "snapshots" / f"ANSWER-t{turn}.md", text)

    def checkpoint(self, state: dict) -> None:
        atomic_write(self.run_dir / STATE_FILE, json.dumps(state, default=str))

    def flush(self) -> None:
        write_table(self.turns, TURN_SCHEMA, self.run_dir / "turns.parquet")
        write_table(self.calls, TOOL_SCHEMA, self.run_dir / "tool_calls.parquet")

    def write_record(self) -> None:
        write_meta(self.run_dir, self.record)

    def close(self) -> None:
        self.flush()
        self._trace.close()


def write_meta(run_dir: Path, record: RunRecord | dict) -> None:
    """run_meta.json, atomically, in the current schema."""
    if isinstance(record, dict):
        record = RunRecord.from_dict(record)
    atomic_write(Path(run_dir) / "run_meta.json", json.dumps(record.to_dict(), indent=2, default=str))


def read_record(run_dir: Path) -> RunRecord:
    return RunRecord.from_dict(json.loads((Path(run_dir) / "run_meta.json").read_text(encoding="utf-8")))


def read_meta(run_dir: Path) -> dict:
    """run_meta.json as a dict in the current schema (older versions upgraded on read)."""
    return read_record(run_dir).to_dict()


def update_grades(run_dir: Path, grades: dict) -> RunRecord:
    """Replace a finished run's grades (grading and regrading write only through here)."""
    record = read_record(run_dir)
    record.grades = dict(grades)
    write_meta(run_dir, record)
    return record


def read_state(run_dir: Path) -> Optional[dict]:
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
