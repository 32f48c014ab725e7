"""Scoring scout references against pinned labels, and evaluating a policy over a task set.

Per task: status, file hit (a reference in a target file), target hit (a reference range that
overlaps a target range), line precision (share of cited lines that are target lines) and line
recall (share of target lines cited). Precision is undefined (NaN, never 0) when nothing was cited.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import SCHEMA_VERSION
from ..paths import atomic_write
from .config import ScoutConfig
from .executor import Reference
from .loop import run_scout
from .tasks import Target, TaskSet, verify


@dataclass
class Score:
    file_hit: bool
    target_hit: bool
    line_precision: float
    line_recall: float
    cited_lines: int
    target_lines: int


def _lines(ranges: Iterable[tuple[str, int, int]]) -> set[tuple[str, int]]:
    return {(path, n) for path, a, b in ranges for n in range(a, b + 1)}


def score(references: Iterable[Reference | dict], targets: Iterable[Target]) -> Score:
    refs = [r if isinstance(r, Reference) else Reference(r["path"], int(r["start_line"]), int(r["end_line"]), r.get("sha256", "")) for r in references]
    targets = list(targets)
    cited = _lines((r.path, r.start_line, r.end_line) for r in refs)
    wanted = _lines((t.path, t.start_line, t.end_line) for t in targets)
    both = len(cited & wanted)
    file_hit = any(r.path == t.path for r in refs for t in targets)
    target_hit = any(r.path == t.path and r.start_line <= t.end_line and t.start_line <= r.end_line for r in refs for t in targets)
    precision = both / len(cited) if cited else math.nan
    recall = both / len(wanted) if wanted else math.nan
    return Score(file_hit, target_hit, precision, recall, len(cited), len(wanted))


ROW_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("repository", pa.string()), ("query", pa.string()), ("policy", pa.string()), ("model", pa.string()),
    ("budget", pa.int32()), ("status", pa.string()), ("rounds", pa.int32()), ("file_hit", pa.bool_()), ("target_hit", pa.bool_()),
    ("line_precision", pa.float64()), ("line_recall", pa.float64()), ("cited_lines", pa.int64()), ("target_lines", pa.int64()),
    ("references", pa.string()), ("targets", pa.string()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
    ("total_tokens", pa.int64()), ("elapsed_s", pa.float64()), ("detail", pa.string()), ("run_dir", pa.string()),
])


def evaluate(cfg: ScoutConfig, tasks: TaskSet, repos: Path, endpoint: Optional[str], out: Optional[Path] = None,
             limit: Optional[int] = None, progress: bool = True, axes: Optional[dict] = None) -> tuple[pd.DataFrame, dict]:
    """Run every task (verified first) and score it; with `out`, write runs/, tasks.parquet, summary.json and summary.md."""
    chosen = tasks.tasks[:limit] if limit else tasks.tasks
    verify(tasks, repos, chosen)
    label = "keyword" if cfg.policy == "keyword" else cfg.model.name
    rows = []
    with tempfile.TemporaryDirectory(prefix="scout-eval-") as tmp:
        runs_root = (Path(out) / "runs") if out else Path(tmp)
        for i, task in enumerate(chosen, 1):
            t0 = time.monotonic()
            extra = {"question_id": task.id, "axes": {"policy": cfg.policy, "model": label, "budget": cfg.budget, **(axes or {})},
                     "sweep": tasks.name}
            result = run_scout(cfg, task.query, Path(repos) / task.repository, runs_root / task.slug, endpoint, extra_meta=extra)
            s = score(result.references, task.targets)
            rows.append({
                "task_id": task.id, "repository": task.repository, "query": task.query, "policy": cfg.policy, "model": label,
                "budget": cfg.budget, "status": result.status, "rounds": result.rounds, "file_hit": s.file_hit, "target_hit": s.target_hit,
                "line_precision": s.line_precision, "line_recall": s.line_recall, "cited_lines": s.cited_lines, "target_lines": s.target_lines,
                "references": json.dumps([r.to_dict() for r in result.references]), "targets": json.dumps([t.to_dict() for t in task.targets]),
                "prompt_tokens": result.tokens["prompt"], "completion_tokens": result.tokens["completion"], "total_tokens": result.tokens["total"],
                "elapsed_s": round(time.monotonic() - t0, 3), "detail": result.detail, "run_dir": result.run_dir if out else "",
            })
            if progress:
                print(f"[scout] {i}/{len(chosen)} {task.id}: {result.status}, target hit {s.target_hit}, {result.rounds} rounds",
                      file=sys.stderr, flush=True)
    frame = pd.DataFrame(rows, columns=ROW_SCHEMA.names)
    summary = summarize(frame, tasks.name, cfg, label)
    if out:
        write(Path(out), frame, summary)
    return frame, summary


def summarize(frame: pd.DataFrame, name: str, cfg: ScoutConfig, label: str) -> dict:
    n = len(frame)
    statuses = frame["status"].value_counts().to_dict() if n else {}
    precision = frame["line_precision"].dropna()
    return {
        "name": name, "policy": cfg.policy, "model": label, "budget": cfg.budget, "tasks": n,
        "completed": int(statuses.get("completed", 0)), "abstained": int(statuses.get("abstained", 0)),
        "budget_exhausted": int(statuses.get("budget_exhausted", 0)), "model_error": int(statuses.get("model_error", 0)),
        "file_hits": int(frame["file_hit"].sum()) if n else 0, "target_hits": int(frame["target_hit"].sum()) if n else 0,
        "mean_line_precision": float(precision.mean()) if len(precision) else None,
        "precision_tasks": int(len(precision)),  # tasks with at least one reference (precision is undefined without)
        "mean_line_recall": float(frame["line_recall"].mean()) if n else None,
        "mean_rounds": float(frame["rounds"].mean()) if n else None,
        "total_tokens": int(frame["total_tokens"].sum()) if n else 0,
        "schema_version": SCHEMA_VERSION,
    }


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def summary_line_table(summaries: list[dict]) -> str:
    cols = ["policy", "model", "budget", "tasks", "completed", "abstained", "budget_exhausted", "model_error", "file_hits",
            "target_hits", "mean_line_precision", "mean_line_recall", "mean_rounds", "total_tokens"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_fmt(s.get(c)) for c in cols) + " |" for s in summaries]
    return "\n".join(out)


def markdown(frame: pd.DataFrame, summary: dict) -> str:
    lines = [f"# scout evaluation: {summary['name']}", "", summary_line_table([summary]), "",
             "Line precision is averaged over the tasks with at least one reference "
             f"({summary['precision_tasks']} of {summary['tasks']}); recall over all tasks.", "",
             "| task | status | rounds | file hit | target hit | precision | recall | references |", "|---|---|---|---|---|---|---|---|"]
    for row in frame.itertuples():
        refs = ", ".join(f"{r['path']}:{r['start_line']}-{r['end_line']}" for r in json.loads(row.references)) or "-"
        lines.append(f"| {row.task_id} | {row.status} | {row.rounds} | {'yes' if row.file_hit else 'no'} | "
                     f"{'yes' if row.target_hit else 'no'} | {_fmt(row.line_precision)} | {_fmt(row.line_recall)} | {refs} |")
    return "\n".join(lines) + "\n"


def write(out: Path, frame: pd.DataFrame, summary: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, schema=ROW_SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({"searchbox_schema_version": str(SCHEMA_VERSION)})
    tmp = out / ".tasks.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(out / "tasks.parquet")
    atomic_write(out / "summary.json", json.dumps(summary, indent=2))
    atomic_write(out / "summary.md", markdown(frame, summary))

