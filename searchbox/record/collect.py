"""Merge finished run directories into sweep tables: runs.parquet, turns.parquet, tool_calls.parquet.

    python -m searchbox.collect SWEEP_DIR... [--out DIR]

Each run is counted once (by run_id, the last directory wins) in all three tables together. The
design of every run (its resolved config flattened to dotted keys such as `model.temperature`,
the sweep's axes, the dataroom identity and the served model) is a column of runs.parquet, and
every design value that varies across the collected runs is a column of turns and tool_calls
too; the names of the design columns travel in each table's metadata (`searchbox_design`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import SCHEMA_VERSION
from ..config import stable_hash
from ..errors import SearchboxError
from . import artifacts, done
from .done import DONE  # noqa: F401 - re-exported: the marker every reader of run folders names
from .record import TOOL_SCHEMA, TURN_SCHEMA, read_spec
from .stale import QuestionTexts
# The hook that regrades a run whose question file's gold changed since it was graded (grading is a floor above record,
# so its callers pass it in: grading.cli.stale_regrader): (run dir, its record) -> the record with its new grades, or a
# SearchboxError saying why it cannot.
Regrade = Callable[[Path, dict], dict]
MALFORMED = "(malformed)"  # how schema-1 runs logged a malformed reply in tool_calls
DESIGN_META = b"searchbox_design"
# Run-level design facts besides config and axes: what the agent searched and what answered.
IDENTITY_COLUMNS = ("dataroom_identity", "dataroom_sha256", "served_model_id", "served_gguf_sha256", "served_policy", "prompt_identity")
DROPPED_GRADES = ("retrieval_hit",)  # schema-1 grade from paths named in arguments; evidence_recall replaces it


def run_dirs(sweep_dirs: Iterable[Path]) -> list[Path]:
    """Run directories with a DONE marker under each sweep's runs/ (or the dirs themselves when they are runs);
    links are not followed (collect then checks each: done.check)."""
    out = []
    for d in sweep_dirs:
        d = Path(d)
        if done.marked(d):
            out.append(d)
            continue
        out.extend(p for p in sorted((d / "runs").glob("*")) if done.marked(p))
    return out


def _cell(value: Any) -> Any:
    """A parquet-friendly scalar: lists and dicts as JSON text."""
    return json.dumps(value, sort_keys=True, default=str) if isinstance(value, (list, tuple, dict)) else value


def flatten_config(config: dict, prefix: str = "") -> dict:
    """{"model": {"temperature": 0.7}} -> {"model.temperature": 0.7}; lists become JSON text."""
    out = {}
    for key, value in (config or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten_config(value, name + "."))
        else:
            out[name] = _cell(value)
    return out


def flatten_meta(meta: dict) -> dict:
    """One runs.parquet row: scalars as is, nested records as `parent_child`, grades bare, config dotted, axes as named."""
    row: dict = {}
    for key, value in meta.items():
        if key in ("config", "answer", "axes"):
            continue
        if key == "tools":
            row["tools_enabled"] = ",".join(map(str, value or []))
        elif isinstance(value, dict):
            for sub, v in value.items():
                if not isinstance(v, (dict, list)) and not (key == "grades" and sub in DROPPED_GRADES):
                    row[f"{key}_{sub}" if key != "grades" else sub] = v
        elif isinstance(value, list):
            row[key] = json.dumps(value)
        else:
            row[key] = value
    config = flatten_config(meta.get("config") or {})
    row.update(config)
    for key, value in (meta.get("axes") or {}).items():
        if "." not in key or key not in config:  # a dotted override's typed config value wins over its text
            row[key] = _cell(value)
    row["answer_text"] = meta.get("answer", "")
    return row


def design_of(meta: dict) -> list[str]:
    """The design columns of one run: axes, config keys, and identity columns it has."""
    return [*(meta.get("axes") or {}), *flatten_config(meta.get("config") or {})]


def _varying(df: pd.DataFrame, columns: list[str]) -> list[str]:
    return [c for c in columns if c in df.columns and df[c].astype(str).nunique(dropna=False) > 1]


def _upgrade_malformed(calls: pd.DataFrame, turns: pd.DataFrame, row: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Schema-1 runs logged malformed replies as tool calls: count them per turn instead, as the agent now does."""
    if "tool" not in calls.columns or not (calls["tool"] == MALFORMED).any():
        if "malformed" not in turns.columns:
            turns = turns.assign(malformed=0)
        return calls, turns
    bad = calls[calls["tool"] == MALFORMED].groupby("turn").size()
    calls = calls[calls["tool"] != MALFORMED].reset_index(drop=True)
    per_turn = turns["turn"].map(bad).fillna(0).astype(int)
    turns = turns.assign(malformed=per_turn, tool_calls=(turns["tool_calls"] - per_turn).clip(lower=0))
    row["malformed_replies"] = int(bad.sum())
    if isinstance(row.get("tool_calls"), (int, float)) and not (isinstance(row["tool_calls"], float) and math.isnan(row["tool_calls"])):
        row["tool_calls"] = max(0, int(row["tool_calls"]) - int(bad.sum()))
    return calls, turns


