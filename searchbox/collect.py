"""Merge finished run directories into sweep tables: runs.parquet, turns.parquet, tool_calls.parquet.

    python -m searchbox.collect SWEEP_DIR... [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from . import SCHEMA_VERSION
from .record import TOOL_SCHEMA, TURN_SCHEMA, read_meta

DONE = "DONE"  # marker written last, atomically, when a run (and its grading) finished


def run_dirs(sweep_dirs: Iterable[Path]) -> list[Path]:
    """Finished run directories under each sweep's runs/ (or the dirs themselves when they are runs)."""
    out = []
    for d in sweep_dirs:
        d = Path(d)
        if (d / DONE).exists():
            out.append(d)
            continue
        out.extend(sorted(p.parent for p in d.glob(f"runs/*/{DONE}")))
    return out


def flatten_meta(meta: dict) -> dict:
    """One runs.parquet row: scalars as is, tokens/grades/retrieval flattened, axes as plain columns."""
    row: dict = {}
    for key, value in meta.items():
        if key in ("config", "answer", "axes"):
            continue
        if key == "tools":
            row["tools_enabled"] = ",".join(value)
        elif isinstance(value, dict):
            for sub, v in value.items():
                if not isinstance(v, (dict, list)):
                    row[f"{key}_{sub}" if key != "grades" else sub] = v
        elif isinstance(value, list):
            row[key] = json.dumps(value)
        else:
            row[key] = value
    row.update(meta.get("axes") or {})
    row["answer_text"] = meta.get("answer", "")
    return row


def _table(frames: list[pd.DataFrame], schema: pa.Schema) -> pd.DataFrame:
    if not frames:
        return schema.empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)


def collect(sweep_dirs: Iterable[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    runs, turns, calls = [], [], []
    for rd in run_dirs(sweep_dirs):
        meta = read_meta(rd)
        row = flatten_meta(meta)
        row["run_dir"] = str(rd)
        runs.append(row)
        keys = {k: row.get(k) for k in ["question_id", *(meta.get("axes") or {})]}
        for name, bucket in (("turns.parquet", turns), ("tool_calls.parquet", calls)):
            if (rd / name).exists():
                df = pd.read_parquet(rd / name)
                for k, v in keys.items():
                    df[k] = v if not isinstance(v, (list, dict)) else json.dumps(v)
                bucket.append(df)
    runs_df = pd.DataFrame(runs)
    if not runs_df.empty:
        runs_df = runs_df.drop_duplicates("run_id", keep="last").reset_index(drop=True)
    return runs_df, _table(turns, TURN_SCHEMA), _table(calls, TOOL_SCHEMA)


def write(out_dir: Path, runs: pd.DataFrame, turns: pd.DataFrame, calls: pd.DataFrame) -> None:
    """Write the three tables atomically, schema version in the parquet metadata."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, df in (("runs", runs), ("turns", turns), ("tool_calls", calls)):
        table = pa.Table.from_pandas(df, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"searchbox_schema_version": str(SCHEMA_VERSION).encode()})
        tmp = out_dir / f".{name}.parquet.{os.getpid()}.tmp"  # parallel jobs collect at once: never share a temp file
        pq.write_table(table, tmp)
        tmp.replace(out_dir / f"{name}.parquet")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.collect", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: the single DIR given)")
    args = parser.parse_args(argv)
    if args.out is None and len(args.dirs) != 1:
        parser.error("--out is required when merging several sweeps")
    out = args.out or args.dirs[0]
    runs, turns, calls = collect(args.dirs)
    write(out, runs, turns, calls)
    print(f"{len(runs)} runs, {len(turns)} turns, {len(calls)} tool calls -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
