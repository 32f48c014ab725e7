"""The report and the notebooks on sweeps of unusual shape, built as real run directories and collected."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from searchbox.analysis import report
from searchbox.analysis import FIGURES, load
from tests.fakes.runs import make_run

ROOT = Path(__file__).resolve().parents[2]
GRADED = {"contains": 1.0, "exact_match": 1.0, "f1": 1.0, "evidence_recall": 1.0, "grader_version": "test"}
WRONG = {"contains": 0.0, "exact_match": 0.0, "f1": 0.0, "evidence_recall": 0.0, "grader_version": "test"}
GREP = (1, "grep", "dataroom/reports/gannet-rock-survey.md:5:The tower of Gannet Rock stands 38.4 metres")
SEARCH = (1, "search_dataroom", '{"results": [{"path": "dataroom/a.md", "text": "x"}]}')


@pytest.fixture(scope="module")
def design(tmp_path_factory) -> Path:
    return design_sweep(tmp_path_factory.mktemp("design"))


def design_sweep(root: Path) -> Path:
    """tools x budget x force_budget over three questions; high is right more often than none."""
    s = root / "design"
    for tools in ("high", "none"):
        for budget in (1, 4):
            for force in (True, False):
                for i, qid in enumerate(("nw01", "nw02", "nw03")):
                    right = tools == "high" or (budget == 4 and i == 0)
                    make_run(s, f"{tools}-{budget}-{force}-{qid}", question_id=qid, dataroom=None, grades=GRADED if right else WRONG,
                             config={"tools": tools, "harness.budget": budget, "harness.force_budget": force},
                             axes={"tools": tools, "budget": budget, "force_budget": force}, turns=budget,
                             outputs=[SEARCH, GREP] if tools == "high" else [GREP])
    return s


SHAPES = {
    "no_tool_calls": lambda s: [make_run(s, f"r{i}", question_id=q, dataroom=None, grades=GRADED, axes={"tools": t})
                                for i, (q, t) in enumerate([("nw01", "high"), ("nw02", "high"), ("nw01", "none"), ("nw02", "none")])],
    "one_run": lambda s: [make_run(s, "only", dataroom=None, grades=GRADED, outputs=[GREP])],
    "all_failed": lambda s: [make_run(s, f"r{i}", question_id=q, dataroom=None, answer=None, stop_reason="context_exhausted",
                                      grades={"contains": None, "exact_match": None, "f1": None, "evidence_recall": None})
                             for i, q in enumerate(("nw01", "nw02", "nw03"))],
    "mixed_models": lambda s: [make_run(s, f"{m}-{q}", question_id=q, dataroom=None, model=m, served_id=m.upper(),
                                        grades=GRADED if m == "qwen" else WRONG, outputs=[GREP], axes={"model": m})
                               for m in ("smollm", "qwen") for q in ("nw01", "nw02")],
    "empty": lambda s: (s / "runs").mkdir(parents=True),
}


def check_report(sweep: Path, out: Path) -> str:
    """Every figure is drawn, or summary.md says why the design lacks what it needs (and it is not drawn)."""
    assert report.main([str(sweep), "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    not_drawn = summary.split("Not drawn (not in this design): ")[-1] if "Not drawn" in summary else ""
    for name in FIGURES:
        if f"`{name}` (" in not_drawn or not_drawn.startswith("no finished runs"):
            assert not (out / f"{name}.png").exists() and f"![{name}]" not in summary, name
            continue
        for ext in ("png", "svg"):
            f = out / f"{name}.{ext}"
            assert f.exists() and f.stat().st_size > 1000, f
        assert f"![{name}]({name}.png)" in summary
    return summary


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_report_draws_every_figure_on_unusual_sweeps(tmp_path, shape):
    sweep = tmp_path / shape
    SHAPES[shape](sweep)
    summary = check_report(sweep, tmp_path / "out")
    if shape == "no_tool_calls":
        assert "_no tool calls_" in summary and "| neither |" in summary
    elif shape == "one_run":
        assert "one condition" in summary and "| 1 | 1 | 1.000 |  |  |" in summary  # one question: no CI
    elif shape == "all_failed":
        assert "context_exhausted 3" in summary
    elif shape == "mixed_models":
        assert "Conditions (every design column that varies): model." in summary and "served as QWEN, SMOLLM" in summary
    elif shape == "empty":
        assert "No finished runs found." in summary


def test_report_keeps_every_condition_apart_and_compares_pairs(design, tmp_path):
    summary = check_report(design, tmp_path / "out")
    assert "Conditions (every design column that varies): tools, budget, force_budget." in summary
    accuracy = summary.split("## Accuracy (contains) per condition")[1].split("##")[0]
    assert accuracy.count("| high |") == 4 and accuracy.count("| none |") == 4  # budget x force_budget, never pooled
    pairs = summary.split("## Paired comparisons")[1].split("\n## ")[0]
    assert "| tools | budget=1, force_budget=False | tools=high | tools=none | 3 | 1.000 | 0.000 | 1.000 |" in pairs
    assert "malformed_replies" in summary
    assert "All 12 are below" in pairs and "[paired_comparisons.csv](paired_comparisons.csv)" in pairs
    table = pd.read_csv(tmp_path / "out" / "paired_comparisons.csv")
    assert len(table) == 12 and set(table["vary"]) == {"tools", "budget", "force_budget"}  # every comparison, none cut


def test_summary_says_where_every_comparison_is(design, monkeypatch):
    monkeypatch.setattr(report, "MD_PAIRS", 5)
    frames = load([design])
    text = report.summary(frames, "auto", "x", skipped={}, pairs_csv="paired_comparisons.csv")
    pairs = text.split("## Paired comparisons")[1].split("\n## ")[0]
    assert "The first 5 of 12 are below; every one" in pairs and pairs.count("\n| contains | ") == 5


def _graded(grades_of):
    def make(s):
        for m in ("smollm", "qwen"):
            for q in ("nw01", "nw02"):
                make_run(s, f"{m}-{q}", question_id=q, dataroom=None, model=m, grades=grades_of(m), axes={"model": m})
    return make


@pytest.mark.parametrize("grades_of,headline", [
    (lambda m: {"correct": float(m == "qwen"), "contains": 1.0, "grader_version": "g3"}, "correct"),
    (lambda m: {"correct": 0.0, "contains": 1.0, "judge": float(m == "qwen"), "grader_version": "g3"}, "judge"),
    (lambda m: {"contains": float(m == "qwen"), "grader_version": "g2"}, "contains"),
])
def test_headline_is_correct_or_the_judge_with_contains_as_the_lenient_measure(tmp_path, grades_of, headline):
    sweep = tmp_path / "s"
    _graded(grades_of)(sweep)
    text = report.summary(load([sweep]), "auto", "x", skipped={})
    assert f"Headline grade: `{headline}`:" in text and f"## Accuracy ({headline}) per condition" in text
    accuracy = text.split(f"## Accuracy ({headline}) per condition")[1].split("\n#")[0]
    assert "| qwen | 2 | 2 | 1.000 |" in accuracy and "| smollm | 2 | 2 | 0.000 |" in accuracy
    if headline == "contains":
        assert "no `correct` grade" in text and "python -m searchbox.grade" in text
    else:
        assert "### contains (lenient)" in text and "`contains` is shown beside it as the lenient measure" in text


def test_report_cli_in_a_fresh_process(tmp_path):
    sweep = tmp_path / "one"
    SHAPES["one_run"](sweep)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "searchbox.report", str(sweep), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (out / "accuracy.png").exists() and (out / "summary.md").exists()  # one run, no budget axis: accuracy as bars
    assert "`accuracy_vs_budget` (needs a budget axis that varies)" in (out / "summary.md").read_text()


def test_report_on_missing_dir_is_one_line(tmp_path, capsys):
    assert report.main([str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def run_notebook_code(path: Path, results: Path) -> int:
    """The notebook's code cells, in this process (no kernel): how many figures it returned."""
    import nbformat
    from matplotlib.figure import Figure

    matplotlib.use("Agg")
    old = os.environ.get("SEARCHBOX_RESULTS")
    os.environ["SEARCHBOX_RESULTS"] = str(results)
    figures = 0
    try:
        scope: dict = {}
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                tree = ast.parse("\n".join(ln for ln in cell.source.splitlines() if not ln.startswith("%")))
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, str(path), "exec"), scope)
                if last is not None:  # the cell's value, as the notebook would display it
                    figures += isinstance(eval(compile(ast.Expression(last.value), str(path), "eval"), scope), Figure)
    finally:
        if old is None:
            os.environ.pop("SEARCHBOX_RESULTS", None)
        else:
            os.environ["SEARCHBOX_RESULTS"] = old
    return figures


