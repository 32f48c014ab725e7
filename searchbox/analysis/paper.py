"""Figures in the style of "Is Grep All You Need?" (arXiv 2605.15184): tier x delivery bars, noise curves, hard questions.

They follow the same condition logic as analysis.figures: every design column that varies
(frames.conditions) is a condition and is never pooled. The axes a figure is about go on its x axis
or into its bars; every other condition becomes a group of bars or a line of its own. Means weigh
each question equally and 95% CIs resample questions, or facts where questions share one (frames.accuracy_table); n (graded runs /
questions) is written at every bar, and at every point of a curve panel unless the panel's title says
it once (the same n at every point). A condition in which no run could act (frames.acting: a control
whose tool the tier does not offer) is no bar and no line; a bar left out so reads "n/a" in its place. `applies(frames, name)` says why a design lacks what
a figure needs (None when it fits): the report draws only the figures that fit, and a figure asked
for on a design it does not fit says "not in this design" instead of drawing something misleading.
Each entry of PAPER_FIGURES is `fn(frames, grader) -> Figure`, like analysis.figures.FIGURES (grader None: the
headline grader).
"""

from __future__ import annotations

import textwrap
from typing import Callable, Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from . import legend
from .harness_figure import harness_effect, needs as harness_needs
from .frames import Frames, accuracy_table, acting, cells, inert_why, label, same_n
from .facts import resampled

TIERS = ("grep_only", "vector_only")  # the isolated retrieval tiers (tools/catalog.py)
TIER_COLORS = {"grep_only": "#2a7ab0", "vector_only": "#d9822b", "none": "#2ca02c", "high": "#1f77b4", "low": "#ff7f0e"}
DELIVERY_HATCH = {"inline": "", "file": "//"}
DELIVERIES = ("inline", "file")
HUE_FIRST = ("tools", "force_budget", "delivery", "retriever", "model")  # which condition the lines of a curve panel show
MAX_PANELS = 6
TABLE_END = ("n", "n_questions", "mean", "ci_low", "ci_high")  # accuracy_table's columns after its keys


# ---- which designs a figure fits ----------------------------------------------------------------
def _tier_or_delivery(frames: Frames) -> Optional[str]:
    runs = frames.runs
    if runs.empty:
        return "no finished runs"
    tiers = "tools" in runs.columns and runs["tools"].astype(str).isin(TIERS).any()
    if not tiers and "delivery" not in frames.conditions:
        return "needs the isolated tiers (tools=grep_only|vector_only) or a delivery=inline,file axis"
    return None


def _noise(frames: Frames) -> Optional[str]:
    if frames.runs.empty:
        return "no finished runs"
    return None if "noise" in frames.conditions else "needs a noise axis that varies (noise=0,1,4,16)"


def _budget_by_type(frames: Frames) -> Optional[str]:
    runs = frames.runs
    if runs.empty:
        return "no finished runs"
    if "budget" not in frames.conditions:
        return "needs a budget axis that varies"
    if "question_type" not in runs.columns or not runs["question_type"].fillna("").astype(str).ne("").any():
        return "needs typed questions (the `type` field: single-hop, multi-hop, ...)"
    return None


def applies(frames: Frames, name: str) -> Optional[str]:
    """Why this design lacks what figure `name` needs; None when the figure fits it."""
    return NEEDS[name](frames)


