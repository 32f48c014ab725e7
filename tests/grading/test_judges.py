"""Several judges at once: two that disagree on purpose, their agreement with each other and with `correct`, the
BrowseComp-style prompt, and bad judge specs refused in one line."""

from __future__ import annotations

import pytest

from searchbox.analysis.agreement import agreement
from searchbox.errors import ConfigError
from searchbox.grading import Question, grade
from searchbox.grading.judge import PROMPT_HASHES
from searchbox.grading.judges import connect
from tests.fakes.judge_server import JudgeServer

BC_YES = "extracted_final_answer: Ana Ruiz\nreasoning: same name\ncorrect: yes\nconfidence: 80%"
BC_NO = "extracted_final_answer: Ana Ruiz\nreasoning: I disagree on purpose\ncorrect: no\nconfidence: 80%"


def _run(tmp_path, name, answer):
    d = tmp_path / name
    (d / "work").mkdir(parents=True)
    (d / "work" / "ANSWER.md").write_text(answer)
    return d


def test_two_judges_that_disagree_are_measured(tmp_path):
    q = Question("q", "Who was mayor?", "Ana Ruiz")
    with JudgeServer(["judge-a"]) as a, JudgeServer(["judge-b"], reply="INCORRECT") as b, JudgeServer(["judge-c"], reply=BC_YES) as c:
        judges = connect([{"name": "rule", "endpoint": a.url}, {"name": "contrary", "endpoint": b.url},
                          {"name": "bc", "endpoint": c.url, "prompt": "browsecomp"}])
        rows = [grade(_run(tmp_path, n, text), q, judges=judges) for n, text in
                [("r1", "Ana Ruiz"), ("r2", "Maybe Bob"), ("r3", "It was Ana Ruiz."), ("r4", "Unknown")]]
        again = grade(tmp_path / "r1", q, judges=judges)
        assert len(a.requests) == 4 and len(b.requests) == 4  # the repeat came from the cache
    assert [r["judge_rule"] for r in rows] == [1.0, 0.0, 1.0, 0.0] and [r["judge_contrary"] for r in rows] == [0.0] * 4
    assert [r["judge_bc"] for r in rows] == [1.0] * 4 and again["judge_rule"] == 1.0
    assert rows[0]["judge_bc_prompt"] == PROMPT_HASHES["browsecomp"] and rows[0]["judge_rule_model"] == "judge-a"
    assert "Gold answer: Ana Ruiz" in c.requests[0]["messages"][0]["content"]
    ids = ["r1", "r2", "r3", "r4"]
    vs_correct = agreement(ids, [r["correct"] for r in rows], [r["judge_rule"] for r in rows])
    assert vs_correct.percent == 1.0 and vs_correct.kappa == pytest.approx(1.0)
    ab = agreement(ids, [r["judge_rule"] for r in rows], [r["judge_contrary"] for r in rows])
    assert ab.percent == 0.5 and ab.disagree == ["r1", "r3"] and ab.kappa == pytest.approx(0.0)


def test_browsecomp_reply_without_a_verdict_is_missing(tmp_path):
    q = Question("q", "Who?", "Ana Ruiz")
    with JudgeServer(["j"], reply="I cannot say") as s, JudgeServer(["k"], reply=BC_NO) as t:
        judges = connect([{"name": "x", "endpoint": s.url, "prompt": "browsecomp"}, {"name": "y", "endpoint": t.url, "prompt": "browsecomp"}])
        g = grade(_run(tmp_path, "r", "Ana Ruiz"), q, judges=judges)
    assert g["judge_x"] is None and g["judge_y"] == 0.0


@pytest.mark.parametrize("spec,needle", [
    ([{"endpoint": "http://127.0.0.1:9"}], "needs a name and an endpoint"),
    ([{"name": "a", "endpoint": "http://x", "temp": 1}], "unknown field 'temp'"),
    ([{"name": "A b", "endpoint": "http://x"}], "lower-case letters"),
    ([{"name": "a", "endpoint": "http://x", "prompt": "vibes"}], "one of searchbox, browsecomp"),
])
def test_bad_judge_specs(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        connect(spec)


def test_grade_check_shows_each_judges_verdict(capsys):
    from searchbox.grading.cli import check

    with JudgeServer(["judge-a"]) as a, JudgeServer(["judge-c"], reply=BC_NO) as c:
        assert check(["--gold", "Ana Ruiz", "--answer", "Ana Ruiz", "--judge", a.url, "--judge", c.url,
                      "--judge-prompt", "searchbox", "--judge-prompt", "browsecomp"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[1]: ln.split()[2:5] for ln in out.splitlines() if ln.startswith("judge j")}
    assert lines == {"j1": ["1.000", "judge-a", "prompt"], "j2": ["0.000", "judge-c", "prompt"]}
    assert f"judge-c prompt {PROMPT_HASHES['browsecomp']}" in out
