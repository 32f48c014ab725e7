"""The harness figure (issues 22, 34): accuracy, tokens and the context each harness fills, the native loop beside the
agents (Pi, Claude Code, Codex CLI, mini-swe-agent).

One bar per harness x tool tier (tier in its colour, each agent its hatch), grouped by every other condition (budget first),
never pooled; means weigh each question equally with 95% CIs resampling questions, or facts (frames.accuracy_table), n
(runs/questions) at every bar. The third panel is the context at the end of the first turn against the window: an
agent's own system prompt and tool schemas take a large part of an 8K window before the model has done anything, and
its compaction calls (counted apart in the record) are part of its tokens.
"""

from __future__ import annotations

import textwrap
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .frames import Frames, accuracy_table, cells, label
from .facts import resampled

HARNESS_HATCH = {"native": "", "pi": "//", "claude-code": "\\\\", "codex": "xx", "mini-swe-agent": ".."}
AGENT_NAMES = {"pi": "Pi", "claude-code": "Claude Code", "codex": "Codex", "mini-swe-agent": "mini-swe-agent"}
TIER_COLORS = {"none": "#2ca02c", "high": "#1f77b4", "low": "#ff7f0e", "all": "#9467bd", "grep_only": "#2a7ab0", "vector_only": "#d9822b"}
TABLE_END = ("n", "n_questions", "mean", "ci_low", "ci_high")


def harness_column(runs: pd.DataFrame) -> Optional[str]:
    return next((c for c in ("harness", "harness.kind", "harness_kind") if c in runs.columns), None)


def needs(frames: Frames) -> Optional[str]:
    """Why this design lacks a harness comparison (None when it has one)."""
    runs = frames.runs
    if runs.empty:
        return "no finished runs"
    col = harness_column(runs)
    if col is None or runs[col].dropna().astype(str).nunique() < 2:
        return "needs a harness axis that varies (harness=native,pi,claude-code,codex)"
    return None


def _runs(frames: Frames) -> pd.DataFrame:
    runs = frames.runs.copy()
    runs["harness"] = runs[harness_column(runs)].astype(str)
    turns = frames.turns
    if not turns.empty and {"run_id", "turn", "context_tokens"} <= set(turns.columns):
        first = turns[turns["turn"] == 1].drop_duplicates("run_id").set_index("run_id")["context_tokens"]
        runs["context_turn1"] = runs["run_id"].map(first).astype(float)
    return runs


def _bars(ax, table: pd.DataFrame, groups: list[str], combos: list[tuple[str, str]], ylabel: str, unit_range: bool) -> None:
    keyed = cells(table, groups)
    width = 0.8 / max(1, len(combos))
    top = 0.0
    for j, (harness, tier) in enumerate(combos):
        xs, means, lo, hi, ns = [], [], [], [], []
        for i, (_, g) in enumerate(keyed):
            row = g[(g["harness"].astype(str) == harness) & (g["tools"].astype(str) == tier)]
            if row.empty or not row.iloc[0]["n"]:
                continue
            r = row.iloc[0]
            m = float(r["mean"])
            xs.append(i + (j - (len(combos) - 1) / 2) * width)
            means.append(m)
            lo.append(max(0.0, m - float(r["ci_low"])) if pd.notna(r["ci_low"]) else 0.0)
            hi.append(max(0.0, float(r["ci_high"]) - m) if pd.notna(r["ci_high"]) else 0.0)
            ns.append(f"n={int(r['n'])}/{int(r['n_questions'])}q")
            top = max(top, m + hi[-1])
        ax.bar(xs, np.nan_to_num(means), width, yerr=[lo, hi], capsize=2, color=TIER_COLORS.get(tier, f"C{j % 10}"),
               hatch=HARNESS_HATCH.get(harness, ".."), edgecolor="white", linewidth=0.5, label=f"{harness}, tools={tier}")
        for x, text in zip(xs, ns):
            ax.text(x, 0.0, text, ha="center", va="bottom", fontsize=5, rotation=90, color="#222222")
    ax.set_xticks(np.arange(len(keyed)), [label(k, "\n") if k else "all runs" for k, _ in keyed], fontsize=6, rotation=20, ha="right")
    if groups:
        ax.set_xlabel(" x ".join(groups), fontsize=8)
    ax.set_ylim(0, 1.05 if unit_range else max(1.0, top * 1.15))
    ax.set_ylabel(ylabel, fontsize=8)


