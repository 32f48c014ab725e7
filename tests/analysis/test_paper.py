"""The paper-style figures on synthetic sweeps: every varying condition kept apart, n per bar, CIs over questions, designs they do not fit."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.patches import Rectangle

from searchbox.analysis import report
from searchbox.analysis import load
from searchbox.analysis.paper import PAPER_FIGURES, applies
from searchbox.record.record import read_meta, write_meta
from tests.fakes.runs import make_run

QUESTIONS = ("nw01", "nw02", "nw03")


def grades(right: bool, recall: float = 1.0) -> dict:
    v = float(right)
    return {"contains": v, "exact_match": v, "f1": v, "evidence_recall": recall, "grader_version": "test"}


def tier_sweep(root: Path, questions=QUESTIONS, models=("smollm", "control-keyword"), budgets=(1, 2)) -> Path:
    """model x tools x delivery x budget; grep_only is right on every question, vector_only on the first only,
    and budget 2 (a condition the figure does not put in its bars) is always wrong: pooling it would halve grep_only."""
    for model in models:
        for tools in ("grep_only", "vector_only"):
            for delivery in ("inline", "file"):
                for budget in budgets:
                    for i, qid in enumerate(questions):
                        right = budget == 1 and (tools == "grep_only" or i == 0)
                        make_run(root, f"{model}-{tools}-{delivery}-{budget}-{qid}", question_id=qid, dataroom=None, model=model,
                                 served_id=model, grades=grades(right, 1.0 if tools == "grep_only" else 0.5), turns=budget,
                                 config={"tools": tools, "harness.delivery": delivery, "harness.budget": budget},
                                 axes={"model": model, "tools": tools, "delivery": delivery, "budget": budget})
    return root


def bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() < 0.5]


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


@pytest.fixture(scope="module")
def tiers(tmp_path_factory) -> Path:
    return tier_sweep(tmp_path_factory.mktemp("tiers"))


def test_grep_vs_vector_keeps_every_condition_apart(tiers):
    frames = load([tiers])
    assert set(frames.conditions) == {"model", "tools", "delivery", "budget"}
    fig = PAPER_FIGURES["paper_grep_vs_vector"](frames, "contains")
    accuracy, recall = fig.axes[:2]
    # 2 models x 2 budgets = 4 groups, each with 4 (tier, delivery) bars: 16, none pooling the two budgets
    assert len(bars(accuracy)) == 16 and len(bars(recall)) == 16
    assert texts(accuracy).count("n=3/3q") == 16
    heights = sorted(round(b.get_height(), 3) for b in bars(accuracy))
    assert heights == [0.0] * 8 + [0.333] * 4 + [1.0] * 4  # budget 2 wrong; vector_only 1/3; grep_only 1
    assert sorted({round(b.get_height(), 3) for b in bars(recall)}) == [0.5, 1.0]
    labels = [t.get_text() for t in accuracy.get_xticklabels()]
    assert len(labels) == 4 and all("model=" in lb and "budget=" in lb for lb in labels)
    assert "question sets differ" not in fig._suptitle.get_text()


def test_grep_vs_vector_ci_resamples_questions(tiers):
    fig = PAPER_FIGURES["paper_grep_vs_vector"](load([tiers]), "contains")
    ax = fig.axes[0]
    # vector_only at budget 1 is right on one question of three: the CI over questions spans 0..1
    spans = [seg for coll in ax.collections for seg in coll.get_segments()] if ax.collections else []
    lengths = sorted(round(abs(s[1][1] - s[0][1]), 3) for s in spans if len(s) == 2)
    assert lengths and max(lengths) == pytest.approx(1.0)


def test_tokens_by_delivery_draws_per_condition(tiers):
    fig = PAPER_FIGURES["paper_tokens_by_delivery"](load([tiers]), "contains")
    tokens_ax = fig.axes[0]
    assert len(bars(tokens_ax)) == 16
    # make_run bills 100 prompt tokens per turn: budget 1 runs 100, budget 2 runs 300; never their mean 200
    assert {round(b.get_height()) for b in bars(tokens_ax)} == {100, 300}


def test_different_question_sets_are_flagged(tmp_path):
    root = tier_sweep(tmp_path / "mixed", models=("control-keyword",), budgets=(1,))
    tier_sweep(root, questions=("nw01",), models=("smollm",), budgets=(1,))
    fig = PAPER_FIGURES["paper_grep_vs_vector"](load([root]), "contains")
    assert "question sets differ" in fig._suptitle.get_text()
    assert {"n=3/3q", "n=1/1q"} <= set(texts(fig.axes[0]))
    assert report.main([str(root), "--out", str(tmp_path / "out")]) == 0
    assert "Question sets differ between conditions" in (tmp_path / "out" / "summary.md").read_text()


def noise_sweep(root: Path) -> Path:
    """noise x tools x distractors.seed (replicates) x model; accuracy falls with noise for grep_only only."""
    for model in ("smollm", "control-dense"):
        for noise in (0, 1, 4):
            for tools in ("grep_only", "vector_only"):
                for seed in (0, 1):
                    for i, qid in enumerate(QUESTIONS):
                        right = tools == "vector_only" or noise == 0 or (noise == 1 and i == 0)
                        rd = make_run(root, f"{model}-{noise}-{tools}-{seed}-{qid}", question_id=qid, dataroom=None, model=model,
                                      served_id=model, grades=grades(right), config={"tools": tools, "noise.ratio": noise, "noise.seed": seed},
                                      axes={"model": model, "noise": noise, "tools": tools, "distractors.seed": seed})
                        meta = read_meta(rd)  # each distractor draw makes its own dataroom content, as a real noise run records
                        meta["dataroom"]["sha256"] = f"{noise}-{seed if noise else 0}".ljust(64, "0")
                        write_meta(rd, meta)
    return root


def test_noise_curves_lines_per_condition_seeds_as_replicates(tmp_path):
    frames = load([noise_sweep(tmp_path / "noise")])
    assert set(frames.conditions) == {"model", "noise", "tools"}  # the dataroom hash follows noise and seed: no condition
    fig = PAPER_FIGURES["paper_noise"](frames, "contains")
    assert len(fig.axes) == 4  # accuracy and evidence recall x one panel per model, never pooled
    # the two distractor seeds are replicates of a question: 6 runs over 3 questions at every point, said once in the title
    smollm = next(ax for ax in fig.axes if ax.get_title() == "accuracy (contains)\nmodel=smollm, n=6/3q at every point")
    lines = {ln.get_label(): [round(y, 3) for y in ln.get_ydata()] for ln in smollm.get_lines()}
    assert lines == {"tools=grep_only": [1.0, 0.333, 0.0], "tools=vector_only": [1.0, 1.0, 1.0]}
    assert not smollm.texts  # n is in the title, not at each point
    assert fig.legends[0].get_title().get_text() == "lines: tools"
    assert "seeds are replicates" in " ".join(fig._suptitle.get_text().split())  # wrapped to the figure's width


def test_budget_by_type_panels_per_question_type(tiers):
    frames = load([tiers])
    fig = PAPER_FIGURES["paper_budget_by_type"](frames, "contains")
    assert len(fig.axes) == 4  # one row (nw01-03 are all factoid) x model x delivery; tiers are the lines
    assert all(ax.get_title().startswith("factoid questions (3)") for ax in fig.axes)
    for ax in fig.axes:
        lines = {ln.get_label(): [round(y, 3) for y in ln.get_ydata()] for ln in ax.get_lines()}
        assert lines == {"tools=grep_only": [1.0, 0.0], "tools=vector_only": [0.333, 0.0]}


def test_designs_without_the_axes_are_said_so(tmp_path):
    root = tmp_path / "plain"
    for tools in ("high", "none"):
        for qid in QUESTIONS:
            make_run(root, f"{tools}-{qid}", question_id=qid, dataroom=None, grades=grades(tools == "high"), axes={"tools": tools})
    frames = load([root])
    assert "isolated tiers" in applies(frames, "paper_grep_vs_vector")
    assert "noise" in applies(frames, "paper_noise")
    assert "budget" in applies(frames, "paper_budget_by_type")
    fig = PAPER_FIGURES["paper_noise"](frames, "contains")
    assert any("not in this design" in t.get_text() for t in fig.axes[0].texts)
    out = tmp_path / "out"
    assert report.main([str(root), "--out", str(out)]) == 0
    assert not list(out.glob("paper_*"))
    assert "`paper_grep_vs_vector` (needs the isolated tiers" in (out / "summary.md").read_text().split("Not drawn (not in this design): ")[1]


def test_report_draws_the_paper_figures_the_design_fits(tiers, tmp_path):
    out = tmp_path / "out"
    assert report.main([str(tiers), "--out", str(out)]) == 0
    for name in ("paper_grep_vs_vector", "paper_tokens_by_delivery", "paper_budget_by_type"):
        for ext in ("png", "svg"):
            assert (out / f"{name}.{ext}").stat().st_size > 1000
    assert not (out / "paper_noise.png").exists()
    summary = (out / "summary.md").read_text()
    assert "![paper_grep_vs_vector](paper_grep_vs_vector.png)" in summary and "`paper_noise` (needs a noise axis" in summary


def test_conditions_leave_out_columns_that_add_no_split():
    """A model beside controls: served_policy is missing for the model (a missing value is a value) and
    model.protocol is coarser than model; neither adds a cell, so neither is a condition the figures label."""
    import pandas as pd

    from searchbox.analysis import conditions

    runs = pd.DataFrame({"run_id": list("abcdef"), "question_id": "q", "contains": 1.0,
                         "model": ["smollm", "smollm", "control-keyword", "control-keyword", "control-dense", "control-dense"],
                         "served_policy": [None, None, "keyword", "keyword", "dense", "dense"],
                         "model.protocol": ["auto", "auto", "native", "native", "native", "native"],
                         "tools": ["grep_only", "vector_only"] * 3})
    assert conditions(runs) == ["tools", "model"]


TOOLS_OF = {"grep_only": ["grep", "read", "ls", "write", "edit"], "vector_only": ["search_dataroom", "read", "ls", "write", "edit"]}


def control_sweep(root: Path) -> Path:
    """control-dense and control-keyword under both isolated tiers: each answers only where its tool is offered (as the
    real controls do: without it they write nothing), right on every question there."""
    for policy in ("dense", "keyword"):
        for tools in ("grep_only", "vector_only"):
            for delivery in ("inline", "file"):
                acts = (policy == "dense") == (tools == "vector_only")
                for qid in QUESTIONS:
                    rd = make_run(root, f"{policy}-{tools}-{delivery}-{qid}", question_id=qid, dataroom=None, model=f"control-{policy}",
                                  served_id=f"control-{policy}", grades=grades(acts, 1.0 if acts else 0.0), answer="x" if acts else None,
                                  config={"tools": tools, "harness.delivery": delivery, "model.policy": policy},
                                  axes={"model": f"control-{policy}", "tools": tools, "delivery": delivery})
                    meta = read_meta(rd)
                    meta["tools"], meta["served"]["policy"] = TOOLS_OF[tools], policy
                    write_meta(rd, meta)
    return root


def test_a_control_that_cannot_act_is_na_in_tables_and_no_bar_in_figures(tmp_path):
    """control-dense under grep_only has nothing to call and scores 0 by construction: read from its record (its policy's
    tools against the tools it had), it is 'n/a' in summary.md, an 'n/a' mark instead of a bar, and in no comparison."""
    from searchbox.analysis.frames import acting, cannot_act

    frames = load([control_sweep(tmp_path / "controls")])
    why = cannot_act(frames.runs)
    model, tools = frames.runs["model"], frames.runs["tools"]
    assert why.ne("").equals((model.eq("control-dense") & tools.eq("grep_only")) | (model.eq("control-keyword") & tools.eq("vector_only")))
    assert why[model.eq("control-dense") & tools.eq("grep_only")].str.startswith("control-dense needs search_dataroom").all()
    left = acting(frames)
    assert len(left.runs) == len(frames.runs) // 2 and len(left.inert) == 4 and acting(left).runs.equals(left.runs)
    fig = PAPER_FIGURES["paper_grep_vs_vector"](frames, "contains")
    accuracy = fig.axes[0]
    assert len(bars(accuracy)) == 4 and {round(b.get_height(), 3) for b in bars(accuracy)} == {1.0}  # only the controls that acted
    assert texts(accuracy).count("n/a") == 4 and "cannot act" in fig._suptitle.get_text()
    out = tmp_path / "out"
    assert report.main([str(tmp_path / "controls"), "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    table = summary.split("## Accuracy (contains) per condition")[1].split("\n#")[0]
    assert table.count("| n/a | n/a | n/a |") == 4 and "| grep_only | control-keyword | file | 3 | 3 | 1.000 |" in table
    assert "n/a: no run of the condition could act" in table
    runs_table = summary.split("## Runs per condition")[1].split("\n## ")[0]
    assert runs_table.count("n/a: control-dense needs search_dataroom") == 2 and runs_table.count("n/a: control-keyword needs grep") == 2
    import pandas as pd

    pairs = pd.read_csv(out / "paired_comparisons.csv")
    assert not pairs.empty and (pairs["vary"] == "delivery").any()
    assert not ((pairs["vary"] == "tools") & pairs["context"].str.contains("control-")).any()  # each control acted in one tier only


def test_curve_panels_say_n_once_and_titles_fit_their_figure(tmp_path):
    frames = load([noise_sweep(tmp_path / "noise")])
    fig = PAPER_FIGURES["paper_noise"](frames, "contains")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width = fig.bbox.width
    title = fig._suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= width  # wrapped, never clipped at the sides
    assert all(ax.get_title().endswith("n=6/3q at every point") and not ax.texts for ax in fig.axes)