def prompt_identity(run_dir: Path) -> Optional[str]:
    """A digest of what the run sent beside its config and question (key.json's prompt: the system prompt, the tools
    as sent, the protocol and its schema version; the server flags that can change numbers; the harness's pin), or
    None for a run without key.json. Two runs of one config that sent different prompts (the code changed between
    launches into one sweep folder) differ here, so the analysis splits them rather than pooling them as replicates."""
    try:
        spec = read_spec(run_dir)
    except ValueError:
        return None
    return stable_hash(spec.prompt, spec.server_args, spec.harness, length=12) if spec else None


def regrade_hint(rd: Path) -> str:
    """The command that regrades a run's sweep (or the run itself, outside a sweep's runs/)."""
    return f"python -m searchbox.grade {rd.parent.parent if rd.parent.name == 'runs' else rd}"


def stale_grades(sweep_dirs: Iterable[Path]) -> list[tuple[Path, dict, str]]:
    """(run dir, record, why) of every finished run under sweep_dirs whose grades were computed against another gold
    than its question file now holds (stale.py); reads only each run's record. A damaged run is collect's to name."""
    texts, out = QuestionTexts(), []
    for rd in run_dirs(sweep_dirs):
        try:
            meta = done.read_record(rd).to_dict()
        except artifacts.DamagedArtifact:
            continue
        why = None if texts.why_stale(meta) else texts.why_regrade(meta)
        if why is not None:
            out.append((rd, meta, why))
    return out


def collect(sweep_dirs: Iterable[Path], left_out: Optional[list[str]] = None,
            regrade: Optional[Regrade] = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The three tables of every finished run under sweep_dirs, each run once.

    A run folder that cannot be trusted (done.check: a damaged record or table, a link) and a run whose question was
    reworded or removed from its file since (stale.py) are left out; `left_out` gets one line for each. A run whose
    question file's gold changed since it was graded is regraded through `regrade` (grading.cli.stale_regrader; the
    sweep and the report pass it), else left out in one line naming the run, the question and the command that
    regrades it: a row never carries a grade of a gold its file no longer holds, and one stale run does not stop the
    tables of the others (the sweep collects as it goes, the web app on every page)."""
    notes = left_out if left_out is not None else []
    texts = QuestionTexts()
    kept: dict[str, tuple[Path, dict, pd.DataFrame, pd.DataFrame]] = {}
    for rd in run_dirs(sweep_dirs):
        try:
            meta = done.read_record(rd).to_dict()
            t = _table(rd, "turns.parquet", TURN_SCHEMA)
            c = _table(rd, "tool_calls.parquet", TOOL_SCHEMA)
        except artifacts.DamagedArtifact as exc:
            notes.append(done.Damaged(rd, str(exc)).line())
            continue
        why = texts.why_stale(meta)
        if why is not None:
            notes.append(f"{rd}: stale run left out ({why})")
            continue
        why = texts.why_regrade(meta)
        if why is not None:
            if regrade is None:
                notes.append(f"{rd}: stale grade left out ({why}; regrade it: {regrade_hint(rd)})")
                continue
            try:
                meta = regrade(rd, meta)
            except SearchboxError as exc:
                notes.append(f"{rd}: stale grade left out ({why}; the regrade failed: {str(exc).splitlines()[0][:300]})")
                continue
        run_id = meta.get("run_id") or rd.name
        kept.pop(run_id, None)  # the same run collected twice (a dir given twice, merged sweeps): the last one wins
        kept[run_id] = (rd, meta, t, c)
    runs, turns, calls, design = [], [], [], {}
    for run_id, (rd, meta, t, c) in kept.items():
        row = flatten_meta(meta)
        row["run_id"], row["run_dir"] = run_id, str(rd)
        row["prompt_identity"] = prompt_identity(rd)
        design.update(dict.fromkeys(design_of(meta)))
        c, t = _upgrade_malformed(c, t, row)
        runs.append(row)
        turns.append(t.assign(run_id=run_id))
        calls.append(c.assign(run_id=run_id))
    runs_df = pd.DataFrame(runs)
    design_cols = [c for c in [*design, *IDENTITY_COLUMNS] if c in runs_df.columns]
    keyed = _axes_keys(kept) | set(_varying(runs_df, design_cols))  # once: per column it made collect quadratic
    shared = ["question_id", *[c for c in design_cols if c in keyed]]
    turns_df = _with_run_columns(turns, TURN_SCHEMA, runs_df, shared)
    calls_df = _with_run_columns(calls, TOOL_SCHEMA, runs_df, shared)
    for df in (runs_df, turns_df, calls_df):
        df.attrs["design"] = [c for c in design_cols if c in df.columns]
    return runs_df, turns_df, calls_df


def _table(rd: Path, name: str, schema: pa.Schema) -> pd.DataFrame:
    """A run's table (its known columns, each of its type), or an empty one when the run has none."""
    if not artifacts.exists(rd, name) and not (rd / name).is_symlink():
        return schema.empty_table().to_pandas()
    return artifacts.read_table(rd, name, schema).to_pandas()


