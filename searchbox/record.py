"""The run's artifacts and their schemas (SPEC §6); the Recorder is their only writer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from . import SCHEMA_VERSION
from .paths import atomic_write

TURN_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("turn", pa.int32()),
    ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("cached_tokens", pa.int64()),
    ("prompt_tokens_cum", pa.int64()), ("completion_tokens_cum", pa.int64()), ("cached_tokens_cum", pa.int64()),
    ("context_tokens", pa.int64()), ("llm_calls", pa.int32()), ("llm_ms", pa.float64()), ("tool_ms", pa.float64()),
    ("tool_calls", pa.int32()), ("compactions", pa.int32()), ("answer_chars", pa.int64()), ("answer_changed", pa.bool_()),
    ("elapsed_ms", pa.float64()), ("ended_by", pa.string()),
])

TOOL_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("turn", pa.int32()), ("step", pa.int32()), ("call_id", pa.string()), ("tool", pa.string()),
    ("arguments", pa.string()), ("programs", pa.list_(pa.string())), ("paths", pa.list_(pa.string())),
    ("duration_ms", pa.float64()), ("ok", pa.bool_()), ("error", pa.string()), ("output_chars", pa.int64()),
])

ARTIFACTS = ("run_meta.json", "turns.parquet", "tool_calls.parquet", "trace.jsonl", "snapshots/")


def write_table(rows: list[dict], schema: pa.Schema, path: Path) -> None:
    """Rows to parquet with the schema and its version in the file metadata, atomically."""
    table = pa.Table.from_pylist(rows, schema=schema)
    table = table.replace_schema_metadata({"searchbox_schema_version": str(SCHEMA_VERSION)})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


class Recorder:
    """Appends the trace as it happens; rewrites the tables after every turn so a crash loses no finished turn."""

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.turns: list[dict] = []
        self.calls: list[dict] = []
        (self.run_dir / "snapshots").mkdir(parents=True, exist_ok=True)
        # A stray undecodable character must never cost the log: it is replaced, not raised.
        self._trace = open(self.run_dir / "trace.jsonl", "a", encoding="utf-8", errors="replace")

    def event(self, kind: str, turn: int, **data: Any) -> None:
        """One trace line: a message the conversation gained, or a harness event (compaction, stop)."""
        line = {"type": kind, "turn": turn, "t": round(time.time(), 3), **data}
        self._trace.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._trace.flush()

    def message(self, turn: int, message: dict) -> None:
        self.event("message", turn, message=message)

    def tool_call(self, row: dict) -> None:
        self.calls.append({"run_id": self.run_id, **row})

    def turn(self, row: dict) -> None:
        self.turns.append({"run_id": self.run_id, **row})
        self.flush()

    def snapshot(self, turn: int, text: str) -> None:
        atomic_write(self.run_dir / "snapshots" / f"ANSWER-t{turn}.md", text)

    def flush(self) -> None:
        write_table(self.turns, TURN_SCHEMA, self.run_dir / "turns.parquet")
        write_table(self.calls, TOOL_SCHEMA, self.run_dir / "tool_calls.parquet")

    def meta(self, meta: dict) -> None:
        write_meta(self.run_dir, meta)

    def close(self) -> None:
        self.flush()
        self._trace.close()


def write_meta(run_dir: Path, meta: dict) -> None:
    """run_meta.json, atomically, stamped with the schema version (the recorder, and grading after it)."""
    atomic_write(Path(run_dir) / "run_meta.json", json.dumps({"schema_version": SCHEMA_VERSION, **meta}, indent=2, default=str))


def read_meta(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "run_meta.json").read_text(encoding="utf-8"))
