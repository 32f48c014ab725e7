"""The run's artifacts and their schemas (SPEC §6): one typed, versioned RunRecord; the Recorder is their only writer."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from .. import SCHEMA_VERSION, bounds
from ..paths import atomic_write

ROW_TEXT_CAP = 1_000_000  # characters of one text cell (a call's arguments are bounded long before this)
ROW_LIST_CAP = 10_000  # items of one list cell


def column(arrow: pa.DataType) -> Any:
    """A row field and its parquet column type: the table schemas are derived from the row classes."""
    return field(metadata={"arrow": arrow})


def nullable(arrow: pa.DataType) -> Any:
    """A column whose null means something (not known) apart from its empty value: None by default, kept as null in the
    table and read back as None (older files lack it: not known either). Rows that do not name it leave it None."""
    return field(default=None, metadata={"arrow": arrow, "nullable": True})


@dataclass(frozen=True)
class TurnRow:
    """One row of turns.parquet: a finished turn (tokens as the server billed them, or estimated and counted so)."""

    turn: int = column(pa.int32())
    prompt_tokens: int = column(pa.int64())
    completion_tokens: int = column(pa.int64())
    cached_tokens: int = column(pa.int64())
    prompt_tokens_cum: int = column(pa.int64())
    completion_tokens_cum: int = column(pa.int64())
    cached_tokens_cum: int = column(pa.int64())
    context_tokens: int = column(pa.int64())
    llm_calls: int = column(pa.int32())
    llm_ms: float = column(pa.float64())
    tool_ms: float = column(pa.float64())
    setup_ms: float = column(pa.float64())
    tool_calls: int = column(pa.int32())
    malformed: int = column(pa.int32())  # replies the harness could not understand
    estimated_calls: int = column(pa.int32())
    compactions: int = column(pa.int32())
    answer_chars: int = column(pa.int64())
    answer_changed: bool = column(pa.bool_())
    elapsed_ms: float = column(pa.float64())
    ended_by: str = column(pa.string())


@dataclass(frozen=True)
class ToolRow:
    """One row of tool_calls.parquet: a call as the model sent it and what came of it."""

    turn: int = column(pa.int32())
    step: int = column(pa.int32())
    call_id: str = column(pa.string())
    tool: str = column(pa.string())
    arguments: str = column(pa.string())  # as the model sent them
    programs: list = column(pa.list_(pa.string()))  # bash: the programs the command runs
    paths: list = column(pa.list_(pa.string()))  # files the call read or returned
    duration_ms: float = column(pa.float64())
    setup_ms: float = column(pa.float64())
    ok: bool = column(pa.bool_())
    error: str = column(pa.string())
    output_chars: int = column(pa.int64())
    delivered: str = column(pa.string())
    malformed: bool = column(pa.bool_())  # refused as sent (schema, bounds, or found later): the model's doing
    opened: Optional[list] = nullable(pa.list_(pa.string()))  # bash: work/-relative files its processes opened to read,
    #                                                          observed by strace (tools.opens); None: not observed


def schema_of(row_class: type) -> pa.Schema:
    """The parquet schema of a row class: run_id, then its fields in order."""
    return pa.schema([("run_id", pa.string())] + [(f.name, f.metadata["arrow"]) for f in dataclasses.fields(row_class)])


TURN_SCHEMA = schema_of(TurnRow)
TOOL_SCHEMA = schema_of(ToolRow)


def make_row(row_class: type, data: dict) -> Any:
    """A row from a dict that names exactly its fields: an unknown or missing field is an error, not a null column
    (except a nullable one, whose None says "not known")."""
    names = [f.name for f in dataclasses.fields(row_class) if not f.metadata.get("nullable") or f.name in data]
    unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data]
    if unknown or missing:
        raise ValueError(f"{row_class.__name__}: " + "; ".join(
            part for part in (f"unknown field(s) {', '.join(unknown)}" if unknown else "",
                              f"missing field(s) {', '.join(missing)}" if missing else "") if part))
    return row_class(**data)


def _null(arrow: pa.DataType) -> Any:
    """What a column an older file lacks reads as."""
    if pa.types.is_integer(arrow):
        return 0
    if pa.types.is_floating(arrow):
        return 0.0
    if pa.types.is_boolean(arrow):
        return False
    if pa.types.is_list(arrow):
        return []
    return ""


def stored_row(row_class: type, data: dict) -> Any:
    """A row read back from a run's table (any schema version): columns it lacks take their null, extra ones are dropped."""
    return row_class(**{f.name: data[f.name] if data.get(f.name) is not None or f.metadata.get("nullable") else _null(f.metadata["arrow"])
                        for f in dataclasses.fields(row_class) if f.name in data or not f.metadata.get("nullable")})


