"""The figures, drawn from tidy frames with matplotlib's object API (no pyplot global state)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .frames import Frames, accuracy_table, search_style_table, time_split, tokens_per_turn, tool_usage

COLORS = {"high": "#1f77b4", "low": "#ff7f0e", "none": "#2ca02c", "all": "#9467bd", "default": "#8c564b"}


def _color(name, i: int) -> str:
    return COLORS.get(str(name), f"C{i % 10}")


def _empty(fig: Figure, ax, what: str) -> Figure:
    ax.text(0.5, 0.5, f"no {what} in these runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def accuracy_vs_budget(runs: pd.DataFrame, grader: str = "contains") -> Figure:
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    table = accuracy_table(runs, grader, ("tools", "budget"))
    if table.empty:
        return _empty(fig, ax, f"'{grader}' grades")
    for i, (tier, g) in enumerate(table.groupby("tools")):
        g = g.sort_values("budget")
        c = _color(tier, i)
        ax.plot(g["budget"], g["mean"], marker="o", color=c, label=f"tools={tier}")
        ax.fill_between(g["budget"], g["ci_low"], g["ci_high"], color=c, alpha=0.18)
    budgets = sorted(table["budget"].unique())
    if len(budgets) > 2 and budgets[-1] / max(budgets[0], 1) >= 10:
        ax.set_xscale("log")
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("budget (turns)" if "budget_unit" not in runs or (runs["budget_unit"] == "turns").all() else "budget")
    ax.set_ylabel(f"accuracy ({grader})")
    ax.set_title("Accuracy vs budget per tool tier (bootstrap 95% CI)")
    ax.legend()
    return fig


def tokens_per_turn_figure(turns: pd.DataFrame) -> Figure:
    data = tokens_per_turn(turns, "tools" if "tools" in turns.columns else None)
    tiers = sorted(data["tools"].unique()) if "tools" in data.columns else ["all"]
    fig = Figure(figsize=(3.2 * max(1, len(tiers)), 3.8), layout="constrained")
    if data.empty:
        return _empty(fig, fig.add_subplot(), "turns")
    axes = fig.subplots(1, len(tiers), sharey=True, squeeze=False)[0]
    parts = [("uncached_prompt", "uncached prompt", "#4c72b0"), ("cached_prompt", "cached prompt", "#a1c9f4"), ("completion", "completion", "#dd8452")]
    for ax, tier in zip(axes, tiers):
        d = data[data["tools"] == tier] if "tools" in data.columns else data
        bottom = np.zeros(len(d))
        for col, label, color in parts:
            ax.bar(d["turn"], d[col], bottom=bottom, color=color, label=label)
            bottom += d[col].to_numpy()
        ax.set_title(f"tools={tier}")
        ax.set_xlabel("turn")
        ax.set_xticks(sorted(d["turn"].unique()))
    axes[0].set_ylabel("mean tokens per run")
    axes[-1].legend(fontsize=8)
    fig.suptitle("Tokens per turn")
    return fig


def tool_choice_figure(calls: pd.DataFrame, top: int = 10) -> Figure:
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.add_subplot()
    usage = tool_usage(calls, "tools" if "tools" in calls.columns else "run_id")
    if usage.empty:
        return _empty(fig, ax, "tool calls")
    key = usage.columns[0]
    overall = usage.groupby("choice")["count"].sum().sort_values(ascending=False)
    keep = list(overall.index[:top])
    usage = usage.assign(choice=usage["choice"].where(usage["choice"].isin(keep), "other"))
    pivot = usage.pivot_table(index=key, columns="choice", values="share", aggfunc="sum", fill_value=0.0)
    pivot = pivot[[c for c in keep + ["other"] if c in pivot.columns]]
    left = np.zeros(len(pivot))
    for i, choice in enumerate(pivot.columns):
        ax.barh([str(x) for x in pivot.index], pivot[choice], left=left, color=f"C{i % 10}", label=choice)
        left += pivot[choice].to_numpy()
    ax.set_xlabel("share of tool calls")
    ax.set_xlim(0, 1)
    ax.set_title("Tool choice per tier (bash split by program)")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    return fig


def time_split_figure(runs: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    if runs.empty:
        return _empty(fig, ax, "runs")
    data = time_split(runs, "tools" if "tools" in runs.columns else "model")
    key = data.columns[0]
    bottom = np.zeros(len(data))
    for col, label, color in (("llm_s", "LLM", "#4c72b0"), ("tool_s", "tools", "#55a868"), ("other_s", "harness/other", "#c7c7c7")):
        ax.bar(data[key].astype(str), data[col], bottom=bottom, label=label, color=color)
        bottom += data[col].to_numpy()
    ax.set_ylabel("mean seconds per run")
    ax.set_title("Wall time: LLM vs tools")
    ax.legend()
    return fig


def retrieval_vs_accuracy(runs: pd.DataFrame, grader: str = "contains") -> Figure:
    fig = Figure(figsize=(6.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    if runs.empty or "retrieval_hit" not in runs or grader not in runs or runs["retrieval_hit"].notna().sum() == 0:
        return _empty(fig, ax, "retrieval grades")
    df = runs.dropna(subset=["retrieval_hit"]).assign(hit=lambda d: np.where(d["retrieval_hit"] > 0, "gold file seen", "gold file not seen"))
    table = accuracy_table(df, grader, ("tools", "hit"))
    tiers = sorted(table["tools"].unique())
    width = 0.38
    for j, hit in enumerate(["gold file seen", "gold file not seen"]):
        sub = table[table["hit"] == hit].set_index("tools").reindex(tiers)
        x = np.arange(len(tiers)) + (j - 0.5) * width
        err = np.vstack([(sub["mean"] - sub["ci_low"]).fillna(0), (sub["ci_high"] - sub["mean"]).fillna(0)])
        ax.bar(x, sub["mean"].fillna(0), width, yerr=err, capsize=3, label=hit, color=["#4c72b0", "#c44e52"][j])
    rates = df.groupby("tools")["retrieval_hit"].mean().reindex(tiers)
    ax.set_xticks(np.arange(len(tiers)), [f"{t}\n(hit rate {r:.0%})" for t, r in zip(tiers, rates)])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"accuracy ({grader})")
    ax.set_title("Accuracy when the run saw a gold file vs not")
    ax.legend()
    return fig


def grep_vs_dense(frames: Frames, grader: str = "contains") -> Figure:
    fig = Figure(figsize=(7, 3.8), layout="constrained")
    ax = fig.add_subplot()
    table = search_style_table(frames, grader)
    if table.empty:
        return _empty(fig, ax, "runs")
    styles = [s for s in ("neither", "grep", "dense", "grep+dense") if s in set(table["style"])]
    types = sorted(table["question_type"].unique())
    width = 0.8 / max(1, len(styles))
    for j, style in enumerate(styles):
        sub = table[table["style"] == style].set_index("question_type").reindex(types)
        x = np.arange(len(types)) + (j - (len(styles) - 1) / 2) * width
        ax.bar(x, sub["mean"].fillna(0), width, label=f"{style}", color=f"C{j}")
        for xi, n in zip(x, sub["n"].fillna(0)):
            ax.text(xi, 0.01, f"n={int(n)}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(np.arange(len(types)), types)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(f"accuracy ({grader})")
    ax.set_title("Grep vs dense search, per question type")
    ax.legend(fontsize=8)
    return fig


FIGURES = {
    "accuracy_vs_budget": lambda f, g: accuracy_vs_budget(f.runs, g),
    "tokens_per_turn": lambda f, g: tokens_per_turn_figure(f.turns),
    "tool_choice": lambda f, g: tool_choice_figure(f.calls),
    "time_split": lambda f, g: time_split_figure(f.runs),
    "retrieval_vs_accuracy": lambda f, g: retrieval_vs_accuracy(f.runs, g),
    "grep_vs_dense": lambda f, g: grep_vs_dense(f, g),
}


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], dpi=130)
    fig.savefig(paths[1])
    return paths
