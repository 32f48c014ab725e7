"""`python -m searchbox.report SWEEP_DIR... --out results/NAME`: figures (PNG + SVG) and a markdown summary.

Every table splits by every condition (each varying design column); CIs resample questions;
paired comparisons hold every other condition fixed. The paper-style figures (analysis/paper.py) are
drawn when the design has the axes they need; summary.md names the ones left out and why.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from .analysis import FIGURES, Frames, accuracy_table, comparisons, load, save, search_style_table, time_split, tool_usage
from .analysis.paper import PAPER_FIGURES, applies
from .errors import SearchboxError, cli

GRADER_CHOICES = ("contains", "exact_match", "f1", "judge")


def _fmt(value, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return floatfmt.format(value)
    return str(value).replace("|", "\\|")


def _md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    if df is None or df.empty:
        return "_no data_"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, floatfmt) for v in row) + " |")
    return "\n".join(lines)


def _per_condition(runs: pd.DataFrame, conds: list[str]) -> pd.DataFrame:
    """Runs, questions, answers, malformed replies and stop reasons of each condition."""
    rows = []
    for key, g in (runs.groupby(conds, dropna=False, sort=True) if conds else [((), runs)]):
        key = key if isinstance(key, tuple) else (key,)
        stops = g["stop_reason"].value_counts() if "stop_reason" in g else pd.Series(dtype=int)
        rows.append({**dict(zip(conds, key)), "runs": len(g), "questions": g["question_id"].nunique() if "question_id" in g else None,
                     "answered": int(g["answer_present"].fillna(False).astype(bool).sum()) if "answer_present" in g else None,
                     "malformed_replies": int(g["malformed_replies"].fillna(0).sum()) if "malformed_replies" in g else None,
                     "stop_reasons": ", ".join(f"{k} {v}" for k, v in stops.items())})
    return pd.DataFrame(rows)


def summary(frames: Frames, grader: str, label: str, skipped: dict[str, str] | None = None) -> str:
    """The markdown summary; `skipped`: paper figures not drawn, with why (not in this design)."""
    runs, conds = frames.runs, frames.conditions
    parts = [f"# searchbox report: {label}", ""]
    if runs.empty:
        return "\n".join(parts + ["No finished runs found."]) + "\n"
    models = sorted(map(str, runs["model"].dropna().unique())) if "model" in runs else []
    served = sorted(map(str, runs["served_model_id"].dropna().unique())) if "served_model_id" in runs else []
    versions = sorted(map(str, runs["grader_version"].dropna().unique())) if "grader_version" in runs else []
    parts += [f"{len(runs)} runs, {runs['question_id'].nunique() if 'question_id' in runs else '?'} questions; "
              f"model(s): {', '.join(models) or '?'}" + (f" (served as {', '.join(served)})" if served else "") + ".",
              f"Conditions (every design column that varies): {', '.join(conds) if conds else 'one condition'}.",
              f"Grader version(s): {', '.join(versions) or 'unknown'}. Means weigh each question equally; 95% CIs resample questions.", ""]
    if conds and "question_id" in runs and runs.groupby(conds, dropna=False)["question_id"].apply(lambda q: frozenset(q.astype(str))).nunique() > 1:
        parts += ["Question sets differ between conditions (see `questions` per row): compare means only over the same questions; "
                  "the paired comparisons below use the questions both arms share.", ""]
    parts += ["## Runs per condition", "", _md(_per_condition(runs, conds)), ""]
    parts += [f"## Accuracy ({grader}) per condition", "", _md(accuracy_table(runs, grader, design=frames.design)), ""]
    for other in ("exact_match", "f1", "judge"):
        if other != grader and other in runs and runs[other].notna().any():
            parts += [f"### {other}", "", _md(accuracy_table(runs, other, design=frames.design)), ""]
    if "evidence_recall" in runs and runs["evidence_recall"].notna().any():
        parts += ["## Evidence recall per condition", "",
                  "Share of each question's gold files whose content reached the agent in a tool output.", "",
                  _md(accuracy_table(runs, "evidence_recall", design=frames.design)), ""]
    pairs = comparisons(runs, grader, frames.design)
    parts += [f"## Paired comparisons ({grader}, same questions)", "",
              "a minus b per question, averaged; CI from resampling questions; McNemar's exact test on binary grades "
              "(a_only: a right and b wrong).", "", _md(pairs), ""]
    tok_cols = [c for c in ("tokens_prompt", "tokens_cached", "tokens_completion", "tokens_total", "turns", "tool_calls",
                            "malformed_replies") if c in runs]
    if tok_cols:
        means = runs.groupby(conds, dropna=False)[tok_cols].mean().reset_index() if conds else runs[tok_cols].mean().to_frame().T
        parts += ["## Tokens, tool calls and malformed replies per run (mean)", "", _md(means, "{:.1f}"), ""]
    usage = tool_usage(frames.calls, conds)
    parts += ["## Tool use per condition", "", _md(usage, "{:.3f}") if not usage.empty else "_no tool calls_", ""]
    parts += ["## Wall time per run (mean seconds)", "", _md(time_split(runs, conds), "{:.2f}"), ""]
    parts += ["## Grep vs dense per question type", "", _md(search_style_table(frames, grader)), ""]
    if skipped is None:
        skipped = {name: why for name in PAPER_FIGURES if (why := applies(frames, name))}
    drawn = [*FIGURES, *(name for name in PAPER_FIGURES if name not in skipped)]
    parts += ["## Figures", ""] + [f"![{name}]({name}.png)" for name in drawn]
    if skipped:
        parts += ["", "Not drawn (not in this design): " + "; ".join(f"`{name}` ({why})" for name, why in skipped.items()) + "."]
    return "\n".join(parts) + "\n"


def build(dirs: list[Path], out: Path, grader: str = "contains", label: str | None = None) -> list[Path]:
    frames = load(dirs)
    written = []
    for name, make in FIGURES.items():
        written += save(make(frames, grader), out, name)
    skipped = {}
    for name, make in PAPER_FIGURES.items():  # the paper-style figures, where the design has the axes they need
        why = applies(frames, name)
        if why is None:
            written += save(make(frames, grader), out, name)
        else:
            skipped[name] = why
    (out / "summary.md").write_text(summary(frames, grader, label or out.name, skipped), encoding="utf-8")
    written.append(out / "summary.md")
    return written


@cli
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.report", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep directories (with runs.parquet, or run dirs to collect)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grader", default="contains", choices=GRADER_CHOICES)
    parser.add_argument("--label", default=None)
    args = parser.parse_args(argv)
    missing = [d for d in args.dirs if not d.exists()]
    if missing:
        raise SearchboxError(f"no such sweep directory: {missing[0]}")
    written = build(args.dirs, args.out, args.grader, args.label)
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
