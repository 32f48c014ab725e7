"""`python -m searchbox.report SWEEP_DIR... --out results/NAME`: figures (PNG + SVG) and a markdown summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from .analysis import FIGURES, Frames, accuracy_table, load, save, search_style_table, time_split, tool_usage


def _md(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    if df.empty:
        return "_no data_"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        cells = [floatfmt.format(v) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(frames: Frames, grader: str, label: str) -> str:
    runs = frames.runs
    parts = [f"# searchbox report: {label}", ""]
    if runs.empty:
        return "\n".join(parts + ["No finished runs found."])
    models = ", ".join(sorted(map(str, runs["model"].dropna().unique()))) if "model" in runs else "?"
    parts += [f"{len(runs)} runs, {runs['question_id'].nunique() if 'question_id' in runs else '?'} questions; model(s): {models}.", ""]
    parts += [f"## Accuracy ({grader}) per grid point, bootstrap 95% CI", "", _md(accuracy_table(runs, grader, ("tools", "budget"))), ""]
    for other in ("exact_match", "f1", "judge", "retrieval_hit"):
        if other != grader and other in runs and runs[other].notna().any():
            parts += [f"### {other}", "", _md(accuracy_table(runs, other, ("tools", "budget"))), ""]
    tok_cols = [c for c in ("tokens_prompt", "tokens_cached", "tokens_completion", "tokens_total", "turns", "tool_calls") if c in runs]
    keys = [k for k in ("tools", "budget") if k in runs]
    if tok_cols and keys:
        parts += ["## Tokens and calls per run (mean)", "", _md(runs.groupby(keys)[tok_cols].mean().reset_index(), "{:.1f}"), ""]
    usage = tool_usage(frames.calls, "tools" if "tools" in frames.calls.columns else "run_id")
    if not usage.empty:
        parts += ["## Tool use per tier", "", _md(usage, "{:.3f}"), ""]
    if {"elapsed_s", "llm_s", "tool_s"} <= set(runs.columns):
        parts += ["## Wall time per run (mean seconds)", "", _md(time_split(runs, "tools" if "tools" in runs else "model"), "{:.2f}"), ""]
    parts += ["## Grep vs dense per question type", "", _md(search_style_table(frames, grader)), ""]
    if "stop_reason" in runs:
        parts += ["## Stop reasons", "", _md(runs.groupby(["stop_reason"]).size().rename("runs").reset_index()), ""]
    parts += ["## Figures", ""] + [f"![{name}]({name}.png)" for name in FIGURES]
    return "\n".join(parts) + "\n"


def build(dirs: list[Path], out: Path, grader: str = "contains", label: str | None = None) -> list[Path]:
    frames = load(dirs)
    written = []
    for name, make in FIGURES.items():
        written += save(make(frames, grader), out, name)
    (out / "summary.md").write_text(summary(frames, grader, label or out.name), encoding="utf-8")
    written.append(out / "summary.md")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.report", description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep directories (with runs.parquet, or run dirs to collect)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grader", default="contains", choices=["contains", "exact_match", "f1", "judge", "retrieval_hit"])
    parser.add_argument("--label", default=None)
    args = parser.parse_args(argv)
    missing = [d for d in args.dirs if not d.exists()]
    if missing:
        print(f"searchbox: no such sweep directory: {missing[0]}", file=sys.stderr)
        return 2
    written = build(args.dirs, args.out, args.grader, args.label)
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