def _axes_keys(kept: dict) -> set:
    return {k for _, meta, *_ in kept.values() for k in (meta.get("axes") or {})}


def _with_run_columns(frames: list[pd.DataFrame], schema: pa.Schema, runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Concatenate per-run rows and join the run-level columns on run_id (the run's values, not the table's own)."""
    frames = [f for f in frames if not f.empty]
    base = pd.concat(frames, ignore_index=True) if frames else schema.empty_table().to_pandas()
    if runs.empty:
        return base
    cols = [c for c in dict.fromkeys(columns) if c in runs.columns and c != "run_id"]
    base = base.drop(columns=[c for c in cols if c in base.columns])
    return base.merge(runs[["run_id", *cols]], on="run_id", how="left")


def arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns that mix types (an axis given as text in one sweep, as a number in another) become text."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype != object:
            continue
        kinds = {type(v) for v in out[col] if v is not None and not (isinstance(v, float) and math.isnan(v))}
        if len(kinds) > 1 and not kinds <= {list, tuple} and not all(hasattr(k, "__array__") for k in kinds):
            out[col] = [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(_cell(v)) for v in out[col]]
    return out


def write(out_dir: Path, runs: pd.DataFrame, turns: pd.DataFrame, calls: pd.DataFrame) -> None:
    """Write the three tables atomically, schema version and design columns in the parquet metadata."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, df in (("runs", runs), ("turns", turns), ("tool_calls", calls)):
        table = pa.Table.from_pandas(arrow_safe(df), preserve_index=False)
        extra = {b"searchbox_schema_version": str(SCHEMA_VERSION).encode(), DESIGN_META: json.dumps(df.attrs.get("design", [])).encode()}
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
        tmp = out_dir / f".{name}.parquet.{os.getpid()}.tmp"  # parallel jobs collect at once: never share a temp file
        pq.write_table(table, tmp)
        tmp.replace(out_dir / f"{name}.parquet")


def read_design(path: Path) -> list[str]:
    """The design column names a table was written with ([] for tables from before they were recorded)."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(DESIGN_META, b"[]"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.collect", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: the single DIR given)")
    args = parser.parse_args(argv)
    if args.out is None and len(args.dirs) != 1:
        parser.error("--out is required when merging several sweeps")
    out = args.out or args.dirs[0]
    left_out: list[str] = []
    runs, turns, calls = collect(args.dirs, left_out)
    for line in left_out:
        print(line, file=sys.stderr)
    write(out, runs, turns, calls)
    print(f"{len(runs)} runs, {len(turns)} turns, {len(calls)} tool calls -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
