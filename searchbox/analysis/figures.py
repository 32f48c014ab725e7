"""The figures, drawn from tidy frames with matplotlib's object API (no pyplot global state).

Every figure splits by every condition (frames.conditions): as the x axis, a colour (hue), or one
panel per remaining combination; n per point or bar is written on the figure (in the legend when a
line has the same n at every point). Accuracy is the grade passed in, by default the headline grader
(frames.headline_grader: the judge when configured, else `correct`); the axis label names it.
A condition in which no run could act (frames.acting: a control without its tool) is no result and is
drawn nowhere. `applies(frames, name)` says why a design lacks what a figure needs (None when it fits):
the report draws only the figures that fit, as it does for the paper-style ones.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from . import legend
from .frames import DENSE_TOOLS, LEXICAL_PROGRAMS, Frames, accuracy_table, acting, cells, label, same_n, search_style_table, time_split, tokens_per_turn, tool_usage

COLORS = {"high": "#1f77b4", "low": "#ff7f0e", "none": "#2ca02c", "all": "#9467bd", "default": "#8c564b"}
MAX_PANELS = 12


def _color(name, i: int) -> str:
    return COLORS.get(str(name), f"C{i % 10}")


def _empty(fig: Figure, what: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, f"no {what} in these runs", ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def _ncols(n: int) -> int:
    return 2 if n == 4 else min(3, max(1, n))  # four panels as 2 x 2, not 3 + 1


def _grid(fig: Figure, n: int, sharey: bool = True) -> list:
    ncols = _ncols(n)
    axes = fig.subplots(math.ceil(n / ncols), ncols, squeeze=False, sharey=sharey).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return list(axes[:n])


def _figure(n_panels: int, width: float = 4.6, height: float = 3.6) -> Figure:
    ncols = _ncols(n_panels)
    return Figure(figsize=(width * ncols, height * math.ceil(max(1, n_panels) / ncols) + 0.6), layout="constrained")


def _wrap(text: str, fig: Figure, fontsize: float = 12.0) -> str:
    """A title wrapped to its figure's width: a suptitle wider than the figure is clipped at both sides."""
    chars = max(32, int(fig.get_figwidth() * 72 / (fontsize * 0.56)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def _title(fig: Figure, text: str, shown: int, total: int) -> None:
    fig.suptitle(_wrap(text + (f" ({shown} of {total} conditions; all in summary.md)" if total > shown else ""), fig))


def left_out(frames: Frames) -> str:
    """A caption line naming the conditions left out because no run could act in them (frames.acting), or ''."""
    if frames.inert is None or frames.inert.empty:
        return ""
    cols = [c for c in frames.inert.columns if c != "why"]
    return "\nleft out, could not act (n/a in summary.md): " + "; ".join(label({c: r[c] for c in cols}) for _, r in frames.inert.iterrows())


def _panel_title(ax, text: str, width_in: float, fontsize: float = 9.0) -> None:
    """A panel's title wrapped to the panel's width (long condition labels ran into the next panel's)."""
    ax.set_title(textwrap.fill(text, max(20, int(width_in * 72 / (fontsize * 0.6)))), fontsize=fontsize)


def _not_in_design(why: str) -> Figure:
    fig = Figure(figsize=(8, 2.4), layout="constrained")
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, textwrap.fill(f"not in this design: {why}", 90), ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def accuracy_vs_budget(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Accuracy against the budget: a line per value of the hue (tools first), a panel per other condition."""
    frames = acting(frames)
    why = applies(frames, "accuracy_vs_budget")
    if why:
        return _not_in_design(why)
    runs, conds, grader = frames.runs, frames.conditions, grader or frames.headline
    table = accuracy_table(runs, grader, conds, frames.design)
    if table.empty or table["n"].sum() == 0:
        return _empty(Figure(figsize=(6.5, 4.2), layout="constrained"), f"'{grader}' grades")
    x = "budget"
    hue = "tools" if "tools" in conds else next((c for c in conds if c != x), None)
    panel_keys = [c for c in conds if c not in (x, hue)]
    panels = cells(table, panel_keys)
    fig = _figure(min(len(panels), MAX_PANELS))
    budgets = sorted(table[x].unique())
    log_x = bool(len(budgets) > 2 and min(budgets) > 0 and max(budgets) / min(budgets) >= 10)
    span = (max(budgets) - min(budgets)) or 1
    hue_levels = sorted({str(v) for v in table[hue]}) if hue else [""]
    for ax, (pkey, ptable) in zip(_grid(fig, min(len(panels), MAX_PANELS)), panels):
        for hkey, g in cells(ptable, [hue] if hue else []):
            i = hue_levels.index(str(hkey.get(hue, "")))
            g = g.sort_values(x)
            xs = g[x].to_numpy(dtype=float)
            dodge = (i - (len(hue_levels) - 1) / 2) * 0.02  # equal lines (a control in every tier) stay visible side by side
            xs = xs * (1 + 2 * dodge) if log_x else xs + dodge * span
            c = _color(hkey.get(hue, "all"), i)
            err = np.vstack([(g["mean"] - g["ci_low"]).fillna(0).clip(lower=0), (g["ci_high"] - g["mean"]).fillna(0).clip(lower=0)])
            n_once = same_n(g)
            name = str(hkey.get(hue, "all runs"))
            ax.errorbar(xs, g["mean"], yerr=err, marker="o", color=c, capsize=3, label=f"{name} ({n_once})" if n_once else name)
            if not n_once:  # n differs along the line: at each point
                for xi, yi, n, nq in zip(xs, g["mean"], g["n"], g["n_questions"]):
                    if not pd.isna(yi):
                        ax.annotate(f"n={n}/{nq}q", (xi, yi), textcoords="offset points", xytext=(4, -10 - 7 * i), fontsize=6, color=c)
        if log_x:
            ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(f"budget ({runs['budget_unit'].iloc[0]})" if "budget_unit" in runs else "budget")
        ax.set_ylabel(f"accuracy ({grader})")
        _panel_title(ax, label(pkey), 4.4)
        legend.beside(ax, title=hue)  # n differs per panel: each panel keeps its own
    _title(fig, "Accuracy vs budget (95% CI over questions; n = graded runs / questions)" + left_out(frames), min(len(panels), MAX_PANELS),
           len(panels))
    return fig


def accuracy_by_condition(frames: Frames, grader: Optional[str] = None) -> Figure:
    """A design without a budget axis: one bar per condition, 95% CI over questions, n at the bar."""
    frames = acting(frames)
    why = applies(frames, "accuracy")
    if why:
        return _not_in_design(why)
    grader = grader or frames.headline
    table = accuracy_table(frames.runs, grader, frames.conditions, frames.design)
    if table.empty or table["n"].sum() == 0:
        return _empty(Figure(figsize=(6.5, 3.6), layout="constrained"), f"'{grader}' grades")
    conds = frames.conditions
    names = [label({c: r[c] for c in conds}) for _, r in table.iterrows()]
    fig = Figure(figsize=(8.5, 1.4 + 0.38 * len(table)), layout="constrained")
    ax = fig.add_subplot()
    ys = np.arange(len(table))[::-1]
    means = table["mean"].astype(float).fillna(0).to_numpy()
    err = np.vstack([(table["mean"] - table["ci_low"]).astype(float).fillna(0).clip(lower=0),
                     (table["ci_high"] - table["mean"]).astype(float).fillna(0).clip(lower=0)])
    colors = [_color(r.get("tools", ""), i) for i, (_, r) in enumerate(table.iterrows())]
    ax.barh(ys, means, xerr=err, capsize=3, color=colors)
    for y, m, n, nq in zip(ys, means, table["n"], table["n_questions"]):
        ax.text(0.01, y, f"n={int(n)}/{int(nq)}q", va="center", ha="left", fontsize=7, color="white" if m > 0.12 else "#222222")
    ax.set_yticks(ys, names, fontsize=8)
    ax.set_xlim(0, 1.05)
    ax.set_xlabel(f"accuracy ({grader}); 95% CI over questions")
    fig.suptitle(_wrap("Accuracy per condition (n = graded runs / questions)" + left_out(frames), fig))
    return fig


def _model_runs(frames: Frames) -> Frames:
    """The runs a language model served (a control policy spends no tokens)."""
    runs = frames.runs
    policy = runs["served_policy"] if "served_policy" in runs.columns else runs.get("model.policy")
    if policy is None:
        return frames
    keep = policy.isna() | policy.astype(str).isin(["", "None", "nan"])
    ids = set(runs.loc[keep, "run_id"])
    turns = frames.turns[frames.turns["run_id"].isin(ids)] if "run_id" in frames.turns.columns else frames.turns
    return Frames(runs[keep].reset_index(drop=True), turns.reset_index(drop=True), frames.calls, frames.design, frames.inert,
                  frames.pinned or frames.conditions)  # the panels still name the model beside the controls left out


def tokens_per_turn_figure(frames: Frames, grader: Optional[str] = None) -> Figure:
    why = applies(frames, "tokens_per_turn")
    if why:
        return _not_in_design(why)
    frames = _model_runs(acting(frames))
    conds = frames.conditions
    data = tokens_per_turn(frames.turns, conds)
    if data.empty:
        return _empty(Figure(figsize=(6, 3.8), layout="constrained"), "turns")
    panels = cells(data, conds)
    shown = min(len(panels), MAX_PANELS)
    fig = _figure(shown, 3.6, 3.4)
    parts = [("uncached_prompt", "uncached prompt", "#4c72b0"), ("cached_prompt", "cached prompt", "#a1c9f4"), ("completion", "completion", "#dd8452")]
    axes = _grid(fig, shown)
    n_runs = {tuple(str(k[c]) for c in conds): len(g) for k, g in cells(frames.runs, conds)}
    for ax, (key, d) in zip(axes, panels):
        d = d.sort_values("turn")
        bottom = np.zeros(len(d))
        for col, name, color in parts:
            ax.bar(d["turn"], d[col], bottom=bottom, color=color, label=name)
            bottom += d[col].to_numpy()
        _panel_title(ax, f"{label(key)} (n={n_runs.get(tuple(str(key.get(c)) for c in conds), 0)} runs)", 3.4)
        ax.set_xlabel("turn")
        ax.set_xticks(sorted(d["turn"].unique()))
    axes[0].set_ylabel("mean tokens per run")
    legend.below(fig, axes, sort=False)
    _title(fig, "Tokens per turn (runs of a model; the controls spend none)", shown, len(panels))
    return fig


def tool_choice_figure(frames: Frames, grader: Optional[str] = None, top: int = 10) -> Figure:
    frames = acting(frames)
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
    legend.below(fig, [ax], sort=False)
    return fig


def time_split_figure(frames: Frames, grader: Optional[str] = None) -> Figure:
    frames = acting(frames)
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
    ax.set_title("Wall time per run: setup (model and embedder loading, index builds), LLM, tools")
    legend.below(fig, [ax], sort=False)
    return fig


EVIDENCE_BINS = ("no gold evidence", "some gold evidence", "all gold evidence")


def evidence_vs_accuracy(frames: Frames, grader: Optional[str] = None) -> Figure:
    frames = acting(frames)
    runs, conds, grader = frames.runs, frames.conditions, grader or frames.headline
    if runs.empty or "evidence_recall" not in runs or grader not in runs or runs["evidence_recall"].notna().sum() == 0:
        return _empty(Figure(figsize=(6.5, 3.8), layout="constrained"), "evidence grades (regrade with `python -m searchbox.grade`)")
    r = pd.to_numeric(runs["evidence_recall"], errors="coerce")
    df = runs[r.notna()].assign(evidence=np.select([r[r.notna()] <= 0, r[r.notna()] >= 1], [EVIDENCE_BINS[0], EVIDENCE_BINS[2]], EVIDENCE_BINS[1]))
    table = accuracy_table(df, grader, ("evidence", *conds), frames.design)
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
    legend.below(fig, [ax], sort=False)
    return fig


STYLE_COLORS = {"neither": "#b0b0b0", "grep": "#2a7ab0", "dense": "#d9822b", "grep+dense": "#6a3d9a"}


def offers_both(runs: pd.DataFrame) -> pd.Series:
    """Per run, whether its tools offered both kinds of search (grep or bash, and a dense tool), so that the style it
    searched in was its own choice; True where the tables do not say which tools a run had."""
    if "tools_enabled" not in runs.columns:
        return pd.Series(True, index=runs.index)

    def both(enabled) -> bool:
        names = set(str(enabled).split(","))
        return bool(names & ({"grep", "bash"} | LEXICAL_PROGRAMS)) and bool(names & DENSE_TOOLS)

    return runs["tools_enabled"].map(both).astype(bool)


def _choosing(frames: Frames) -> Frames:
    keep = offers_both(frames.runs)
    runs = frames.runs[keep].reset_index(drop=True)
    ids = set(runs["run_id"]) if "run_id" in runs.columns else None
    sub = (lambda df: df[df["run_id"].isin(ids)].reset_index(drop=True) if ids is not None and "run_id" in df.columns else df)
    return Frames(runs, sub(frames.turns), sub(frames.calls), frames.design, frames.inert)  # its own conditions: where runs chose


def grep_vs_dense(frames: Frames, grader: Optional[str] = None) -> Figure:
    """Where a run could choose (grep and dense search both offered): accuracy by the style it searched in, per
    question type (a panel each) and condition (a group of bars each); a style no run of a condition took is no bar."""
    frames = acting(frames)
    why = applies(frames, "grep_vs_dense")
    if why:
        return _not_in_design(why)
    grader = grader or frames.headline
    sub = _choosing(frames)
    table = search_style_table(sub, grader)
    table = table[table["n"] > 0]
    conds = [c for c in sub.conditions if c in table.columns]
    types = sorted(table["question_type"].astype(str).unique())
    groups = [k for k, _ in cells(table, conds)]
    most = int(table.groupby(["question_type", *conds], dropna=False).size().max()) if len(table) else 1  # bars in the fullest group
    height = 0.8 / max(1, most)
    fig = Figure(figsize=(3.0 + 3.4 * len(types), 1.8 + 0.2 * len(groups) * max(1, most)), layout="constrained")
    axes = fig.subplots(1, len(types), squeeze=False, sharey=True, sharex=True)[0]
    ys = np.arange(len(groups))[::-1]  # the first condition on top
    used: dict = {}
    for ax, qtype in zip(axes, types):
        ptable = table[table["question_type"].astype(str) == qtype]
        for y, key in zip(ys, groups):
            g = ptable
            for c in conds:
                g = g[g[c].astype(str) == str(key[c])]
            g = g.set_index("style").reindex([s for s in STYLE_COLORS if s in set(g["style"])])
            for j, (style, r) in enumerate(g.iterrows()):
                yj = y + ((len(g) - 1) / 2 - j) * height
                lo = max(0.0, r["mean"] - r["ci_low"]) if pd.notna(r["ci_low"]) else 0.0
                hi = max(0.0, r["ci_high"] - r["mean"]) if pd.notna(r["ci_high"]) else 0.0
                used[style] = ax.barh([yj], [r["mean"]], height, xerr=[[lo], [hi]], capsize=2, color=STYLE_COLORS[style], label=style)
                if not r["mean"] > 0:  # a bar of length 0 still says which style scored it
                    ax.plot([0], [yj], marker="s", markersize=4, color=STYLE_COLORS[style], clip_on=False)
                ax.text(1.02, yj, f"n={int(r['n'])}/{int(r['n_questions'])}q", va="center", ha="left", fontsize=6, color=STYLE_COLORS[style])
        ax.set_yticks(ys, [label(k) for k in groups], fontsize=7)
        ax.set_xlim(0, 1.25)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_xlabel(f"accuracy ({grader})", fontsize=8)
        ax.set_title(f"{qtype} questions", fontsize=9)
    fig.legend([used[s] for s in STYLE_COLORS if s in used], [s for s in STYLE_COLORS if s in used], loc="outside lower center",
               ncol=4, fontsize=7, title="how the run searched (its own tool calls)", title_fontsize=7)
    tiers = sorted(map(str, sub.runs["tools"].unique())) if "tools" in sub.runs.columns else []
    fig.suptitle(_wrap("Grep vs dense search where the run could choose either" + (f" (tools={', '.join(tiers)})" if tiers else "")
                       + "; 95% CI over questions, n = runs / questions", fig))
    return fig


def _no_runs(frames: Frames) -> Optional[str]:
    return "no finished runs" if frames.runs.empty else None


def _needs_budget(frames: Frames) -> Optional[str]:
    return _no_runs(frames) or (None if "budget" in frames.conditions else "needs a budget axis that varies")


def _needs_no_budget(frames: Frames) -> Optional[str]:
    from .paper import applies as paper_applies

    if "budget" in frames.conditions:
        return "the budget varies: accuracy_vs_budget shows accuracy per condition"
    for name in ("paper_grep_vs_vector", "paper_noise"):
        if paper_applies(frames, name) is None:
            return f"{name} shows accuracy per condition in this design"
    return _no_runs(frames)


def _needs_model_turns(frames: Frames) -> Optional[str]:
    if frames.turns.empty:
        return "no turns in these tables"
    if _model_runs(frames).runs.empty:
        return "only non-neural controls, which spend no tokens"
    return None


def _needs_calls(frames: Frames) -> Optional[str]:
    return None if not frames.calls.empty and "tool" in frames.calls.columns else "no tool calls in these runs"


def _needs_evidence(frames: Frames) -> Optional[str]:
    runs = frames.runs
    if "evidence_recall" not in runs.columns or runs["evidence_recall"].notna().sum() == 0:
        return "no evidence grades (regrade with `python -m searchbox.grade`)"
    return None


def _needs_choice(frames: Frames) -> Optional[str]:
    if frames.runs.empty:
        return "no finished runs"
    if not offers_both(frames.runs).any():
        return "no condition offers both grep and dense search: the tool selection, not the run, decides how it searches"
    return _needs_calls(frames)


FIGURES: dict[str, Callable[[Frames, Optional[str]], Figure]] = {
    "accuracy_vs_budget": accuracy_vs_budget,
    "accuracy": accuracy_by_condition,
    "tokens_per_turn": tokens_per_turn_figure,
    "tool_choice": tool_choice_figure,
    "time_split": time_split_figure,
    "evidence_vs_accuracy": evidence_vs_accuracy,
    "grep_vs_dense": grep_vs_dense,
}
NEEDS: dict[str, Callable[[Frames], Optional[str]]] = {
    "accuracy_vs_budget": _needs_budget,
    "accuracy": _needs_no_budget,
    "tokens_per_turn": _needs_model_turns,
    "tool_choice": _needs_calls,
    "time_split": _no_runs,
    "evidence_vs_accuracy": _needs_evidence,
    "grep_vs_dense": _needs_choice,
}


def applies(frames: Frames, name: str) -> Optional[str]:
    """Why this design lacks what figure `name` needs; None when the figure fits it (judged on the runs that could act)."""
    return NEEDS[name](acting(frames))


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], dpi=130, bbox_inches="tight")  # tight: a title or label wider than the axes is never cut off
    fig.savefig(paths[1], bbox_inches="tight")
    return paths
