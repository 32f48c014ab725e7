"""collect: each run once in all three tables, every varying design value a column of each, malformed replies apart."""

from __future__ import annotations

import shutil

import pandas as pd

from searchbox.record.collect import collect, main, read_design, write
from tests.fakes.runs import make_run

READ = (1, "read", "     1\tsome text")


def test_a_run_collected_twice_is_counted_once(tmp_path):
    s = tmp_path / "s"
    make_run(s, "r1", outputs=[READ, READ], turns=2)
    make_run(s, "r2", outputs=[READ], turns=1)
    runs, turns, calls = collect([s, s])  # the same sweep given twice
    assert len(runs) == 2 and len(turns) == 3 and len(calls) == 3
    merged = tmp_path / "merged"
    shutil.copytree(s / "runs" / "r1", merged / "runs" / "r1")  # a merged sweep holding the same run
    runs, turns, calls = collect([s, merged])
    assert sorted(runs["run_id"]) == ["r1", "r2"] and len(turns) == 3 and len(calls) == 3
    assert runs.set_index("run_id").loc["r1", "run_dir"] == str(merged / "runs" / "r1")  # the last one wins, in every table


def test_every_varying_design_value_is_a_column_of_all_three(tmp_path):
    s = tmp_path / "s"
    make_run(s, "cold", outputs=[READ], config={"model.temperature": 0.0, "retrieval.embed_model": "a"}, axes={"tools": "high"})
    make_run(s, "warm", outputs=[READ], config={"model.temperature": 0.7, "retrieval.embed_model": "b"}, axes={"tools": "high"})
    runs, turns, calls = collect([s])
    for df in (runs, turns, calls):
        by_run = df.groupby("run_id")[["model.temperature", "retrieval.embed_model", "tools"]].first()
        assert by_run.loc["cold"].tolist() == [0.0, "a", "high"] and by_run.loc["warm"].tolist() == [0.7, "b", "high"]
    assert "harness.max_steps_per_turn" in runs.columns  # the whole resolved config is in runs.parquet
    assert "harness.max_steps_per_turn" not in turns.columns  # constant: not repeated per turn
    assert "model.temperature" in runs.attrs["design"]


def test_dataroom_and_served_model_are_design(tmp_path):
    s = tmp_path / "s"
    make_run(s, "a", served_id="SmolLM2-135M-Instruct")
    make_run(s, "b", served_id="Qwen3-0.6B")
    runs, turns, _ = collect([s])
    assert set(turns["served_model_id"]) == {"SmolLM2-135M-Instruct", "Qwen3-0.6B"}
    assert "dataroom_sha256" in runs.columns


def test_malformed_replies_are_not_tool_calls(tmp_path):
    s = tmp_path / "s"
    make_run(s, "old", outputs=[READ], old_malformed_rows=2)  # schema 1: malformed replies as "(malformed)" rows
    make_run(s, "new", outputs=[READ], malformed=3)  # schema 2: a per-turn count
    runs, turns, calls = collect([s])
    assert "(malformed)" not in set(calls["tool"]) and len(calls) == 2
    t = turns.set_index("run_id")
    assert t.loc["old", "malformed"] == 2 and t.loc["new", "malformed"] == 3
    assert t.loc["old", "tool_calls"] == 1  # the real call only
    r = runs.set_index("run_id")
    assert r.loc["old", "malformed_replies"] == 2 and r.loc["new", "malformed_replies"] == 3
    assert r.loc["old", "tool_calls"] == 1


def test_schema1_retrieval_hit_is_dropped(tmp_path):
    s = tmp_path / "s"
    make_run(s, "a", grades={"contains": 1.0, "retrieval_hit": 1.0})
    runs, _, _ = collect([s])
    assert "retrieval_hit" not in runs.columns and runs.loc[0, "contains"] == 1.0


def test_written_tables_keep_types_and_design(tmp_path):
    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    make_run(s1, "a", axes={"variant": "1"})  # an override's text in one sweep ...
    make_run(s2, "b", axes={"variant": 2})  # ... a number in another
    out = tmp_path / "out"
    assert main([str(s1), str(s2), "--out", str(out)]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    assert sorted(runs["variant"]) == ["1", "2"]
    assert "variant" in read_design(out / "turns.parquet") and "model.temperature" in read_design(out / "runs.parquet")
    assert pd.read_parquet(out / "turns.parquet")["variant"].notna().all()


def test_empty_sweep(tmp_path):
    (tmp_path / "s" / "runs").mkdir(parents=True)
    runs, turns, calls = collect([tmp_path / "s"])
    assert runs.empty and turns.empty and calls.empty
    write(tmp_path / "s", runs, turns, calls)
    assert pd.read_parquet(tmp_path / "s" / "turns.parquet").empty


def _spec(rd, protocol_version: int) -> None:
    from searchbox.record.spec import RunSpec

    spec = RunSpec(config={}, question_id="nw01", question="How tall?", dataroom="d", served={"model_id": "m"},
                   prompt={"protocol": "json", "protocol_version": protocol_version, "tools": [], "system": "s", "request": {}})
    (rd / "key.json").write_text(spec.describe(), encoding="utf-8")


def test_runs_that_sent_different_prompts_are_never_pooled(tmp_path):
    """One sweep folder, one config, launched before and after a change to what a run sends (here the JSON
    protocol's schema version): the two launches' runs are two conditions, not replicates of one."""
    from searchbox.analysis import accuracy_table, conditions

    for i, version in enumerate((2, 2, 3, 3)):
        rd = make_run(tmp_path, f"r{i}", question_id=["nw01", "nw02"][i % 2], grades={"correct": float(version == 3)})
        _spec(rd, version)
    make_run(tmp_path, "old", question_id="nw03")  # a run from before key.json existed: no identity, no crash
    runs, _, _ = collect([tmp_path])
    assert runs.set_index("run_id")["prompt_identity"].isna()["old"]
    assert runs["prompt_identity"].nunique() == 2
    conds = conditions(runs, runs.attrs["design"])
    assert "prompt_identity" in conds
    table = accuracy_table(runs[runs["prompt_identity"].notna()], "correct", conds, runs.attrs["design"])
    assert sorted(table["mean"].tolist()) == [0.0, 1.0]  # pooled, it would read 0.5


def test_the_same_prompt_adds_no_condition(tmp_path):
    from searchbox.analysis import conditions

    for i in range(2):
        _spec(make_run(tmp_path, f"r{i}", question_id=["nw01", "nw02"][i]), 3)
    runs, _, _ = collect([tmp_path])
    assert runs["prompt_identity"].nunique() == 1 and "prompt_identity" not in conditions(runs, runs.attrs["design"])


def test_collect_looks_for_varying_design_columns_once(tmp_path, monkeypatch):
    # It ran once per design column (~85), each pass over every column and run: the sweep collects after every job,
    # so a sweep of thousands of runs spent most of its time between jobs here.
    import searchbox.record.collect as collect_module

    s = tmp_path / "s"
    for i, temperature in enumerate((0.0, 0.7, 0.9)):
        make_run(s, f"r{i}", outputs=[READ], config={"model.temperature": temperature}, axes={"tools": "high"})
    seen = []
    varying = collect_module._varying
    monkeypatch.setattr(collect_module, "_varying", lambda df, cols: seen.append(len(cols)) or varying(df, cols))
    runs, turns, _ = collect([s])
    assert len(seen) == 1 and seen[0] > 10
    assert set(turns.groupby("run_id")["model.temperature"].first()) == {0.0, 0.7, 0.9}