# ---- drawing helpers ----------------------------------------------------------------------------
def _not_in_design(fig: Figure, why: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, f"not in this design: {why}", ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_axis_off()
    return fig


def _table(frames: Frames, runs: pd.DataFrame, value: str, by: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """accuracy_table over `by` plus every condition, and the condition columns left over (groups or lines)."""
    table = accuracy_table(runs, value, [*by, *(c for c in frames.conditions if c not in by)], frames.design)
    keys = [c for c in table.columns if c not in TABLE_END]
    return table, [k for k in keys if k not in by]


def _with_delivery(runs: pd.DataFrame) -> pd.DataFrame:
    # tables from before the delivery axis: every result was delivered inline
    return runs if "delivery" in runs.columns else runs.assign(delivery="inline")


def _group_name(key: dict) -> str:
    if not key:
        return "all runs"
    return str(next(iter(key.values()))) if len(key) == 1 else label(key, "\n")


def _questions_note(table: pd.DataFrame) -> str:
    nq = table.loc[table["n"] > 0, "n_questions"]
    if nq.nunique() > 1:
        return ("\nquestion sets differ between bars (n = runs/questions): compare within a question set; "
                "summary.md's paired comparisons use shared questions only")
    return ""


def _combos(runs: pd.DataFrame) -> list[tuple[str, str]]:
    tiers = sorted(runs["tools"].astype(str).unique(), key=lambda t: (t not in TIERS, t))
    deliveries = sorted(runs["delivery"].astype(str).unique(), key=lambda d: (DELIVERIES.index(d) if d in DELIVERIES else 9, d))
    return [(t, d) for t in tiers for d in deliveries
            if ((runs["tools"].astype(str) == t) & (runs["delivery"].astype(str) == d)).any()]


def _bars(ax, table: pd.DataFrame, groups: list[str], combos: list[tuple[str, str]], ylabel: str, unit_range: bool,
          inert: Optional[pd.DataFrame] = None) -> None:
    """Grouped bars: one group per combination of the other conditions, one bar per (tier, delivery); 95% CI; n written;
    "n/a" where the condition could not act (frames.acting)."""
    groups_keys = cells(table, groups)
    width = 0.8 / max(1, len(combos))
    top = 0.0
    for j, (tier, delivery) in enumerate(combos):
        xs, means, lo, hi, ns = [], [], [], [], []
        for i, (gkey, g) in enumerate(groups_keys):
            row = g[(g["tools"].astype(str) == tier) & (g["delivery"].astype(str) == delivery)]
            if row.empty:
                if inert_why(inert, {**gkey, "tools": tier, "delivery": delivery}):
                    ax.text(i + (j - (len(combos) - 1) / 2) * width, 0.0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90,
                            color="#888888")
                continue
            r = row.iloc[0]
            xs.append(i + (j - (len(combos) - 1) / 2) * width)
            m = float(r["mean"]) if pd.notna(r["mean"]) else np.nan
            means.append(m)
            lo.append(max(0.0, m - r["ci_low"]) if pd.notna(r["ci_low"]) and pd.notna(m) else 0.0)
            hi.append(max(0.0, r["ci_high"] - m) if pd.notna(r["ci_high"]) and pd.notna(m) else 0.0)
            ns.append(f"n={int(r['n'])}/{int(r['n_questions'])}q")
            top = max(top, np.nan_to_num(m) + hi[-1])
        ax.bar(xs, np.nan_to_num(means), width, yerr=[lo, hi], capsize=2, color=TIER_COLORS.get(tier, f"C{j % 10}"),
               hatch=DELIVERY_HATCH.get(delivery, ".."), edgecolor="white", linewidth=0.5, label=f"{tier}, {delivery}")
        for x, text in zip(xs, ns):
            ax.text(x, 0.0, text, ha="center", va="bottom", fontsize=5, rotation=90, color="#222222")
    ax.set_xticks(np.arange(len(groups_keys)), [_group_name(k) for k, _ in groups_keys], rotation=15, ha="right", fontsize=7)
    if groups:
        ax.set_xlabel(" x ".join(groups), fontsize=8)
    ax.set_ylim(0, 1.05 if unit_range else max(1.0, top * 1.12))
    ax.set_ylabel(ylabel)


def _wrap(text: str, fig: Figure, fontsize: float = 10.0) -> str:
    """A title wrapped to its figure's width: a suptitle wider than the figure is clipped at both sides."""
    chars = max(32, int(fig.get_figwidth() * 72 / (fontsize * 0.56)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def _tier_delivery_figure(frames: Frames, panels: list[tuple[str, str, bool]], title: str) -> Figure:
    frames = acting(frames)
    runs = _with_delivery(frames.runs)
    combos = _combos(runs)
    tables = [(_table(frames, runs, col, ["tools", "delivery"]), name, unit) for col, name, unit in panels]
    groups = tables[0][0][1]
    n_groups = max(1, len(cells(tables[0][0][0], groups)))
    width = max(5.0, 0.22 * n_groups * max(1, len(combos)) + 1.5)
    fig = Figure(figsize=(width * len(panels) + 0.5, 4.8), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    inert = frames.inert if len(frames.inert) else None
    if inert is not None and "delivery" not in inert.columns:
        inert = inert.assign(delivery="inline")  # as _with_delivery: tables from before the delivery axis
    for ax, ((table, grp), name, unit) in zip(axes, tables):
        _bars(ax, table, grp, combos, name, unit, inert)
        ax.set_title(name, fontsize=9)
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)) or 1, fontsize=7, title="bars: tier, delivery",
               title_fontsize=7)
    na = "\nn/a: a control whose tool the tier does not offer (it cannot act; no result)" if inert is not None else ""
    fig.suptitle(_wrap(title + _questions_note(tables[0][0][0]) + na, fig), fontsize=10)
    return fig


# ---- the figures --------------------------------------------------------------------------------
def grep_vs_vector(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Accuracy and evidence recall, one bar per tier x delivery, grouped by every other condition (model first)."""
    why = applies(frames, "paper_grep_vs_vector")
    if why:
        return _not_in_design(Figure(figsize=(8, 3), layout="constrained"), why)
    grader = grader or frames.headline
    panels = [(grader, f"accuracy ({grader})", True)]
    if "evidence_recall" in frames.runs.columns and frames.runs["evidence_recall"].notna().any():
        panels.append(("evidence_recall", "evidence recall (share of gold files whose answer passage reached the agent)", True))
    return _tier_delivery_figure(frames, panels, f"Retrieval tier x result delivery (means over questions, 95% CI resampling {resampled(frames.runs)})")


def tokens_by_delivery(frames: Frames, grader: Optional[str] = None) -> Figure:
    """What delivery costs: prompt tokens and tool calls per run, per tier x delivery, grouped by the other conditions."""
    why = applies(frames, "paper_tokens_by_delivery")
    if why is None and not {"tokens_prompt", "tool_calls"} <= set(frames.runs.columns):
        why = "no token or tool-call counts in these tables"
    if why:
        return _not_in_design(Figure(figsize=(8, 3), layout="constrained"), why)
    panels = [("tokens_prompt", "prompt tokens per run (controls spend none)", False), ("tool_calls", "tool calls per run", False)]
    return _tier_delivery_figure(frames, panels, f"Inline vs file delivery: tokens in the context vs extra reads (95% CI resampling {resampled(frames.runs)})")


def _hue(lines: list[str]) -> Optional[str]:
    return next((c for c in HUE_FIRST if c in lines), lines[0] if lines else None)


def _curves(ax, table: pd.DataFrame, x: str, hue: Optional[str], hue_levels: list[str], position: dict, annotate: bool = True) -> None:
    """One line per value of `hue` (tiers in their colours, dodged a little), a 95% CI band, n (runs/questions) at each
    point unless `annotate` is off (the panel's title says it once)."""
    for key, g in cells(table, [hue] if hue else []):
        g = g.sort_values(x)
        value = str(key.get(hue, ""))
        i = hue_levels.index(value) if value in hue_levels else 0
        dodge = (i - (len(hue_levels) - 1) / 2) * 0.04  # equal lines (a control in every tier) stay visible side by side
        xs = [position[v] + dodge for v in g[x]]
        color = (TIER_COLORS.get(value) if hue == "tools" else None) or f"C{i % 10}"
        ax.plot(xs, g["mean"], marker="o", color=color, label=label(key))
        ax.fill_between(xs, g["ci_low"].astype(float), g["ci_high"].astype(float), color=color, alpha=0.12)
        for xi, yi, n, nq in zip(xs, g["mean"], g["n"], g["n_questions"]) if annotate else ():
            if pd.notna(yi):
                ax.annotate(f"{int(n)}/{int(nq)}q", (xi, yi), textcoords="offset points", xytext=(3, 3), fontsize=5, color=color)


def _curve_grid(rows: list[tuple[str, str, pd.DataFrame]], x: str, lines: list[str], position: dict, ticks: list[str],
                xlabel: str) -> tuple[Figure, int, int]:
    """Rows of (title, y label, table) x one column per combination of the conditions besides the hue; lines = hue."""
    hue = _hue(lines)
    panel_keys = [c for c in lines if c != hue]
    panels = [k for k, _ in cells(pd.concat([t for _, _, t in rows]), panel_keys)] if panel_keys else [{}]
    shown = panels[:MAX_PANELS]
    hue_levels = sorted({str(v) for _, _, t in rows for v in t[hue]}) if hue else []
    fig = Figure(figsize=(max(7.0, 3.4 * len(shown) + 1.0), 3.0 * len(rows) + 1.6), layout="constrained")
    axes = fig.subplots(len(rows), len(shown), squeeze=False, sharey=True, sharex=True)
    for r, (title, ylabel, table) in enumerate(rows):
        for c, pkey in enumerate(shown):
            ax = axes[r][c]
            sub = table
            for k, v in pkey.items():
                sub = sub[sub[k].astype(str) == str(v)]
            n_once = same_n(sub)
            _curves(ax, sub, x, hue, hue_levels, position, annotate=not n_once)
            where = ", ".join(part for part in (label(pkey) if pkey else "", f"{n_once} at every point" if n_once else "") if part)
            ax.set_title(title + (f"\n{where}" if where else ""), fontsize=8)
            ax.set_xticks(list(position.values()), ticks)
            ax.set_ylim(-0.02, 1.05)
            if c == 0:
                ax.set_ylabel(ylabel)
            if r == len(rows) - 1:
                ax.set_xlabel(xlabel)
    legend.below(fig, [ax for row in axes for ax in row], f"lines: {hue}" if hue else None)
    return fig, len(shown), len(panels)


def _shown(shown: int, total: int) -> str:
    return f"; {shown} of {total} panels shown, all in summary.md" if total > shown else ""


def noise_curves(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Accuracy and evidence recall vs noise ratio: a panel per combination of the other conditions (tiers as lines), 95% CI bands."""
    why = applies(frames, "paper_noise")
    if why:
        return _not_in_design(Figure(figsize=(8, 3), layout="constrained"), why)
    frames = acting(frames)
    grader = grader or frames.headline
    runs = frames.runs.assign(noise=pd.to_numeric(frames.runs["noise"], errors="coerce"))
    metrics = [(grader, f"accuracy ({grader})")]
    if "evidence_recall" in runs.columns and runs["evidence_recall"].notna().any():
        metrics.append(("evidence_recall", "evidence recall"))
    levels = sorted(runs["noise"].dropna().unique())
    position = {lvl: i for i, lvl in enumerate(levels)}  # evenly spaced: 0, 1, 4, 16 read as steps
    rows, lines = [], []
    for col, name in metrics:
        table, lines = _table(frames, runs, col, ["noise"])
        rows.append((name, name, table.dropna(subset=["noise"])))
    fig, shown, total = _curve_grid(rows, "noise", lines, position, [f"{v:g}" for v in levels], "noise (distractor bytes / dataroom bytes)")
    fig.suptitle(_wrap(f"Distractors mixed into the dataroom\n(means over questions, 95% CI resampling {resampled(runs)}; n = runs/questions; "
                       f"distractor seeds are replicates{_shown(shown, total)})", fig), fontsize=10)
    return fig


def budget_by_type(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Accuracy vs budget: a row per question type (single-hop vs multi-hop), a panel per other condition, lines by tier or forcing."""
    why = applies(frames, "paper_budget_by_type")
    if why:
        return _not_in_design(Figure(figsize=(8, 3), layout="constrained"), why)
    frames = acting(frames)
    grader = grader or frames.headline
    runs = frames.runs.assign(question_type=frames.runs["question_type"].fillna("").astype(str).replace("", "unknown"))
    table, lines = _table(frames, runs, grader, ["question_type", "budget"])
    budgets = sorted(table["budget"].unique())
    rows = []
    for qtype in sorted(table["question_type"].unique()):
        nq = runs.loc[runs["question_type"] == qtype, "question_id"].nunique() if "question_id" in runs else 0
        rows.append((f"{qtype} questions ({nq})", f"accuracy ({grader})", table[table["question_type"] == qtype]))
    unit = runs["budget_unit"].iloc[0] if "budget_unit" in runs else "turns"
    fig, shown, total = _curve_grid(rows, "budget", lines, {b: i for i, b in enumerate(budgets)}, [str(b) for b in budgets],
                                    f"budget ({unit})")
    fig.suptitle(_wrap(f"Accuracy vs budget by question type\n(means over questions, 95% CI resampling {resampled(runs)}; n = runs/questions"
                       f"{_shown(shown, total)})", fig), fontsize=10)
    return fig


PAPER_FIGURES: dict[str, Callable[[Frames, str], Figure]] = {
    "paper_grep_vs_vector": grep_vs_vector,
    "paper_tokens_by_delivery": tokens_by_delivery,
    "paper_noise": noise_curves,
    "paper_budget_by_type": budget_by_type,
    "paper_harness_effect": harness_effect,
}
NEEDS: dict[str, Callable[[Frames], Optional[str]]] = {
    "paper_grep_vs_vector": _tier_or_delivery,
    "paper_tokens_by_delivery": _tier_or_delivery,
    "paper_noise": _noise,
    "paper_budget_by_type": _budget_by_type,
    "paper_harness_effect": harness_needs,
}
