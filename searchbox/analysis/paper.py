"""Figures in the style of "Is Grep All You Need?" (arXiv 2605.15184): tier x delivery bars, noise curves, hard questions.

Each entry of PAPER_FIGURES is `fn(frames, grader) -> Figure`, like analysis.figures.FIGURES, so the report
can draw them beside the others. They read only the collected sweep tables (runs/turns/tool calls).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .frames import Frames
from .stats import bootstrap_ci

TIERS = ("grep_only", "vector_only")
TIER_COLORS = {"grep_only": "#2a7ab0", "vector_only": "#d9822b"}
DELIVERY_HATCH = {"inline": "", "file": "//"}
RECALL_COLUMNS = ("evidence_recall",)  # schema-1 retrieval_hit (paths named in arguments) is dropped on load: not evidence


def _empty(fig: Figure, what: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, f"no {what} in these runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def _recall_column(runs: pd.DataFrame) -> str | None:
    return next((c for c in RECALL_COLUMNS if c in runs.columns and runs[c].notna().any()), None)


def ci_table(runs: pd.DataFrame, value: str, by: list[str]) -> pd.DataFrame:
    """Mean of `value` per group with a question-clustered bootstrap 95% CI; NaN values are missing, not zero."""
    by = [b for b in by if b in runs.columns]
    rows = []
    if value not in runs.columns or runs.empty:
        return pd.DataFrame(columns=[*by, "n", "mean", "ci_low", "ci_high"])
    for key, group in runs.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        vals = pd.to_numeric(group[value], errors="coerce")
        # questions repeat across seeds and budgets: resample whole questions, not runs
        clusters = group["question_id"].astype(str) if "question_id" in group.columns else None
        mean, lo, hi = bootstrap_ci(vals, clusters=clusters)
        rows.append({**dict(zip(by, key)), "n": int(vals.notna().sum()), "mean": mean, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def _bars(ax, table: pd.DataFrame, models: list[str], combos: list[tuple[str, str]], ylabel: str) -> None:
    """Grouped bars: one group per model, one bar per (tier, delivery), error bars = 95% CI."""
    width = 0.8 / max(1, len(combos))
    for j, (tier, delivery) in enumerate(combos):
        sub = table[(table["tools"] == tier) & (table["delivery"] == delivery)].set_index("model").reindex(models)
        x = np.arange(len(models)) + (j - (len(combos) - 1) / 2) * width
        mean = sub["mean"].to_numpy(dtype=float)
        err = np.vstack([np.nan_to_num(mean - sub["ci_low"].to_numpy(dtype=float)), np.nan_to_num(sub["ci_high"].to_numpy(dtype=float) - mean)])
        ax.bar(x, np.nan_to_num(mean), width, yerr=err, capsize=2, color=TIER_COLORS.get(tier, f"C{j}"),
               hatch=DELIVERY_HATCH.get(delivery, ".."), edgecolor="white", linewidth=0.5, label=f"{tier}, {delivery}")
        for xi, n in zip(x, sub["n"].fillna(0)):
            ax.text(xi, 0.01, f"n={int(n)}", ha="center", va="bottom", fontsize=5, rotation=90, color="white")
    ax.set_xticks(np.arange(len(models)), models, rotation=15, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(ylabel)


def grep_vs_vector(frames: Frames, grader: str = "contains") -> Figure:
    """Accuracy and evidence recall per model, grouped by isolated tier x result delivery (the paper's Fig. 1 design)."""
    runs = frames.runs
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    need = {"model", "tools", "delivery"}
    if runs.empty or not need <= set(runs.columns) or grader not in runs.columns:
        return _empty(fig, f"model/tools/delivery axes with '{grader}' grades")
    runs = runs[runs["tools"].isin(TIERS)] if runs["tools"].isin(TIERS).any() else runs
    models = sorted(runs["model"].unique(), key=lambda m: (str(m).startswith("control-"), str(m)))
    combos = [(t, d) for t in sorted(runs["tools"].unique()) for d in ("inline", "file") if ((runs["tools"] == t) & (runs["delivery"] == d)).any()]
    recall = _recall_column(runs)
    panels = [(grader, f"accuracy ({grader})")] + ([(recall, "evidence recall (gold files seen)")] if recall else [])
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (col, label) in zip(axes, panels):
        _bars(ax, ci_table(runs, col, ["model", "tools", "delivery"]), models, combos, label)
        ax.set_title(label)
    axes[-1].legend(fontsize=7, title="tier, delivery", title_fontsize=7)
    fig.suptitle("Retrieval tier x result delivery per model (bootstrap 95% CI)")
    return fig


def tokens_by_delivery(frames: Frames, grader: str = "contains") -> Figure:
    """What delivery costs: prompt tokens and tool calls per run, per model x tier x delivery."""
    runs = frames.runs
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    if runs.empty or not {"model", "tools", "delivery", "tokens_prompt", "tool_calls"} <= set(runs.columns):
        return _empty(fig, "token counts by delivery")
    models = sorted(runs["model"].unique(), key=lambda m: (str(m).startswith("control-"), str(m)))
    combos = [(t, d) for t in sorted(runs["tools"].unique()) for d in ("inline", "file") if ((runs["tools"] == t) & (runs["delivery"] == d)).any()]
    axes = fig.subplots(1, 2, squeeze=False)[0]
    for ax, (col, label) in zip(axes, (("tokens_prompt", "prompt tokens per run"), ("tool_calls", "tool calls per run"))):
        table = ci_table(runs, col, ["model", "tools", "delivery"])
        _bars(ax, table, models, combos, label)
        top = np.nanmax(table["ci_high"].to_numpy(dtype=float)) if len(table) else 1.0
        ax.set_ylim(0, max(1.0, float(top) * 1.1 if np.isfinite(top) else 1.0))
        ax.set_title(label + " (controls spend zero tokens)" if col == "tokens_prompt" else label)
    axes[-1].legend(fontsize=7)
    fig.suptitle("Inline vs file delivery: tokens in the context vs extra reads")
    return fig


def noise_curves(frames: Frames, grader: str = "contains") -> Figure:
    """Accuracy and evidence recall vs noise ratio, one line per tier (and model), bootstrap 95% CI bands."""
    runs = frames.runs
    fig = Figure(figsize=(10, 4), layout="constrained")
    if runs.empty or "noise" not in runs.columns or grader not in runs.columns:
        return _empty(fig, f"noise axis with '{grader}' grades")
    runs = runs.assign(noise=pd.to_numeric(runs["noise"], errors="coerce"))
    recall = _recall_column(runs)
    panels = [(grader, f"accuracy ({grader})")] + ([(recall, "evidence recall")] if recall else [])
    axes = fig.subplots(1, len(panels), squeeze=False, sharex=True)[0]
    keys = [k for k in ("model", "tools") if k in runs.columns]
    levels = sorted(runs["noise"].dropna().unique())
    position = {lvl: i for i, lvl in enumerate(levels)}  # evenly spaced: 0, 1, 4, 16 read as steps
    styles = ["-", "--", ":", "-."]
    models = sorted(runs["model"].unique()) if "model" in runs.columns else [None]
    for ax, (col, label) in zip(axes, panels):
        table = ci_table(runs, col, [*keys, "noise"])
        for (group, g) in table.groupby(keys, sort=True) if keys else [((), table)]:
            group = group if isinstance(group, tuple) else (group,)
            info = dict(zip(keys, group))
            tier, model = info.get("tools"), info.get("model")
            g = g.sort_values("noise")
            x = [position[v] for v in g["noise"]]
            color = TIER_COLORS.get(tier, "C0")
            ls = styles[models.index(model) % len(styles)] if model in models else "-"
            ax.plot(x, g["mean"], marker="o", color=color, linestyle=ls, label=", ".join(str(v) for v in group))
            ax.fill_between(x, g["ci_low"], g["ci_high"], color=color, alpha=0.12)
        ax.set_xticks(range(len(levels)), [f"{v:g}" for v in levels])
        ax.set_xlabel("noise (distractor bytes / dataroom bytes)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel(label)
        ax.set_title(label + " vs noise")
    axes[-1].legend(fontsize=7)
    fig.suptitle("Distractors mixed into the dataroom (bootstrap 95% CI)")
    return fig


def budget_by_type(frames: Frames, grader: str = "contains") -> Figure:
    """Accuracy vs budget, one panel per question type (single-hop vs multi-hop), forced vs not."""
    runs = frames.runs
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    if runs.empty or "budget" not in runs.columns or grader not in runs.columns:
        return _empty(fig, f"budgets with '{grader}' grades")
    runs = runs.assign(question_type=runs.get("question_type", pd.Series("all", index=runs.index)).replace("", "unknown").fillna("unknown"))
    types = sorted(runs["question_type"].unique())
    axes = fig.subplots(1, len(types), squeeze=False, sharey=True)[0]
    split = "force_budget" if "force_budget" in runs.columns and runs["force_budget"].nunique() > 1 else "model"
    for ax, qtype in zip(axes, types):
        table = ci_table(runs[runs["question_type"] == qtype], grader, [split, "budget"])
        for i, (key, g) in enumerate(table.groupby(split, sort=True)):
            g = g.sort_values("budget")
            ax.plot(g["budget"], g["mean"], marker="o", color=f"C{i}", label=f"{split}={key}")
            ax.fill_between(g["budget"], g["ci_low"], g["ci_high"], color=f"C{i}", alpha=0.15)
        n = int((runs["question_type"] == qtype).sum())
        ax.set_title(f"{qtype} questions (n={n} runs)")
        ax.set_xlabel("budget (turns)")
        ax.set_ylim(-0.02, 1.02)
    axes[0].set_ylabel(f"accuracy ({grader})")
    axes[-1].legend(fontsize=7)
    fig.suptitle("Budget forcing on easy vs hard questions (bootstrap 95% CI)")
    return fig


PAPER_FIGURES = {
    "paper_grep_vs_vector": grep_vs_vector,
    "paper_tokens_by_delivery": tokens_by_delivery,
    "paper_noise": noise_curves,
    "paper_budget_by_type": budget_by_type,
}
