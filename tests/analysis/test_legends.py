"""No legend covers data (issue 28.4): every drawn figure's legends lie outside every axes box.

The check renders each figure and compares display boxes, so it fails for a legend placed inside an axes
(matplotlib's default `loc="best"` still sits inside, over whatever it finds emptiest).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from searchbox.analysis import FIGURES, load
from searchbox.analysis.figures import applies
from searchbox.analysis.paper import PAPER_FIGURES, applies as paper_applies


def _tables(d, rng):
    runs, turns, calls = [], [], []
    for i, (tier, budget, tools) in enumerate((t, b, e) for t, e in (("high", "grep,search_dataroom,read"), ("none", ""))
                                              for b in (1, 2, 4) for _ in range(12)):
        rid = f"r{i}"
        runs.append({"run_id": rid, "tools": tier, "budget": budget, "budget_unit": "turns", "model": "m", "tools_enabled": tools,
                     "question_id": f"q{i % 12}", "question_type": "factoid" if i % 2 else "aggregate", "correct": float(rng.random() < 0.5),
                     "evidence_recall": float(rng.random()), "turns": 2, "elapsed_s": 10.0, "llm_s": 7.0, "tool_s": 2.0, "setup_s": 0.5,
                     "stop_reason": "budget_spent", "tokens_prompt": 300, "tokens_cached": 100, "tokens_completion": 40,
                     "tokens_total": 340, "tool_calls": 3})
        for t in (1, 2):
            turns.append({"run_id": rid, "turn": t, "tools": tier, "budget": budget, "prompt_tokens": 100 * t, "cached_tokens": 50,
                          "completion_tokens": 20, "context_tokens": 200, "tool_calls": 1})
        calls.append({"run_id": rid, "turn": 1, "step": 1, "tool": "bash", "programs": ["grep"], "tools": tier, "budget": budget})
        calls.append({"run_id": rid, "turn": 1, "step": 2, "tool": "search_dataroom", "programs": [], "tools": tier, "budget": budget})
    d.mkdir(parents=True, exist_ok=True)
    for name, rows in (("runs", runs), ("turns", turns), ("tool_calls", calls)):
        pd.DataFrame(rows).to_parquet(d / f"{name}.parquet")
    return d


def _overlaps(fig: Figure) -> list[str]:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # boxes in display units, after constrained layout has run
    renderer = canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    found = []
    for lg in legends:
        box = lg.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and ax.axison and box.overlaps(ax.get_window_extent(renderer)):
                found.append(f"legend {[t.get_text() for t in lg.get_texts()][:3]} over axes {ax.get_title()!r}")
    return found


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return load([_tables(tmp_path_factory.mktemp("legends"), np.random.default_rng(3))])


@pytest.mark.parametrize("name", sorted({**FIGURES, **PAPER_FIGURES}))
def test_no_legend_covers_data(frames, name):
    make = {**FIGURES, **PAPER_FIGURES}[name]
    if (applies(frames, name) if name in FIGURES else paper_applies(frames, name)):
        pytest.skip(f"{name} does not fit this design")
    fig = make(frames)
    assert _overlaps(fig) == []


def test_the_check_sees_a_legend_inside_the_axes():
    fig = Figure(layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="center")
    assert _overlaps(fig)


RESULTS = sorted(p.parent for p in (Path(__file__).resolve().parents[2] / "results").glob("*/runs.parquet"))


@pytest.mark.parametrize("folder", RESULTS, ids=[p.name for p in RESULTS])
def test_no_legend_covers_data_in_the_committed_results(folder):
    """The committed studies' own designs (the paper figures among them) draw no legend over data."""
    frames = load([folder])
    drawn = 0
    for name, make in {**FIGURES, **PAPER_FIGURES}.items():
        if (applies(frames, name) if name in FIGURES else paper_applies(frames, name)):
            continue
        assert _overlaps(make(frames)) == [], name
        drawn += 1
    assert drawn
