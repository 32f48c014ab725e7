"""Questions that ask one fact resample together (issue 29): the fact group of a question, its reach into runs from the
question file, the CI clustered by it, and the report's "N questions, M distinct facts"."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from searchbox.analysis import accuracy_table, paired_comparison
from searchbox.analysis.facts import with_facts
from searchbox.analysis.report import summary
from searchbox.analysis.frames import Frames
from searchbox.analysis.stats import cluster_bootstrap, sign_flip_p
from searchbox.grading import Question
from searchbox.questions.build import builtin_questions, load
from searchbox.questions.facts import count, fact_of


def test_questions_of_one_answer_file_and_value_are_one_fact():
    succ = [Question(id=f"s{i}", question=f"The model m{i} has been superseded. What is the dimension of the model that superseded it?",
                     answer="1024", gold_files=[f"m{i}.md", "v3.md"], type="multi-hop",
                     evidence=[{"file": "v3.md", "text": "output_dimension: 1024"}]) for i in range(3)]
    single = Question(id="a", question="What is the dimension of v3?", answer="1,024", gold_files=["v3.md"])  # the grader's 1024
    other = Question(id="b", question="What is the dimension of v2?", answer="1024", gold_files=["v2.md"])
    named = Question(id="c", question="?", answer="x", gold_files=["z.md"], fact="shared-by-importer")
    assert len({fact_of(q) for q in [*succ, single]}) == 1
    assert fact_of(other) != fact_of(single) and fact_of(named) == "shared-by-importer"
    assert fact_of(succ[0]) == "v3.md: 1024"


def test_the_packaged_set_holds_35_multi_hop_facts():
    questions = load(builtin_questions())
    multi = [q for q in questions if q.type == "multi-hop"]
    assert count(multi)[:2] == (57, 35)
    assert count(questions)[:2] == (397, 340)


def test_a_cluster_ci_is_wider_than_the_naive_one_when_questions_share_a_fact():
    """20 questions in 4 facts of 5, each fact's questions all right or all wrong: 4 observations, not 20."""
    values = np.array([1.0] * 5 + [0.0] * 5 + [1.0] * 5 + [0.0] * 5)
    facts = np.repeat(["f1", "f2", "f3", "f4"], 5)
    mean, lo, hi = cluster_bootstrap(values)
    mean_f, lo_f, hi_f = cluster_bootstrap(values, groups=facts)
    assert mean == mean_f == 0.5
    assert (hi_f - lo_f) > 1.5 * (hi - lo)
    # every question its own fact: the same CI as resampling questions
    assert cluster_bootstrap(values, groups=[f"q{i}" for i in range(20)]) == cluster_bootstrap(values)
    assert np.isnan(cluster_bootstrap(values, groups=["one"] * 20)[1])  # one fact says nothing of spread


def test_a_cluster_ci_weighs_each_question_equally():
    """A fact of three questions and a fact of one: the estimate is the mean over the four questions."""
    values, clusters = [1.0, 1.0, 1.0, 0.0, 0.0], ["a", "b", "c", "d", "d"]  # d: two repeats
    assert cluster_bootstrap(values, clusters, groups=["f", "f", "f", "g", "g"])[0] == 0.75


def _runs(tmp_path, n_facts=4, per_fact=5):
    qfile = tmp_path / "q.jsonl"
    rows = [{"id": f"q{f}{k}", "question": f"Question {k} about fact {f}?", "answer": f"v{f}", "gold_files": [f"f{f}.md"], "type": "single-hop"}
            for f in range(n_facts) for k in range(per_fact)]
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = []
    for tools in ("high", "none"):
        for r in rows:
            right = float(tools == "high" and int(r["id"][1]) % 2 == 0)
            runs.append({"run_id": f"{tools}-{r['id']}", "question_id": r["id"], "question": r["question"], "questions_path": str(qfile),
                         "tools": tools, "correct": right, "contains": right})
    return pd.DataFrame(runs)


def test_the_fact_group_reaches_runs_from_their_question_file(tmp_path):
    runs = _runs(tmp_path)
    with_groups = with_facts(runs)
    assert with_groups["fact_group"].nunique() == 4 and with_groups["question_id"].nunique() == 20
    reworded = runs.assign(question="another wording?")
    assert with_facts(reworded)["fact_group"].nunique() == 20  # the file no longer holds the run's question: its own group
    gone = runs.assign(questions_path=str(tmp_path / "gone.jsonl"))
    assert with_facts(gone)["fact_group"].nunique() == 20


def test_tables_and_comparisons_resample_facts(tmp_path):
    runs = _runs(tmp_path)
    naive = accuracy_table(runs, "correct", design=["tools"]).set_index("tools")
    clustered = accuracy_table(with_facts(runs), "correct", design=["tools"]).set_index("tools")
    assert clustered.loc["high", "mean"] == naive.loc["high", "mean"] == 0.5
    width = lambda t: t.loc["high", "ci_high"] - t.loc["high", "ci_low"]  # noqa: E731
    assert width(clustered) > 1.5 * width(naive)
    a, b = {"tools": "high"}, {"tools": "none"}
    p_naive = paired_comparison(runs, "correct", a, b, design=["tools"])
    p_fact = paired_comparison(with_facts(runs), "correct", a, b, design=["tools"])
    assert p_fact["diff"] == p_naive["diff"] and (p_fact["ci_high"] - p_fact["ci_low"]) > 1.5 * (p_naive["ci_high"] - p_naive["ci_low"])
    # McNemar counts 10 discordant questions (p 0.002); they are 2 facts, and 2 facts of 4 flipped prove nothing
    assert p_naive["test"] == "mcnemar" and p_naive["p"] < 0.01
    assert p_fact["test"] == "sign-flip by fact" and p_fact["p"] > 0.2


def test_the_sign_flip_test_flips_a_fact_whole():
    diffs = [1.0] * 12
    assert sign_flip_p(diffs) < 0.001
    assert sign_flip_p(diffs, groups=["a"] * 6 + ["b"] * 6) == 0.5  # two facts: 2 of 4 sign patterns are as far from 0


def test_the_report_says_how_many_questions_and_distinct_facts(tmp_path):
    runs = with_facts(_runs(tmp_path))
    frames = Frames(runs, pd.DataFrame(), pd.DataFrame(), ["tools"])
    text = summary(frames, "correct", "facts", skipped={})
    assert "20 questions, 4 distinct facts" in text
    assert "CIs resample facts (questions that ask one fact resample together)" in text
    assert "CI from resampling facts" in text
