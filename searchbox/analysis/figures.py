"""The figures, drawn from tidy frames with matplotlib's object API (no pyplot global state).

Every figure splits by every condition (frames.conditions): as the x axis, a colour (hue), or one
panel per remaining combination; n per point or bar is written on the figure. Accuracy is the grade
passed in, by default the headline grader (frames.headline_grader: the judge when configured, else
`correct`); the axis label names it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .frames import Frames, accuracy_table, cells, label, search_style_table, time_split, tokens_per_turn, tool_usage

COLORS = {"high": "#1f77b4", "low": "#ff7f0e", "none": "#2ca02c", "all": "#9467bd", "default": "#8c564b"}
MAX_PANELS = 12


def _color(name, i: int) -> str:
    return COLORS.get(str(name), f"C{i % 10}")


def _empty(fig: Figure, what: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, f"no {what} in these runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def _grid(fig: Figure, n: int, sharey: bool = True) -> list:
    ncols = min(3, max(1, n))
    axes = fig.subplots(math.ceil(n / ncols), ncols, squeeze=False, sharey=sharey).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def _figure(n_panels: int, width: float = 4.6, height: float = 3.6) -> Figure:
    ncols = min(3, max(1, n_panels))
    return Figure(figsize=(width * ncols, height * math.ceil(max(1, n_panels) / ncols) + 0.6), layout="constrained")


def _title(fig: Figure, text: str, shown: int, total: int) -> None:
    fig.suptitle(text + (f" ({shown} of {total} conditions; all in summary.md)" if total > shown else ""))


def accuracy_vs_budget(frames: Frames, grader: Optional[str] = None) -> Figure:
    runs, conds, grader = frames.runs, frames.conditions, grader or frames.headline
    table = accuracy_table(runs, grader, design=frames.design)
    if table.empty or table["n"].sum() == 0:
        return _empty(Figure(figsize=(6.5, 4.2), layout="constrained"), f"'{grader}' grades")
    x = "budget" if "budget" in conds else None
    hue = "tools" if "tools" in conds and x != "tools" else next((c for c in conds if c != x), None)
    panel_keys = [c for c in conds if c not in (x, hue)]
    panels = cells(table, panel_keys)
    fig = _figure(min(len(panels), MAX_PANELS))
    budgets = sorted(table[x].unique()) if x else []
    log_x = bool(x and len(budgets) > 2 and min(budgets) > 0 and max(budgets) / min(budgets) >= 10)
    span = (max(budgets) - min(budgets)) or 1 if budgets else 1
    for ax, (pkey, ptable) in zip(_grid(fig, min(len(panels), MAX_PANELS)), panels):
        hues = cells(ptable, [hue] if hue else [])
        for i, (hkey, g) in enumerate(hues):
            g = g.sort_values(x) if x else g
            xs = g[x].to_numpy(dtype=float) if x else np.zeros(len(g))
            dodge = (i - (len(hues) - 1) / 2) * 0.02  # equal lines (a control in every tier) stay visible side by side
            xs = xs * (1 + 2 * dodge) if log_x else xs + dodge * span
            c = _color(hkey.get(hue, "all"), i)
            err = np.vstack([(g["mean"] - g["ci_low"]).fillna(0).clip(lower=0), (g["ci_high"] - g["mean"]).fillna(0).clip(lower=0)])
            ax.errorbar(xs, g["mean"], yerr=err, marker="o", color=c, capsize=3, label=label(hkey))
            for xi, yi, n, nq in zip(xs, g["mean"], g["n"], g["n_questions"]):
                if not pd.isna(yi):
                    ax.annotate(f"n={n}/{nq}q", (xi, yi), textcoords="offset points", xytext=(4, -10 - 7 * i), fontsize=6, color=c)
        if log_x:
            ax.set_xscale("log")
        if x:
            ax.set_xticks(budgets, [str(b) for b in budgets])
        else:
            ax.set_xticks([])
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(f"budget ({runs['budget_unit'].iloc[0]})" if x and "budget_unit" in runs else "")
        ax.set_ylabel(f"accuracy ({grader})")
        ax.set_title(label(pkey), fontsize=9)
        ax.legend(fontsize=7)
    _title(fig, "Accuracy vs budget (95% CI over questions; n = graded runs / questions)", min(len(panels), MAX_PANELS), len(panels))
    return fig


def tokens_per_turn_figure(frames: Frames, grader: Optional[str] = None) -> Figure:
    conds = frames.conditions
    data = tokens_per_turn(frames.turns, conds)
    if data.empty:
        return _empty(Figure(figsize=(6, 3.8), layout="constrained"), "turns")
    panels = cells(data, conds)
    shown = min(len(panels), MAX_PANELS)
    fig = _figure(shown, 3.6, 3.4)
    parts = [("uncached_prompt", "uncached prompt", "#4c72b0"), ("cached_prompt", "cached prompt", "#a1c9f4"), ("completion", "completion", "#dd8452")]
    axes = _grid(fig, shown)
    for ax, (key, d) in zip(axes, panels):
        d = d.sort_values("turn")
        bottom = np.zeros(len(d))
        for col, name, color in parts:
            ax.bar(d["turn"], d[col], bottom=bottom, color=color, label=name)
            bottom += d[col].to_numpy()
        ax.set_title(label(key), fontsize=9)
        ax.set_xlabel("turn")
        ax.set_xticks(sorted(d["turn"].unique()))
    axes[0].set_ylabel("mean tokens per run")
    axes[-1].legend(fontsize=7)
    _title(fig, "Tokens per turn", shown, len(panels))
    return fig


def tool_choice_figure(frames: Frames, grader: Optional[str] = None, top: int = 10) -> Figure:
    conds = frames.conditions
    usage = tool_usage(frames.calls, conds)
    if usage.empty:
        return _empty(Figure(figsize=(7, 3.8), layout="constrained"), "tool calls")
    usage = usage.assign(condition=[label({c: r[c] for c in conds}) for _, r in usage.iterrows()])
    overall = usage.groupby("choice")["count"].sum().sort_values(ascending=False)
    keep = list(overall.index[:top])
    usage = usage.assign(choice=usage["choice"].where(usage["choice"].isin(keep), "other"))
    pivot = usage.pivot_table(index="condition", columns="choice", values="share", aggfunc="sum", fill_value=0.0)
    counts = usage.groupby("condition")["count"].sum().reindex(pivot.index)
    pivot = pivot[[c for c in keep + ["other"] if c in pivot.columns]]
    fig = Figure(figsize=(8, 1.2 + 0.45 * len(pivot)), layout="constrained")
    ax = fig.add_subplot()
    left = np.zeros(len(pivot))
    names = [f"{idx}  (n={int(n)} calls)" for idx, n in zip(pivot.index, counts)]
    for i, choice in enumerate(pivot.columns):
        ax.barh(names, pivot[choice], left=left, color=f"C{i % 10}", label=choice)
        left += pivot[choice].to_numpy()
    ax.set_xlabel("share of tool calls (malformed replies are not calls)")
    ax.set_xlim(0, 1)
    ax.set_title("Tool choice per condition (bash split by program)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    return fig


def time_split_figure(frames: Frames, grader: Optional[str] = None) -> Figure:
    conds = frames.conditions
    data = time_split(frames.runs, conds)
    if data.empty:
        return _empty(Figure(figsize=(6, 3.6), layout="constrained"), "runs")
    names = [label({c: r[c] for c in conds}, "\n") for _, r in data.iterrows()]
    n = frames.runs.groupby(conds, dropna=False).size().to_numpy() if conds else [len(frames.runs)]
    fig = Figure(figsize=(max(6, 1.2 * len(data) + 2), 4.6), layout="constrained")
    ax = fig.add_subplot()
    bottom = np.zeros(len(data))
    for col, name, color in (("setup_s", "setup", "#8172b3"), ("llm_s", "LLM", "#4c72b0"), ("tool_s", "tools", "#55a868"),
                             ("other_s", "harness/other", "#c7c7c7")):
        ax.bar(range(len(data)), data[col].fillna(0), bottom=bottom, label=name, color=color)
        bottom += data[col].fillna(0).to_numpy()
    ax.set_xticks(range(len(data)), [f"{nm}\n(n={k})" for nm, k in zip(names, n)], fontsize=7)
    ax.set_ylabel("mean seconds per run")
    ax.set_title("Wall time: setup, LLM, tools")
    ax.legend(fontsize=7)
    return fig


EVIDENCE_BINS = ("no gold evidence", "some gold evidence", "all gold evidence")


def evidence_vs_accuracy(frames: Frames, grader: Optional[str] = None) -> Figure:
    runs, conds, grader = frames.runs, frames.conditions, grader or frames.headline
    if runs.empty or "evidence_recall" not in runs or grader not in runs or runs["evidence_recall"].notna().sum() == 0:
        return _empty(Figure(figsize=(6.5, 3.8), layout="constrained"), "evidence grades (regrade with `python -m searchbox.grade`)")
    r = pd.to_numeric(runs["evidence_recall"], errors="coerce")
    df = runs[r.notna()].assign(evidence=np.select([r[r.notna()] <= 0, r[r.notna()] >= 1], [EVIDENCE_BINS[0], EVIDENCE_BINS[2]], EVIDENCE_BINS[1]))
    table = accuracy_table(df, grader, ("evidence",), frames.design)
    groups = cells(table, conds)
    fig = Figure(figsize=(max(6.5, 1.3 * len(groups) + 2), 4.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.27
    for j, evidence in enumerate(EVIDENCE_BINS):
        xs, ys, lo, hi, ns = [], [], [], [], []
        for i, (_, g) in enumerate(groups):
            row = g[g["evidence"] == evidence]
            if row.empty or row["n"].iloc[0] == 0:
                continue
            xs.append(i + (j - 1) * width)
            ys.append(row["mean"].iloc[0])
            lo.append(max(0.0, row["mean"].iloc[0] - row["ci_low"].fillna(row["mean"]).iloc[0]))
            hi.append(max(0.0, row["ci_high"].fillna(row["mean"]).iloc[0] - row["mean"].iloc[0]))
            ns.append(int(row["n"].iloc[0]))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=evidence, color=["#c44e52", "#dd8452", "#4c72b0"][j])
        for x, n in zip(xs, ns):
            ax.text(x, 0.01, f"n={n}", ha="center", va="bottom", fontsize=6, rotation=90)
    recall = [pd.to_numeric(g_runs["evidence_recall"], errors="coerce").mean() for _, g_runs in cells(df, conds)]
    ax.set_xticks(range(len(groups)), [label(k, "\n") + f"\n(recall {rc:.0%})" for (k, _), rc in zip(groups, recall)], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"accuracy ({grader})")
    ax.set_title("Accuracy by gold evidence received in tool outputs (95% CI over questions)")
    ax.legend(fontsize=7)
    return fig


def grep_vs_dense(frames: Frames, grader: Optional[str] = None) -> Figure:
    grader = grader or frames.headline
    table = search_style_table(frames, grader)
    if table.empty:
        return _empty(Figure(figsize=(7, 3.8), layout="constrained"), "runs")
    panels = cells(table, frames.conditions)
    shown = min(len(panels), MAX_PANELS)
    fig = _figure(shown, 4.8, 3.6)
    styles = [s for s in ("neither", "grep", "dense", "grep+dense") if s in set(table["style"])]
    width = 0.8 / max(1, len(styles))
    for ax, (key, ptable) in zip(_grid(fig, shown), panels):
        types = sorted(ptable["question_type"].unique())
        for j, style in enumerate(styles):
            sub = ptable[ptable["style"] == style].set_index("question_type").reindex(types)
            x = np.arange(len(types)) + (j - (len(styles) - 1) / 2) * width
            ax.bar(x, sub["mean"].fillna(0), width, label=style, color=f"C{j}")
            for xi, n in zip(x, sub["n"].fillna(0)):
                ax.text(xi, 0.01, f"n={int(n)}", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(np.arange(len(types)), types, fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(f"accuracy ({grader})")
        ax.set_title(label(key), fontsize=9)
        ax.legend(fontsize=7)
    _title(fig, "Grep vs dense search, per question type", shown, len(panels))
    return fig


FIGURES = {
    "accuracy_vs_budget": accuracy_vs_budget,
    "tokens_per_turn": tokens_per_turn_figure,
    "tool_choice": tool_choice_figure,
    "time_split": time_split_figure,
    "evidence_vs_accuracy": evidence_vs_accuracy,
    "grep_vs_dense": grep_vs_dense,
}


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], dpi=130, bbox_inches="tight")  # tight: a title or label wider than the axes is never cut off
    fig.savefig(paths[1], bbox_inches="tight")
    return paths
