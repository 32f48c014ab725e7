"""Sweeps under the outputs directory for the browser: their runs tables, axes, report figures and summary."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import sys
from pathlib import Path
from typing import Optional

import pyarrow.parquet as pq

from . import markdown
from .runview import NotFound, json_safe

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=,+-]{0,200}")
FIGURE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.(png|svg)")
REPORT_DIR = "report"  # where the browser renders a sweep's figures (searchbox.report --out SWEEP/report)
REPORT_TIMEOUT_S = 600.0
MAX_ROWS = 5000
# The columns the runs table shows first (others stay available); axes are added after run_id.
PREFERRED = ("run_id", "question_id", "question_type", "stop_reason", "turns", "tool_calls", "tokens_total", "tokens_cached",
             "elapsed_s", "correct", "contains", "exact_match", "f1", "judge", "retrieval_hit", "answer_chars")


def sweeps_root(outputs: Path) -> Path:
    return Path(outputs) / "sweeps"


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def sweep_dir(outputs: Path, name: str) -> Path:
    """A sweep by name: a plain directory directly under outputs/sweeps/."""
    if not NAME.fullmatch(name or "") or name in (".", ".."):
        raise NotFound(f"no such sweep: {name!r}")
    path = sweeps_root(outputs) / name
    if not _is_dir(path):
        raise NotFound(f"no such sweep: {name}")
    return path


def figures(sweep: Path) -> list[str]:
    report = sweep / REPORT_DIR
    if not _is_dir(report):
        return []
    with os.scandir(report) as it:
        return sorted(e.name for e in it if FIGURE.fullmatch(e.name) and e.is_file(follow_symlinks=False))


def figure_path(outputs: Path, name: str, figure: str) -> Path:
    sweep = sweep_dir(outputs, name)
    if not FIGURE.fullmatch(figure or "") or figure not in figures(sweep):
        raise NotFound(f"no such figure: {figure!r}")
    return sweep / REPORT_DIR / figure


def list_sweeps(outputs: Path) -> list[dict]:
    root = sweeps_root(outputs)
    if not _is_dir(root):
        return []
    out = []
    with os.scandir(root) as it:
        entries = sorted((e for e in it if e.is_dir(follow_symlinks=False) and NAME.fullmatch(e.name)), key=lambda e: e.name)
    for e in entries:
        path = Path(e.path)
        runs_dir = path / "runs"
        n_runs = sum(1 for r in os.scandir(runs_dir) if r.is_dir(follow_symlinks=False)) if _is_dir(runs_dir) else 0
        n_done = sum(1 for _ in path.glob("runs/*/DONE"))
        out.append({"name": e.name, "runs": n_runs, "done": n_done, "table": (path / "runs.parquet").is_file(),
                    "figures": len(figures(path)), "mtime": e.stat(follow_symlinks=False).st_mtime})
    return out


def _runs_rows(sweep: Path) -> list[dict]:
    table = sweep / "runs.parquet"
    if table.is_file():
        return pq.read_table(table).to_pylist()
    from ..collect import collect  # a sweep still running (or never collected): collect on the fly

    runs, _, _ = collect([sweep])
    return runs.to_dict("records")


def _axes(sweep: Path, rows: list[dict]) -> list[str]:
    """Axis names as the runs recorded them (run_meta `axes`), in the order the sweep gave them."""
    from ..record import read_meta

    for row in rows[:20]:
        rd = sweep / "runs" / str(row.get("run_id", ""))
        if (rd / "run_meta.json").is_file():
            try:
                return [k for k in (read_meta(rd).get("axes") or {}) if any(k in r for r in rows[:1])]
            except (OSError, ValueError):
                continue
    return []


def sweep_detail(outputs: Path, name: str) -> dict:
    sweep = sweep_dir(outputs, name)
    rows = _runs_rows(sweep)
    axes = _axes(sweep, rows)
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    shown = [c for c in ("run_id", *axes) if c in columns] + [c for c in PREFERRED if c in columns and c not in axes and c != "run_id"]
    out_rows = []
    for row in rows[:MAX_ROWS]:
        r = {k: json_safe(v) for k, v in row.items() if k not in ("answer_text", "config")}
        run_id = str(row.get("run_id", ""))
        r["_ref"] = f"sweeps/{name}/runs/{run_id}" if run_id and _is_dir(sweep / "runs" / run_id) else None
        out_rows.append(r)
    summary = sweep / REPORT_DIR / "summary.md"
    summary_html = ""
    if summary.is_file() and not summary.is_symlink():
        summary_html = markdown.render(summary.read_text(encoding="utf-8", errors="replace")[:500_000],
                                       image_base=f"/sweeps/{name}/figures/")
    return {"name": name, "axes": axes, "columns": columns, "shown": shown, "rows": out_rows, "total_rows": len(rows),
            "figures": figures(sweep), "summary_html": summary_html}


async def render_report(outputs: Path, name: str, python: str = sys.executable, timeout_s: float = REPORT_TIMEOUT_S) -> dict:
    """`python -m searchbox.report SWEEP --out SWEEP/report` in a subprocess (matplotlib stays out of the server)."""
    sweep = sweep_dir(outputs, name)
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "searchbox.report", str(sweep), "--out", str(sweep / REPORT_DIR), "--label", name,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MPLBACKEND": "Agg"})
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return {"ok": False, "error": f"report did not finish within {timeout_s:.0f}s"}
    if proc.returncode != 0:
        return {"ok": False, "error": last_reason(err.decode("utf-8", errors="replace"), proc.returncode)}
    return {"ok": True, "figures": figures(sweep)}


def last_reason(stderr: str, code: Optional[int]) -> str:
    """The line a person should see from a failed child: its `searchbox: ...` line, else its last line."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    for line in reversed(lines):
        if line.startswith("searchbox:"):
            return line
    return (lines[-1] if lines else "") or f"exited with code {code}"
