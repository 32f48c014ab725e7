"""Sweeps under the outputs directory for the browser: their runs tables, axes, report figures and summary.

A sweep's report is what `python -m searchbox.report` drew for it: under OUTPUTS/reports/NAME (where main.sh and
the page's Render button write it) or, from before, SWEEP/report; the newer of the two is shown.
"""

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
IMAGE_LINE = re.compile(r"\s*!\[([^\]]*)\]\(([A-Za-z0-9_.-]+\.(?:png|svg))\)\s*")
REPORT_DIR = "report"  # a sweep's own report folder (searchbox.report --out SWEEP/report), from before reports/
REPORTS = "reports"  # OUTPUTS/reports/NAME: where main.sh and the Render button write a sweep's report
REPORT_TIMEOUT_S = 600.0
MAX_ROWS = 5000
# The grades, primary first (grading's docstring says what each means); the runs table shows them first.
SCORES = ("correct", "contains", "evidence_recall", "judge", "f1", "exact_match", "gold_content_seen")
# After the scores and the axes that vary: what a run did.
PREFERRED = ("question_id", "graded_answer", "gold_answer", "stop_reason", "turns", "tool_calls", "tool_errors", "tokens_total",
             "elapsed_s")
FILTERS = ("model", "question_type", "question_id", "stop_reason", "answer_source", "correct")  # besides the axes, when they vary
MAX_FILTER_VALUES = 100
HIDDEN = ("answer_text", "config", "run_dir", "question")  # too long for a cell (the run page shows them)
# Columns that describe a condition rather than what a run did (config keys, what served it): when an axis decides
# them (served_model_id by model), they are named beside the table instead of filling it.
CONDITION = re.compile(r"(.+\..+|served_.*|tools_enabled|protocol|context_window|sandbox|delivery|retrieval_(embedder|embed_model|retriever|reranker|device))")


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


def _figure_names(folder: Path) -> list[str]:
    if not _is_dir(folder):
        return []
    with os.scandir(folder) as it:
        return sorted(e.name for e in it if FIGURE.fullmatch(e.name) and e.is_file(follow_symlinks=False))


def _stamp(folder: Path) -> float:
    """When the report in a folder was written (its newest figure or summary), 0 when it holds none."""
    stamps = []
    for name in [*_figure_names(folder), "summary.md"]:
        try:
            st = os.lstat(folder / name)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            stamps.append(st.st_mtime)
    return max(stamps, default=0.0)


def render_dir(outputs: Path, name: str) -> Path:
    """Where the Render button writes a sweep's report (the folder main.sh uses)."""
    return Path(outputs) / REPORTS / name


def report_dir(outputs: Path, name: str) -> Optional[Path]:
    """The folder of the sweep's newest report, or None when it has none."""
    sweep = sweep_dir(outputs, name)
    found = [(stamp, folder) for folder in (render_dir(outputs, name), sweep / REPORT_DIR) if (stamp := _stamp(folder))]
    return max(found, key=lambda x: x[0])[1] if found else None


def figures(outputs: Path, name: str) -> list[str]:
    folder = report_dir(outputs, name)
    return _figure_names(folder) if folder else []


def figure_path(outputs: Path, name: str, figure: str) -> Path:
    folder = report_dir(outputs, name)
    if folder is None or not FIGURE.fullmatch(figure or "") or figure not in _figure_names(folder):
        raise NotFound(f"no such figure: {figure!r}")
    return folder / figure


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
                    "figures": len({f.rsplit(".", 1)[0] for f in figures(outputs, e.name)}), "mtime": e.stat(follow_symlinks=False).st_mtime})
    return out


def _runs_rows(sweep: Path) -> list[dict]:
    table = sweep / "runs.parquet"
    if table.is_file():
        return pq.read_table(table).to_pylist()
    from ..record.collect import collect  # a sweep still running (or never collected): collect on the fly

    runs, _, _ = collect([sweep])
    return runs.to_dict("records")


def _axes(sweep: Path, rows: list[dict]) -> list[str]:
    """Axis names as the runs recorded them (run_meta `axes`), in the order the sweep gave them; for a sweep whose run
    folders are gone (a committed result), the design columns collect wrote into runs.parquet that are not config keys."""
    import json

    from ..record.record import read_meta

    for row in rows[:20]:
        rd = sweep / "runs" / str(row.get("run_id", ""))
        if (rd / "run_meta.json").is_file():
            try:
                return [k for k in (read_meta(rd).get("axes") or {}) if any(k in r for r in rows[:1])]
            except (OSError, ValueError):
                continue
    try:
        design = json.loads((pq.read_schema(sweep / "runs.parquet").metadata or {}).get(b"searchbox_design", b"[]"))
    except (OSError, ValueError):
        return []
    return [c for c in design if isinstance(c, str) and "." not in c and rows and c in rows[0]]


