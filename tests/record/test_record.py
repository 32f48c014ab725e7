"""The typed run record: one schema, written by the recorder, read back by everyone, old runs upgraded."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.parquet as pq

from searchbox import SCHEMA_VERSION
from searchbox.record.record import RunRecord, read_meta, read_record, update_grades, write_meta
from tests.conftest import run_script

V1 = {"schema_version": 1, "run_id": "abc", "question": "q?", "status": "complete", "model": "smollm2-135m-id",
      "model_label": "smollm2-135m", "endpoint": "http://x", "stop_reason": "budget_spent", "turns": 2,
      "tokens": {"prompt": 10, "completion": 2, "cached": 4, "total": 12, "uncached_prompt": 6},
      "dataroom": {"source": "d.zip", "sha256": "ff", "files": 3, "bytes": 9}, "gold_answer": "38.4 metres",
      "grades": {"contains": 1.0}, "question_id": "nw01", "axes": {"tools": "none"}, "unknown_old_field": 1}


def test_v1_run_meta_is_upgraded_on_read(tmp_path):
    (tmp_path / "run_meta.json").write_text(json.dumps(V1))
    meta = read_meta(tmp_path)
    assert meta["schema_version"] == SCHEMA_VERSION and "unknown_old_field" not in meta
    assert meta["model"] == "smollm2-135m" and meta["served"]["model_id"] == "smollm2-135m-id"
    assert meta["gold"]["answer"] == "38.4 metres" and meta["dataroom"]["identity"] == "ff"
    assert meta["tokens"]["estimated_calls"] == 0 and meta["grades"]["grader_version"] == "v1"


def test_run_meta_has_exactly_the_record_fields(tmp_path):
    meta, _, run_dir = run_script(tmp_path, [{"content": "x"}])
    on_disk = json.loads((run_dir / "run_meta.json").read_text())
    assert set(on_disk) == {f.name for f in dataclasses.fields(RunRecord)}
    assert on_disk["status"] == "complete" and on_disk["schema_version"] == SCHEMA_VERSION
    for table in ("turns.parquet", "tool_calls.parquet"):
        assert pq.read_schema(run_dir / table).metadata[b"searchbox_schema_version"] == str(SCHEMA_VERSION).encode()


def test_grades_are_written_through_the_record(tmp_path):
    _, _, run_dir = run_script(tmp_path, [{"content": "x"}])
    update_grades(run_dir, {"contains": 0.0, "grader_version": "g2"})
    record = read_record(run_dir)
    assert record.grades == {"contains": 0.0, "grader_version": "g2"} and record.stop_reason == "budget_spent"
    write_meta(run_dir, record.to_dict())  # a dict round-trips through the schema too
    assert read_meta(run_dir) == record.to_dict()


# ---- typed rows: their fields are the schemas --------------------------------------------------------
def test_row_classes_define_the_table_schemas():
    import pyarrow as pa

    from searchbox.record.record import TOOL_SCHEMA, TURN_SCHEMA, ToolRow, TurnRow

    for row_class, schema in ((TurnRow, TURN_SCHEMA), (ToolRow, TOOL_SCHEMA)):
        assert schema.names == ["run_id"] + [f.name for f in dataclasses.fields(row_class)]
        assert all(schema.field(f.name).type == f.metadata["arrow"] for f in dataclasses.fields(row_class))
    assert TOOL_SCHEMA.field("malformed").type == pa.bool_() and TURN_SCHEMA.field("turn").type == pa.int32()


def _tool_row(**over) -> dict:
    row = {"turn": 1, "step": 1, "call_id": "c", "tool": "ls", "arguments": "{}", "programs": [], "paths": [], "duration_ms": 1.0,
           "setup_ms": 0.0, "ok": True, "error": "", "output_chars": 3, "delivered": "", "malformed": False}
    return {**row, **over}


def test_a_row_with_an_unknown_or_missing_field_is_an_error(tmp_path):
    import pytest

    from searchbox.record.record import Recorder

    rec = Recorder(tmp_path, RunRecord(run_id="r"))
    with pytest.raises(ValueError, match="unknown field.*tool_name"):
        rec.tool_call(_tool_row(tool_name="ls"))
    with pytest.raises(ValueError, match="missing field.*malformed"):
        rec.tool_call({k: v for k, v in _tool_row().items() if k != "malformed"})
    rec.tool_call(_tool_row())
    rec.close()
    assert pq.read_table(tmp_path / "tool_calls.parquet").to_pylist()[0]["run_id"] == "r"


def test_no_value_can_fail_a_table_write(tmp_path):
    """A numeric tool name, a lone surrogate, a count of 10**30, NaN, a non-list: typed and bounded, and the trace says so."""
    from searchbox.record.record import ROW_TEXT_CAP, Recorder, read_rows

    rec = Recorder(tmp_path, RunRecord(run_id="r"))
    rec.tool_call(_tool_row(tool=12345, arguments='{"path": "\ud83d"}', output_chars=10**30, duration_ms=float("nan"),
                            paths="not a list", programs=["ok", 7], error="x" * (ROW_TEXT_CAP + 10)))
    rec.turn({"turn": 1, "prompt_tokens": 10**30, "completion_tokens": -(10**30), "cached_tokens": 2, "prompt_tokens_cum": 1,
              "completion_tokens_cum": 1, "cached_tokens_cum": 1, "context_tokens": "lots", "llm_calls": 2**40, "llm_ms": float("inf"),
              "tool_ms": 1.0, "setup_ms": 0.0, "tool_calls": 1, "malformed": 0, "estimated_calls": 0, "compactions": 0,
              "answer_chars": 1, "answer_changed": 1, "elapsed_ms": 5.0, "ended_by": "no\ud800pe"})
    rec.close()
    call, = read_rows(tmp_path / "tool_calls.parquet")
    assert call["tool"] == "12345" and call["arguments"] == '{"path": "\ufffd"}' and call["output_chars"] == 2**63 - 1
    assert call["duration_ms"] is None and call["paths"] == [] and call["programs"] == ["ok", "7"]
    assert len(call["error"]) < ROW_TEXT_CAP + 100
    turn, = read_rows(tmp_path / "turns.parquet")
    assert turn["prompt_tokens"] == 2**63 - 1 and turn["completion_tokens"] == -(2**63) and turn["llm_calls"] == 2**31 - 1
    assert turn["context_tokens"] == 0 and turn["llm_ms"] is None and turn["answer_changed"] is True and turn["ended_by"] == "no\ufffdpe"
    flagged = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert {e["table"] for e in flagged if e["type"] == "row_bounded"} == {"tool_calls", "turns"}


def test_old_tables_still_load(tmp_path):
    """A run's tables from before a column existed: the recorder (resume) and collect read them."""
    import pyarrow as pa

    from searchbox.record.collect import collect
    from searchbox.record.record import Recorder, ToolRow

    _, _, run_dir = run_script(tmp_path, [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"content": "x"}])
    old = pq.read_table(run_dir / "tool_calls.parquet").drop_columns(["malformed"])
    pq.write_table(old, run_dir / "tool_calls.parquet")
    rec = Recorder(run_dir, read_record(run_dir), resume=True)
    assert isinstance(rec.calls[0], ToolRow) and rec.calls[0].malformed is False and rec.calls[0].tool == "ls"
    rec.close()
    (run_dir / "DONE").write_text("budget_spent")
    pq.write_table(old, run_dir / "tool_calls.parquet")
    runs, turns, calls = collect([run_dir])
    assert len(runs) == 1 and list(calls["tool"]) == ["ls"]


def test_run_meta_cannot_be_broken_by_model_text(tmp_path):
    record = RunRecord(run_id="r", question="q", stop_detail="half \ud83d", answer="a\udcff", axes={"x": float("nan"), "n": 10**30})
    write_meta(tmp_path, record)
    text = (tmp_path / "run_meta.json").read_text(encoding="utf-8")
    meta = json.loads(text)
    assert meta["stop_detail"] == "half \ufffd" and meta["answer"] == "a\ufffd" and meta["axes"] == {"x": None, "n": 2**63 - 1}
