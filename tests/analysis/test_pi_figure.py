"""The harness figure (analysis/harness_figure.py) on a synthetic native x pi sweep: every condition apart, n per bar."""

from __future__ import annotations

from pathlib import Path

from matplotlib.patches import Rectangle

from searchbox.analysis import load
from searchbox.analysis.paper import PAPER_FIGURES, applies
from tests.fakes.runs import make_run

QUESTIONS = ("nw01", "nw02", "nw03")


def _sweep(root: Path, harnesses=("native", "pi")) -> Path:
    """harness x tools x budget; native is right on every question at budget 1, Pi on the first only."""
    for harness in harnesses:
        for tools in ("high", "none"):
            for budget in (1, 2):
                for i, qid in enumerate(QUESTIONS):
                    right = budget == 1 and (harness == "native" or i == 0)
                    v = float(right)
                    make_run(root, f"{harness}-{tools}-{budget}-{qid}", question_id=qid, dataroom=None, turns=budget,
                             grades={"contains": v, "exact_match": v, "f1": v, "correct": v, "grader_version": "test"},
                             config={"tools": tools, "harness.kind": harness, "harness.budget": budget},
                             axes={"harness": harness, "tools": tools, "budget": budget})
    return root


def _bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() < 0.5]


def test_the_harness_figure_keeps_harness_tools_and_budget_apart(tmp_path):
    frames = load([_sweep(tmp_path / "both")])
    assert applies(frames, "paper_harness_effect") is None
    fig = PAPER_FIGURES["paper_harness_effect"](frames, "contains")
    accuracy, tokens = fig.axes[:2]
    assert len(_bars(accuracy)) == 8 and len(_bars(tokens)) == 8  # 2 budgets x (2 harnesses x 2 tiers), never pooled
    heights = sorted(round(b.get_height(), 3) for b in _bars(accuracy))
    assert heights == [0.0] * 4 + [0.333] * 2 + [1.0] * 2
    assert [t.get_text() for t in accuracy.texts].count("n=3/3q") == 8
    assert "Pi" in fig._suptitle.get_text()


def test_without_a_harness_axis_the_figure_is_not_drawn(tmp_path):
    frames = load([_sweep(tmp_path / "one", harnesses=("native",))])
    assert "harness axis" in applies(frames, "paper_harness_effect")


def test_every_agent_harness_is_a_bar_of_its_own_named_in_the_title(tmp_path):
    frames = load([_sweep(tmp_path / "five", harnesses=("native", "pi", "claude-code", "codex", "mini-swe-agent"))])
    fig = PAPER_FIGURES["paper_harness_effect"](frames, "contains")
    accuracy = fig.axes[0]
    assert len(_bars(accuracy)) == 2 * 5 * 2  # budgets x harnesses x tiers
    hatches = {b.get_hatch() for b in _bars(accuracy)}
    assert len(hatches) == 5  # one look per harness: none falls back to another's
    title = fig._suptitle.get_text()
    assert all(name in title for name in ("Pi", "Claude Code", "Codex", "mini-swe-agent")) and "searchbox's loop beside" in title