def _cell(value: Any, arrow: pa.DataType, nullable: bool = False) -> tuple[Any, bool]:
    """(value typed and bounded for its column, whether it had to change)."""
    if nullable and value is None:
        return None, False
    if pa.types.is_boolean(arrow):
        return (value, False) if isinstance(value, bool) else (bool(value) if isinstance(value, (int, float)) else False, True)
    if pa.types.is_integer(arrow):
        limits = bounds.INT32 if arrow == pa.int32() else bounds.INT64
        if isinstance(value, float) and math.isfinite(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            return 0, True
        fitted = bounds.clamp(value, limits)
        return fitted, fitted != value
    if pa.types.is_floating(arrow):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value) if abs(value) < 1e308 else math.inf
            return (value, False) if math.isfinite(value) else (None, True)
        return None, True
    if pa.types.is_list(arrow):
        if not isinstance(value, (list, tuple)):
            return [], value is not None
        items = [_cell(v, arrow.value_type) for v in value[:ROW_LIST_CAP]]
        return [v for v, _ in items], len(value) > ROW_LIST_CAP or any(changed for _, changed in items)
    if value is None:
        return None, False
    text = value if isinstance(value, str) else str(value)
    fitted = bounds.capped(bounds.valid_text(text), ROW_TEXT_CAP)
    return fitted, fitted is not value


def bounded(row: Any) -> tuple[dict, list[str]]:
    """The row's values typed and bounded for its schema (so no value can fail the write), and the fields that changed."""
    values, changed = {}, []
    for f in dataclasses.fields(row):
        values[f.name], was_changed = _cell(getattr(row, f.name), f.metadata["arrow"], bool(f.metadata.get("nullable")))
        if was_changed:
            changed.append(f.name)
    return values, changed


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
    slot: Optional[int] = None  # the llama-server slot the run was pinned to (how it ran, not which run: not in the key)
    slot_start: str = ""  # how that slot started: erased | not erased: why | unpinned: why (llm.ChatClient.start_clean)


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
    limits: dict = field(default_factory=dict)  # model.limits.effective: the window and max_tokens used, and which source won
    budget: int = 0
    budget_unit: str = "turns"
    token_metric: str = "total"
    force_budget: bool = True
    tools: list = field(default_factory=list)
    sandbox: str = ""
    sandbox_quota: dict = field(default_factory=dict)  # the box's work/ quota: {work_bytes, work_files} ({} for none)
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
    failed_requests: int = 0  # model requests that got no usable answer (timed out, refused, dropped), retried or not
    malformed_calls: int = 0  # calls refused as the model sent them (bad arguments, or refused later by exec or encoding)
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
    harness: dict = field(default_factory=dict)  # what a harness other than the native loop adds (pi: its version, session file, usage check)

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

    @classmethod
    def parse(cls, data: Any) -> "RunRecord":
        """A record from run_meta.json's value, strictly: an object whose known fields have their declared types
        (nested records too) and that names its run; ValueError names the first field that does not."""
        if not isinstance(data, dict):
            raise ValueError(f"run_meta.json holds {type(data).__name__}, not an object")
        _check_fields(cls, data, "")
        if not isinstance(data.get("run_id"), str) or not data["run_id"]:
            raise ValueError("run_meta.json: run_id missing or empty")
        return cls.from_dict(data)


