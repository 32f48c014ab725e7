"""The typed run record: one schema, written by the recorder, read back by everyone, old runs upgraded."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.parquet as pq

from searchbox import SCHEMA_VERSION
from searchbox.record import RunRecord, read_meta, read_record, update_grades, write_meta
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