def harness_effect(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Accuracy, tokens per run and the context at the end of turn 1, per harness x tools, grouped by the other conditions."""
    why = needs(frames)
    if why:
        fig = Figure(figsize=(8, 3), layout="constrained")
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, f"not in this design: {why}", ha="center", va="center", transform=ax.transAxes, wrap=True)
        ax.set_axis_off()
        return fig
    grader = grader or frames.headline
    runs = _runs(frames)
    panels = [(grader, f"accuracy ({grader})", True), ("tokens_total", "tokens per run (prompt + completion)", False)]
    if "context_turn1" in runs.columns and runs["context_turn1"].notna().any():
        panels.append(("context_turn1", "context at the end of turn 1 (tokens)", False))
    combos = [(h, t) for h in sorted(runs["harness"].unique(), key=lambda h: (h != "native", h))
              for t in sorted(runs["tools"].astype(str).unique()) if ((runs["harness"] == h) & (runs["tools"].astype(str) == t)).any()]
    design = [c for c in frames.design if c not in ("harness.kind", "harness_kind")] if frames.design else []
    tables = []
    for col, name, unit in panels:
        table = accuracy_table(runs, col, ["harness", "tools"], design or None)
        tables.append((table, name, unit, [c for c in table.columns if c not in TABLE_END and c not in ("harness", "tools")]))
    groups = tables[0][3]
    n_groups = max(1, len(cells(tables[0][0], groups)))
    width = max(4.2, 0.2 * n_groups * len(combos) + 1.2)
    fig = Figure(figsize=(width * len(panels) + 0.5, 5.0), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (table, name, unit, grp) in zip(axes, tables):
        _bars(ax, table, grp, combos, name, unit)
        ax.set_title(name, fontsize=9)
    notes = []
    if len(panels) == 3:
        window = pd.to_numeric(runs["harness_context_window"], errors="coerce").dropna() if "harness_context_window" in runs else pd.Series(dtype=float)
        if not window.empty:
            axes[2].axhline(float(window.median()), color="#aa0000", linestyle="--", linewidth=0.8)
            axes[2].text(0.01, float(window.median()), f"context window {int(window.median())}", color="#aa0000", fontsize=6,
                         va="bottom", transform=axes[2].get_yaxis_transform())
            axes[2].set_ylim(0, max(axes[2].get_ylim()[1], float(window.median()) * 1.08))
    notes += agent_notes(runs)
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)) or 1, fontsize=7,
               title="bars: harness (each agent hatched), tools", title_fontsize=7)
    agents = [AGENT_NAMES.get(h, h) for h in sorted(runs["harness"].unique()) if h != "native"]
    title = (f"Harness: searchbox's loop beside {', '.join(agents)} (means over questions, 95% CI resampling {resampled(frames.runs)})"
             if "native" in set(runs["harness"]) else f"Harness: {', '.join(agents)} (means over questions, 95% CI resampling {resampled(frames.runs)})")
    chars = max(40, int(fig.get_figwidth() * 72 / 5.6))
    fig.suptitle("\n".join(textwrap.fill(line, chars) for line in [title, "; ".join(notes)] if line), fontsize=10)
    return fig


def agent_notes(runs: pd.DataFrame) -> list[str]:
    """Per agent harness, from its record's `harness` fields: its first call's prompt tokens (its own system prompt,
    tools and the question), its own compaction's share of its tokens, and whether its model saw tool schemas at all."""
    notes, blind = [], []
    for harness in sorted(h for h in runs["harness"].unique() if h != "native"):
        own = runs[runs["harness"] == harness]
        name = AGENT_NAMES.get(harness, harness)

        def numbers(col: str) -> pd.Series:
            return pd.to_numeric(own[col], errors="coerce").dropna() if col in own.columns else pd.Series(dtype=float)

        first = numbers("harness_first_prompt_tokens")
        first = first[first > 0]
        if not first.empty:
            notes.append(f"{name}'s first call: {first.mean():.0f} prompt tokens")
        spent, total, calls = numbers("harness_compaction_tokens").sum(), numbers("tokens_total").sum(), numbers("harness_compaction_calls").sum()
        if total and calls:
            notes.append(f"{name}'s own compaction: {int(calls)} calls, {spent / total:.0%} of its tokens")
        renders = own.get("harness_server_renders_tools")
        if renders is not None and (renders == False).any():  # noqa: E712 - a column of booleans and NaN
            blind.append(name)
    if blind:
        notes.append(f"the server's chat template renders no tools: {', '.join(blind)} sent tool schemas the model never saw")
    return notes