_NESTED = {"Served": Served, "DataroomInfo": DataroomInfo, "Tokens": Tokens, "Gold": Gold}
_PLAIN = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "dict": (dict,), "list": (list,)}


def _check_fields(cls: type, data: dict, where: str) -> None:
    """Every known field of data has the type its declaration says (annotations are text here: `from __future__`)."""
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, name = data[f.name], f"{where}{f.name}"
        kind = str(f.type)
        optional = kind.startswith("Optional[")
        kind = kind[len("Optional["):-1] if optional else kind
        if value is None and optional:
            continue
        if kind in _NESTED:
            if not isinstance(value, dict):
                raise ValueError(f"run_meta.json: {name} is {type(value).__name__}, expected an object")
            _check_fields(_NESTED[kind], value, name + ".")
            continue
        types = _PLAIN.get(kind)
        if types is None:
            continue
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            raise ValueError(f"run_meta.json: {name} is {type(value).__name__}, expected {kind}")


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
def write_table(rows: list, schema: pa.Schema, path: Path, run_id: str = "") -> None:
    """Rows (row objects, or dicts naming every column) to parquet with the schema version in the metadata, atomically."""
    names = schema.names
    dicts = [{"run_id": run_id, **dataclasses.asdict(r)} if dataclasses.is_dataclass(r) else r for r in rows]
    table = pa.Table.from_pylist([{k: r.get(k) for k in names} for r in dicts], schema=schema)
    table = table.replace_schema_metadata({"searchbox_schema_version": str(SCHEMA_VERSION)})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def read_rows(path: Path, row_class: Optional[type] = None) -> list:
    """A run table's rows (empty when it does not exist yet): as row objects when row_class is given, older files upgraded."""
    if not Path(path).exists():
        return []
    rows = pq.read_table(path).to_pylist()
    return [stored_row(row_class, r) for r in rows] if row_class else rows


SPEC_FILE = "key.json"