def _key(value) -> str:
    """A cell's value as compared and filtered (what the page shows)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value if isinstance(value, str) else repr(value)


def _function_of(values: dict[str, list[str]], col: str, of: str) -> bool:
    """Whether each value of `of` comes with one value of `col` in every row (col is then a property of `of`)."""
    seen: dict[str, str] = {}
    return all(seen.setdefault(k, v) == v for k, v in zip(values[of], values[col]))


def columns_of(rows: list[dict], axes: list[str]) -> dict:
    """Which columns the runs table shows: scores first, then the axes that vary and what a run did (`shown`); every
    column that varies and says something new (`columns`); the columns with one value in every run (`constants`) and
    those the conditions decide (`derived`: served_model_id by model, harness.budget by budget), each named once beside
    the table; the filters (columns that vary, axes first)."""
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row if k not in names)
    names = [n for n in names if n not in HIDDEN and not n.startswith("_")]
    values = {n: [_key(r.get(n)) for r in rows] for n in names}
    distinct = {n: len(set(v)) for n, v in values.items()}
    constants = {n: next((r.get(n) for r in rows if r.get(n) is not None), None) for n in names if distinct[n] <= 1}
    varying = [n for n in names if distinct[n] > 1]
    scores = [c for c in SCORES if c in names and any(v != "" for v in values[c])]
    varying_axes: list[str] = []
    for a in [*axes, "model"]:  # an axis the others decide (served_model_id beside model) is not a condition of its own
        if a in varying and a not in varying_axes and not any(_function_of(values, a, k) for k in varying_axes):
            varying_axes.append(a)
    kept = {"run_id", *scores, *varying_axes, *PREFERRED, *FILTERS}
    derived = {n: next(k for k in varying_axes if _function_of(values, n, k)) for n in varying
               if n not in kept and CONDITION.fullmatch(n) and any(_function_of(values, n, k) for k in varying_axes)}
    plain = {tuple(values[n]): n for n in reversed(varying) if "." not in n}  # config columns repeat these (model.name = model)
    useful = [n for n in varying if n not in derived and ("." not in n or plain.get(tuple(values[n]), n) == n)]
    shown = [c for c in ("run_id", *scores, *varying_axes) if c in names]
    shown += [c for c in PREFERRED if c in names and c not in shown and (c in varying or c in ("turns", "tool_calls", "tokens_total"))]
    columns = shown + [c for c in useful if c not in shown]
    constants = {k: v for k, v in constants.items() if k not in shown}  # a score that is the same everywhere stays in the table
    filters = [c for c in dict.fromkeys([*varying_axes, *FILTERS]) if c in varying and distinct[c] <= MAX_FILTER_VALUES]
    return {"shown": shown, "columns": columns, "constants": constants, "derived": derived, "filters": filters, "scores": scores,
            "varying_axes": varying_axes}


def _figure_list(folder: Optional[Path], order: list[tuple[str, str]]) -> list[dict]:
    """Each figure once (its PNG, with its SVG when drawn), in the summary's order, titled as the summary names it."""
    if folder is None:
        return []
    names = _figure_names(folder)
    stems = list(dict.fromkeys([f.rsplit(".", 1)[0] for _, f in order] + [n.rsplit(".", 1)[0] for n in names]))
    titles = {f.rsplit(".", 1)[0]: alt for alt, f in order if alt}
    out = []
    for stem in stems:
        png, svg = f"{stem}.png", f"{stem}.svg"
        if png not in names and svg not in names:
            continue
        out.append({"name": stem, "title": titles.get(stem, stem).replace("_", " "), "src": png if png in names else svg,
                    "svg": svg if svg in names else None})
    return out


def sweep_detail(outputs: Path, name: str) -> dict:
    sweep = sweep_dir(outputs, name)
    rows = _runs_rows(sweep)
    axes = _axes(sweep, rows)
    out_rows = []
    for row in rows[:MAX_ROWS]:
        r = {k: json_safe(v) for k, v in row.items() if k not in ("answer_text", "config")}
        run_id = str(row.get("run_id", ""))
        r["_ref"] = f"sweeps/{name}/runs/{run_id}" if run_id and _is_dir(sweep / "runs" / run_id) else None
        out_rows.append(r)
    cols = columns_of(out_rows, axes)
    folder = report_dir(outputs, name)
    summary_html, order = "", []
    summary = folder / "summary.md" if folder else None
    if summary is not None and summary.is_file() and not summary.is_symlink():
        text = summary.read_text(encoding="utf-8", errors="replace")[:500_000]
        kept = []
        for line in text.splitlines():  # each figure is shown once, in the figures section, titled as the summary names it
            m = IMAGE_LINE.fullmatch(line)
            if m:
                order.append((m.group(1), m.group(2)))
            else:
                kept.append(line)
        summary_html = markdown.render("\n".join(kept), image_base=f"/sweeps/{name}/figures/")
    report = {"folder": str(folder.relative_to(outputs)) if folder else None, "render_to": str(render_dir(outputs, name).relative_to(outputs))}
    return {"name": name, "axes": axes, **cols, "rows": out_rows, "total_rows": len(rows),
            "figures": _figure_list(folder, order), "summary_html": summary_html, "report": report}


async def render_report(outputs: Path, name: str, python: str = sys.executable, timeout_s: float = REPORT_TIMEOUT_S) -> dict:
    """`python -m searchbox.report SWEEP --out SWEEP/report` in a subprocess (matplotlib stays out of the server)."""
    sweep = sweep_dir(outputs, name)
    proc = await asyncio.create_subprocess_exec(
        python, "-m", "searchbox.report", str(sweep), "--out", str(render_dir(outputs, name)), "--label", name,
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
    return {"ok": True, "figures": figures(outputs, name)}


def last_reason(stderr: str, code: Optional[int]) -> str:
    """The line a person should see from a failed child: its `searchbox: ...` line, else its last line."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    for line in reversed(lines):
        if line.startswith("searchbox:"):
            return line
    return (lines[-1] if lines else "") or f"exited with code {code}"