@pytest.mark.parametrize("shape", ["design", "no_tool_calls"])
def test_notebooks_run_on_new_tables(design, tmp_path, shape):
    sweep = design if shape == "design" else tmp_path / shape
    if shape != "design":
        SHAPES[shape](sweep)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert run_notebook_code(path, sweep) >= 1, path.name


def test_notebooks_execute_on_committed_results():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for name in ("tools_x_budget", "grep_vs_vector", "noise"):  # the notebooks' default results
        assert (ROOT / "results" / name / "runs.parquet").exists(), f"the committed result set {name} is missing"
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(books) >= 5
    for path in books:
        nb = nbformat.read(path, as_version=4)
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
        images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        assert images, f"{path.name} drew no figure"


def _with_tools(rd: Path, tools: list[str], policy: str | None = None) -> None:
    from searchbox.record.record import read_meta, write_meta

    meta = read_meta(rd)
    meta["tools"] = tools
    meta["served"]["policy"] = policy
    write_meta(rd, meta)


def test_generic_figures_follow_the_axes_that_vary(tmp_path):
    """No budget axis: accuracy as bars, not a budget curve of single points. Grep vs dense only where a run could choose
    (grep and a dense tool offered), one panel per question type. Tokens only for runs of a model (controls spend none)."""
    from searchbox.analysis.figures import applies, grep_vs_dense, tokens_per_turn_figure

    s = tmp_path / "plain"
    both, grep_only = ["grep", "read", "bash", "search_dataroom"], ["grep", "read"]
    for model, policy in (("smollm", None), ("control-keyword", "keyword")):
        for tools, enabled in (("high", both), ("none", grep_only)):
            for i, qid in enumerate(("nw01", "nw02", "nw03")):
                rd = make_run(s, f"{model}-{tools}-{qid}", question_id=qid, dataroom=None, model=model, served_id=model,
                              grades=GRADED if tools == "high" and i else WRONG, outputs=[SEARCH, GREP] if tools == "high" else [GREP],
                              config={"tools": tools}, axes={"model": model, "tools": tools})
                _with_tools(rd, enabled, policy)
    frames = load([s])
    assert applies(frames, "accuracy_vs_budget") == "needs a budget axis that varies" and applies(frames, "accuracy") is None
    assert applies(frames, "grep_vs_dense") is None and applies(frames, "tokens_per_turn") is None
    fig = grep_vs_dense(frames, "contains")
    assert [ax.get_title() for ax in fig.axes] == ["factoid questions"]  # one panel per question type, not per condition
    assert {t.get_text() for t in fig.axes[0].get_yticklabels()} == {"model=control-keyword", "model=smollm"}  # tools=high only
    assert "tools=high" in fig._suptitle.get_text()
    tokens = tokens_per_turn_figure(frames, "contains")
    assert sorted(ax.get_title() for ax in tokens.axes if ax.get_visible()) == ["tools=high, model=smollm (n=3 runs)",
                                                                              "tools=none, model=smollm (n=3 runs)"]  # no control
    out = tmp_path / "out"
    summary = check_report(s, out)
    assert (out / "accuracy.png").exists() and not (out / "accuracy_vs_budget.png").exists()
    for name in ("tool_choice", "time_split", "grep_vs_dense"):
        assert (out / f"{name}.png").exists()
    grep_only_room = tmp_path / "grep_only"
    for tools in ("grep_only", "none"):
        for qid in ("nw01", "nw02"):
            rd = make_run(grep_only_room, f"{tools}-{qid}", question_id=qid, dataroom=None, grades=GRADED, outputs=[GREP],
                          axes={"tools": tools})
            _with_tools(rd, grep_only)
    assert "the tool selection, not the run, decides" in applies(load([grep_only_room]), "grep_vs_dense")
    assert "![grep_vs_dense](grep_vs_dense.png)" in summary


def test_a_context_without_the_reference_level_compares_against_its_lowest_level():
    """control-dense (the lowest model) left out under tools=none: the other models there are still compared."""
    from searchbox.analysis import comparisons

    rows = [{"run_id": f"{m}-{t}-{q}", "question_id": q, "model": m, "tools": t, "correct": float(m != "smollm")}
            for m in ("control-dense", "control-keyword", "smollm") for t in ("high", "none") for q in ("q1", "q2")
            if not (m == "control-dense" and t == "none")]
    pairs = comparisons(pd.DataFrame(rows), "correct", conds=["tools", "model"])
    none = pairs[(pairs["vary"] == "model") & (pairs["context"] == "tools=none")]
    assert list(zip(none["a"], none["b"])) == [("model=smollm", "model=control-keyword")] and none["diff"].iloc[0] == -1.0
    high = pairs[(pairs["vary"] == "model") & (pairs["context"] == "tools=high")]
    assert set(high["b"]) == {"model=control-dense"} and len(high) == 2