class Recorder:
    """Appends the trace as it happens; rewrites the tables after every turn so a crash loses no finished turn.

    Rows are typed (TurnRow, ToolRow): a dict naming other fields is an error, and every value is bounded
    before it is kept (a bounded value is noted in the trace), so nothing a model sends can fail a write.
    """

    def __init__(self, run_dir: Path, record: RunRecord, resume: bool = False):
        self.run_dir = Path(run_dir)
        self.record = record
        self.run_id = record.run_id
        self.turns: list[TurnRow] = read_rows(self.run_dir / "turns.parquet", TurnRow) if resume else []
        self.calls: list[ToolRow] = read_rows(self.run_dir / "tool_calls.parquet", ToolRow) if resume else []
        (self.run_dir / "snapshots").mkdir(parents=True, exist_ok=True)
        # A stray undecodable character must never cost the log: it is replaced, not raised.
        self._trace = open(self.run_dir / "trace.jsonl", "a", encoding="utf-8", errors="replace")

    def event(self, kind: str, turn: int, **data: Any) -> None:
        """One trace line: a message the conversation gained, or a harness event (compaction, stop)."""
        line = {"type": kind, "turn": turn, "t": round(time.time(), 3), **data}
        try:
            text = json.dumps(line, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):  # a NaN, or nesting past the encoder: log a bounded copy instead
            text = json.dumps(bounds.json_safe(line), ensure_ascii=False, default=str)
        self._trace.write(text + "\n")
        self._trace.flush()

    def _row(self, row_class: type, row: Any, table: str) -> Any:
        if isinstance(row, dict):
            row = make_row(row_class, row)
        elif not isinstance(row, row_class):
            raise TypeError(f"{table}: expected a {row_class.__name__}, got {type(row).__name__}")
        values, changed = bounded(row)
        if changed:
            self.event("row_bounded", values.get("turn") or 0, table=table, fields=changed)
        return row_class(**values)

    def tool_call(self, row: ToolRow | dict) -> None:
        self.calls.append(self._row(ToolRow, row, "tool_calls"))

    def turn(self, row: TurnRow | dict) -> None:
        self.turns.append(self._row(TurnRow, row, "turns"))
        self.flush()

    def truncate(self, turns: int, calls_before: tuple[int, int]) -> None:
        """Forget rows past a checkpoint (a resumed run redoes what was cut): turns after `turns`, calls at or after (turn, step)."""
        self.turns = [r for r in self.turns if r.turn <= turns]
        self.calls = [c for c in self.calls if (c.turn, c.step) < calls_before]
        self.flush()

    def snapshot(self, turn: int, text: str) -> None:
        atomic_write(self.run_dir / "snapshots" / f"ANSWER-t{turn}.md", bounds.valid_text(text))

    def checkpoint(self, state: dict) -> None:
        """The harness's state at a step boundary, after the rows so far: a process killed mid-turn (SIGKILL, no stop
        handler) resumes from this state with the rows it counts already on disk, not with the turn's rows lost."""
        self.flush()
        atomic_write(self.run_dir / STATE_FILE, json.dumps(state, default=str))

    def flush(self) -> None:
        write_table(self.turns, TURN_SCHEMA, self.run_dir / "turns.parquet", self.run_id)
        write_table(self.calls, TOOL_SCHEMA, self.run_dir / "tool_calls.parquet", self.run_id)

    def write_record(self) -> None:
        write_meta(self.run_dir, self.record)

    def write_spec(self, spec: Any) -> None:
        """key.json: the resolved run (record.spec.RunSpec) its key hashes, so a key can be explained."""
        atomic_write(self.run_dir / SPEC_FILE, spec.describe())

    def close(self) -> None:
        self.flush()
        self._trace.close()


def write_meta(run_dir: Path, record: RunRecord | dict) -> None:
    """run_meta.json, atomically, in the current schema."""
    if isinstance(record, dict):
        record = RunRecord.from_dict(record)
    atomic_write(Path(run_dir) / "run_meta.json", json.dumps(bounds.json_safe(record.to_dict()), indent=2, default=str))


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


SPEC_CAP = 4 * 1024**2  # key.json holds a config, a prompt and tool schemas: far under this


def read_spec(run_dir: Path) -> Optional["RunSpec"]:
    """key.json as the run wrote it (a regular file, never through a link), or None when there is none.
    Raises ValueError naming the problem when it is there but damaged."""
    from ..corpus import safefs
    from .spec import RunSpec

    data = safefs.read_bytes(Path(run_dir), SPEC_FILE, cap=SPEC_CAP + 1)
    if data is None:
        return None
    if len(data) > SPEC_CAP:
        raise ValueError(f"{SPEC_FILE} is over {SPEC_CAP} bytes")
    try:
        return RunSpec.from_dict(bounds.loads(data))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{SPEC_FILE}: {exc}") from None


def read_state(run_dir: Path) -> Optional[dict]:
    """state.json, the checkpoint a resume continues (never through a link, capped, depth-limited), or None when there
    is none; DamagedArtifact when it is there but empty, garbage, nested too deep or not an object naming its harness."""
    from . import artifacts

    if not os.path.lexists(Path(run_dir) / STATE_FILE):
        return None
    state = artifacts.read_json(run_dir, STATE_FILE, artifacts.STATE_CAP)
    if not isinstance(state, dict):
        raise artifacts.DamagedArtifact(f"{STATE_FILE}: holds {type(state).__name__}, not a checkpoint object")
    if not isinstance(state.get("harness", "native"), str):
        raise artifacts.DamagedArtifact(f"{STATE_FILE}: its harness is not a name")
    return state
