"""Grading: a table of answer/gold pairs both ways, the answer part, the judge cache key, and regrading from artifacts."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from searchbox.grading import cli as grade_cli
from searchbox.grading import GRADER_VERSION, Judge, Question, answer_part, contains, exact_match, grade, grade_text, load_questions, normalize, token_f1
from searchbox.record.record import read_meta
from tests.fakes.judge_server import JudgeServer
from tests.fakes.runs import QUESTIONS, make_run

GANNET = ["38.4 metres"]
# (ANSWER.md, gold answer and aliases, contains?) -- graded exactly as a run is: answer part, then contains.
CASES = [
    # must match
    ("The tower is a 38.4-metre granite column.", GANNET, True),
    ("It stands 38.4 m tall.", GANNET, True),
    ("38.40 meters", GANNET, True),
    ("The tower is 38.4m.", GANNET, True),
    ("３８.４ metres (full-width digits)", GANNET, True),
    ("**Answer:** 38.4 metres\n\nSources: reports/gannet-rock-survey.md", GANNET, True),
    ("The Trust welcomed 41,200 visitors.", ["41200"], True),
    ("41\u202f200 visitors", ["41,200"], True),
    ("About 41.2 thousand visitors", ["41,200"], True),
    ("It cost £412,000.", ["412,000 pounds"], True),
    ("412k pounds", ["412,000 pounds"], True),
    ("GBP 412,000", ["412,000 pounds"], True),
    ("Income was £1.34M", ["1.34 million pounds"], True),
    ("ReaderLM-v2 has 1.54 billion parameters.", ["1.54B"], True),
    ("It was released on January 16, 2025.", ["2025-01-16"], True),
    ("Released the 16th of January 2025", ["2025-01-16"], True),
    ("License: CC BY-NC 4.0", ["CC-BY-NC-4.0"], True),
    ("TOBIAS WREN led the restoration.", ["Tobias Wren"], True),
    ("Tobias Wren (see people/staff.md)", ["Tobias Wren"], True),
    ("Zurich", ["Zürich"], True),
    ("Two lighthouses are closed.", ["2"], True),
    ("38 per cent came from admissions", ["38%"], True),
    ("The Hague", ["Hague"], True),
    ("It uses jina embeddings v3.", ["jina-embeddings-v3"], True),
    ("Little Vell, first lit in 1856.", ["Little Vell, 1856", "Little Vell"], True),
    ("The low was \u22125 °C", ["-5 °C"], True),
    ("A state-of-the-art lens", ["state of the art"], True),
    # the corpus's own formats (issue 19)
    ("published_at: 2024-04-16T16:19:47.000+02:00", ["2024-04-16"], True),  # the date as written, time and zone dropped
    ("2024-04-16 16:19 UTC", ["April 16, 2024"], True),
    ("Tuesday, 16th April 2024", ["2024-04-16"], True),
    ("Tue. 16 April 2024", ["2024-04-16"], True),
    ("April the 16th, 2024", ["2024-04-16"], True),
    ("16/04/2024", ["2024-04-16"], True),  # only one reading is a date
    ("04/16/2024", ["2024-04-16"], True),
    ("Apache License 2.0", ["Apache-2.0"], True),
    ("The Apache License, Version 2.0", ["Apache-2.0"], True),
    ("Apache 2", ["Apache-2.0"], True),
    ("Creative Commons Attribution Non Commercial 4.0", ["CC-BY-NC-4.0"], True),
    ("Creative Commons Attribution-NonCommercial 4.0 International", ["CC-BY-NC-4.0"], True),
    ("CC BY-NC 4.0", ["CC-BY-NC-4.0"], True),
    ("GNU General Public License v3.0", ["GPL-3.0"], True),
    ("GPLv3", ["GPL-3.0"], True),
    ("the MIT License", ["MIT"], True),
    ("3-clause BSD", ["BSD-3-Clause"], True),
    ("Mozilla Public License 2.0", ["MPL-2.0"], True),
    ("Scott A. Martens", ["Scott Martens"], True),
    ("Scott B. Martens", ["Scott Martens"], True),  # any middle initial, not only "a" (an article)
    ("1.04B", ["1.04 billion"], True),
    ("1,040 million", ["1.04B"], True),
    ("1.04 bn", ["1040000000"], True),
    ("8,192 tokens", ["8K"], True),  # K as 1024 when n is a power of two
    ("8192", ["8K"], True),
    ("8K", ["8192"], True),
    ("8,000 tokens", ["8K"], True),  # and as 1000
    ("32,768", ["32K"], True),
    ("1,024 tokens", ["1K"], True),
    # other corpora's formats (issue 19 review)
    ("3.5 per cent", ["3.5%"], True),
    ("35 percentage points", ["35%"], True),
    ("thirty-five percent", ["35%"], True),
    ("€1,2 Mio.", ["1.2 million euros"], True),  # a decimal comma where it says money or a measure
    ("3,5 %", ["3.5%"], True),
    ("$1.2m", ["$1.2 million"], True),  # after a currency "m" is million
    ("US$1.2 million", ["$1,200,000"], True),
    ("EUR 1.2m", ["1.2 million euros"], True),
    ("1e6", ["1,000,000"], True),
    ("1.2 × 10⁶", ["1,200,000"], True),
    ("10^6", ["1000000"], True),
    ("one million", ["1,000,000"], True),
    ("a million", ["1,000,000"], True),
    ("two thousand and five", ["2005"], True),
    ("twenty-one", ["21"], True),
    ("one hundred and twenty", ["120"], True),
    ("1\u202f000\u202f000", ["1,000,000"], True),  # a thin space groups digits
    ("Q3 2024", ["third quarter of 2024"], True),
    ("2024-Q3", ["Q3 2024"], True),
    ("H1 2024", ["first half of 2024"], True),
    ("FY2023", ["fiscal year 2023"], True),
    ("FY 2023", ["FY2023"], True),
    ("mid-2024", ["mid 2024"], True),
    ("the end of 2024", ["late 2024"], True),
    ("the sixteenth of April 2024", ["2024-04-16"], True),  # ordinal words
    ("April twenty-first, 2024", ["2024-04-21"], True),
    ("Henry VIII", ["Henry VIII"], True),
    ("Dr. Jane Goodall", ["Jane Goodall"], True),
    ("Martin Luther King Jr.", ["Martin Luther King Jr"], True),
    ("Jean-Paul Sartre", ["Jean Paul Sartre"], True),
    ("Søren Kierkegaard", ["Soren Kierkegaard"], True),  # letters without a combining mark
    ("Łukasz Kaiser", ["Lukasz Kaiser"], True),
    ("Straße", ["Strasse"], True),
    ("Michael Guenther", ["Michael Günther"], True),  # an umlaut written out
    ("José Martí", ["Jose Marti"], True),
    ("Washington DC", ["Washington, D.C."], True),  # dotted initialisms
    ("120 m²", ["120 square metres"], True),  # superscripts
    ("120 m2", ["120 sq m"], True),
    ("12 °C", ["12 degrees Celsius"], True),
    ("12°C", ["12 degrees C"], True),
    ("minus 5 °C", ["-5 °C"], True),
    ("The ferry leaves at 4:19 pm.", ["16:19"], True),  # 24-hour clock
    ("16:19", ["4:19 p.m."], True),
    ("It takes 3 hours.", ["3 h"], True),
    ("88.5 km/h", ["88.5 kph"], True),
    # must not match
    ("It is 138.4 metres tall.", GANNET, False),
    ("It is 38.4 feet tall.", GANNET, False),
    ("It is 38.4 km from shore.", GANNET, False),
    ("ReaderLM-v2 has 1.5B parameters.", ["1.54B"], False),
    ("Released 2025-01-17.", ["2025-01-16"], False),
    ("Python 3.1", ["Python 3.10"], False),
    ("The low was 5 °C", ["-5 °C"], False),
    ("Odore Wren", ["Theodore Wren"], False),  # "the" is an article only as a whole word
    ("41,200 visitors (reports/annual-report-2023.md)", ["2023"], False),  # a cited file name is no answer
    ("41,200 visitors.\n\nSources: reports/gannet-rock-survey.md says 38.4 metres", GANNET, False),  # after Sources: not read
    ("It uses jina-embeddings-v2.", ["jina-embeddings-v3"], False),
    ("License: CC-BY-4.0", ["CC-BY-NC-4.0"], False),
    ("It cost 412,000 dollars.", ["412,000 pounds"], False),
    ("4,120 visitors", ["41,200"], False),
    ("12 lighthouses", ["2"], False),
    ("Tobias", ["Tobias Wren"], False),
    ("04/05/2024", ["2024-05-04"], False),  # day and month could be either way round: no date
    ("2024-04-17T01:00:00+02:00", ["2024-04-16"], False),  # the date as written, not converted to UTC
    ("CC BY-NC-SA 4.0", ["CC-BY-NC-4.0"], False),
    ("CC-BY-4.0", ["CC-BY-NC-4.0"], False),
    ("GPLv2", ["GPL-3.0"], False),
    ("Apache 2.1", ["Apache-2.0"], False),
    ("10,240", ["10K"], False),  # 10 is no power of two: 10K is 10,000 only
    ("0.35", ["35%"], False),  # a fraction is no percentage (decided)
    ("3.5%", ["35%"], False),
    ("1 000 000", ["1,000,000"], False),  # a plain space separates numbers ("768 512 256"), it groups no digits
    ("Q2 2024", ["Q3 2024"], False),
    ("FY2024", ["FY2023"], False),
    ("late 2025", ["early 2025"], False),
    ("Henry VII", ["Henry VIII"], False),
    ("Martin Luther King Sr.", ["Martin Luther King Jr."], False),
    ("The ferry leaves at 4:19 am.", ["16:19"], False),
    ("120 m", ["120 m²"], False),
    ("12 °F", ["12 °C"], False),
    ("$1.2 billion", ["$1.2 million"], False),
    ("€1.2 million", ["$1.2 million"], False),
    ("one", ["1"], False),  # still: a lone "one" is a pronoun to the normaliser
    ("16,384 pounds", ["16K pounds"], True),
    ("The answer is not in the documents.", ["Tobias Wren"], False),
    ("", ["Tobias Wren"], False),
]


@pytest.mark.parametrize("answer,golds,expected", CASES)
def test_contains_table(answer, golds, expected):
    q = Question("q", "?", golds[0], golds[1:])
    assert grade_text(answer, q)["contains"] == float(expected), normalize(answer)


def test_table_is_large_and_two_sided():
    assert len(CASES) >= 30
    assert sum(1 for c in CASES if c[2]) >= 15 and sum(1 for c in CASES if not c[2]) >= 15


@pytest.mark.parametrize("answer,golds,expected", [
    ("38.4 metres", ["38.4 m"], 1.0),
    ("**Answer:** 38.4-metre\n\nSources: reports/gannet-rock-survey.md", GANNET, 1.0),
    ("# Answer\n\nTobias Wren\n\nHe led the Skerrow Point restoration.", ["Tobias Wren"], 1.0),
    ("The 41,200", ["41200"], 1.0),
    ("About 41,200", ["41200"], 0.0),
    ("Little Vell", ["Little Vell, 1856", "Little Vell"], 1.0),
    ("Tobias Wren led it.", ["Tobias Wren"], 0.0),
    ("Apache License 2.0", ["Apache-2.0"], 1.0),
    ("Tuesday, 16th April 2024", ["2024-04-16"], 1.0),
    ("2024-04-16T16:19:47.000+02:00", ["2024-04-16"], 1.0),
    ("Scott A. Martens", ["Scott Martens"], 1.0),
    ("8,192", ["8K"], 1.0),
])
def test_exact_match_reads_the_answer_line(answer, golds, expected):
    assert grade_text(answer, Question("q", "?", golds[0], golds[1:]))["exact_match"] == expected


def test_token_f1_and_missing_gold():
    assert token_f1("Tobias Wren", ["Tobias Wren"]) == 1.0
    assert token_f1("Wren", ["Tobias Wren"]) == pytest.approx(2 / 3)
    assert token_f1("nothing here", ["Tobias Wren"]) == 0.0
    assert all(math.isnan(f("x", [])) for f in (exact_match, token_f1, contains))
    g = grade_text("anything", Question("q", "?", ""))
    assert g["exact_match"] is None and g["contains"] is None  # no gold: missing, never 0


@pytest.mark.parametrize("text,part,graded", [
    ("38.4 metres\n\n## Sources\n- reports/gannet-rock-survey.md", "before_sources", "38.4 metres"),
    ("38.4 metres\n**Sources:** reports/gannet-rock-survey.md", "before_sources", "38.4 metres"),
    ("38.4 metres\n\nReferences\n1. the survey", "before_sources", "38.4 metres"),
    ("38.4 metres\n- Source: the survey", "before_sources", "38.4 metres"),
    ("38.4 metres (Source: the 2022 survey)", "before_sources", "38.4 metres"),
    ("<think>maybe 41 metres</think>\n38.4 metres", "whole", "38.4 metres"),
    ("Sources: the survey\n\n38.4 metres", "whole", "Sources: the survey\n\n38.4 metres"),
    ("Final answer: 38.4 metres", "whole", "38.4 metres"),
    ("The open sources say 38.4 metres", "whole", "The open sources say 38.4 metres"),
    # an inline "sources:" cuts its line only where it starts a part of its own
    ("Han Xiao wrote it; it draws on two sources: the card and the post", "whole",
     "Han Xiao wrote it; it draws on two sources: the card and the post"),
    ("It combines data from three sources: web pages, papers and code.", "whole", "It combines data from three sources: web pages, papers and code."),
    ("38.4 metres. Sources: the survey", "before_sources", "38.4 metres."),
    ("38.4 metres; references: the survey", "before_sources", "38.4 metres;"),
    ("38.4 metres - Sources: the survey", "before_sources", "38.4 metres"),
    ("38.4 metres [Source: the survey]", "before_sources", "38.4 metres"),
])
def test_answer_part(text, part, graded):
    got = answer_part(text)
    assert (got.part, got.text) == (part, graded)


@pytest.mark.parametrize("text,claim", [
    ("Scott Martens\nHe wrote it.", "Scott Martens"),
    ("The authors are:\n\n- Han Xiao\n- Scott Martens\n\nBoth at Jina AI.", "The authors are: Han Xiao; Scott Martens"),
    ("- Han Xiao\n- Scott Martens\nmore", "Han Xiao; Scott Martens"),
    ("1. Han Xiao\n2. Scott Martens", "Han Xiao; Scott Martens"),
    ("The answer is:\n\nScott Martens\n\nHe wrote it.", "The answer is: Scott Martens"),
    ("```\nApache-2.0\n```", "Apache-2.0"),
    ("**Answer:** 38.4 metres\n\nSources: x.md", "38.4 metres"),
])
def test_claim_is_the_answer_line_with_its_list(text, claim):
    assert answer_part(text).claim == claim
    assert answer_part("The authors are:\n- Han Xiao\n- Scott Martens\n\nBoth at Jina AI.").after == "Both at Jina AI."


def test_a_path_gold_keeps_references():
    q = Question("q", "Which file lists the lighthouses?", "reports/lighthouses.csv")
    assert grade_text("They are in reports/lighthouses.csv", q)["contains"] == 1.0


def test_load_questions(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"id": 1, "question": "q1", "answer": "a"}\n\n{"id": "2", "question": "q2"}\n')
    qs = load_questions(p)
    assert [q.id for q in qs] == ["1", "2"] and qs[1].golds == []
    assert [q.id for q in load_questions(p, limit=1)] == ["1"]
    p.write_text('{"question": "no id"}\n')
    with pytest.raises(Exception, match="q.jsonl:1"):
        load_questions(p)


# ---- the judge ------------------------------------------------------------------------------
def test_judge_keys_verdicts_by_served_model_endpoint_and_gold():
    with JudgeServer(["judge-a"]) as a, JudgeServer(["judge-b"]) as b:
        ja = Judge.connect(a.url)
        assert ja.model_id == "judge-a"  # as served, not as configured
        assert ja("How tall?", ["38.4 metres"], "It is 38.4 metres") == 1.0
        assert ja("How tall?", ["38.4 metres"], "It is 38.4 metres") == 1.0
        assert len(a.requests) == 1  # cached
        assert ja("How tall?", ["41 metres"], "It is 38.4 metres") == 0.0  # another gold: judged again
        assert len(a.requests) == 2
        jb = Judge.connect(b.url)
        assert jb("How tall?", ["38.4 metres"], "It is 38.4 metres") == 1.0
        assert len(b.requests) == 1  # another served model: its own verdict
        assert ja.identity()["judge_model"] == "judge-a" and ja.identity()["judge_prompt"]


def test_judge_needs_a_served_id():
    from searchbox.errors import ModelError

    with JudgeServer(["x", "y"]) as srv:
        with pytest.raises(ModelError, match="serves x, y"):
            Judge.connect(srv.url)
        assert Judge.connect(srv.url, "y").model_id == "y"
    with JudgeServer(list_models=False) as srv:
        with pytest.raises(ModelError, match="/v1/models"):
            Judge.connect(srv.url)


def test_unusable_verdict_is_missing_and_not_cached():
    with JudgeServer(reply="maybe?") as srv:
        judge = Judge.connect(srv.url)
        assert math.isnan(judge("q", ["a"], "b"))
        assert math.isnan(judge("q", ["a"], "b"))
        assert len(srv.requests) == 2


# ---- grading a run, and regrading a sweep ---------------------------------------------------
def test_grade_reads_the_artifacts(tmp_path):
    rd = make_run(tmp_path, "r1", answer="**Answer:** 38.4 metres\n\nSources: reports/gannet-rock-survey.md",
                  outputs=[(1, "read", (QUESTIONS.parent / "dataroom/reports/gannet-rock-survey.md").read_text())])
    q = load_questions(QUESTIONS, ids=["nw01"])[0]
    g = grade(rd, q)
    assert g["exact_match"] == 1.0 and g["contains"] == 1.0 and g["answer_part"] == "before_sources"
    assert g["evidence_recall"] == 1.0 and g["grader_version"] == GRADER_VERSION and g["judge"] is None
    json.dumps(g)  # JSON-ready
    (rd / "work" / "ANSWER.md").unlink()
    (rd / "work" / "ANSWER.md").symlink_to(tmp_path / "elsewhere.md")
    (tmp_path / "elsewhere.md").write_text("38.4 metres")
    assert grade(rd, q)["contains"] == 0.0  # a link is not the model's answer file


@pytest.fixture
def sweep(tmp_path):
    qfile = tmp_path / "questions.jsonl"
    shutil.copy(QUESTIONS, qfile)
    s = tmp_path / "sweep"
    make_run(s, "a1", question_id="nw01", answer="38.4 metres", questions_path=qfile)
    make_run(s, "a2", question_id="nw02", answer="About 41 thousand visitors", questions_path=qfile)
    make_run(s, "a3", question_id="nw03", answer="Tobias Wren", questions_path=qfile)
    return s, qfile


def test_regrade_after_a_gold_edit_changes_exactly_the_affected_runs(sweep, capsys):
    s, qfile = sweep
    assert grade_cli.main([str(s)]) == 0
    before = {m["run_id"]: m["grades"] for m in map(read_meta, sorted((s / "runs").iterdir()))}
    assert before["a2"]["contains"] == 0.0 and before["a1"]["contains"] == 1.0
    assert pd.read_parquet(s / "runs.parquet").set_index("run_id").loc["a2", "contains"] == 0.0
    lines = [json.loads(ln) for ln in qfile.read_text().splitlines()]
    for q in lines:
        if q["id"] == "nw02":
            q["aliases"].append("41 thousand")
    qfile.write_text("".join(json.dumps(q) + "\n" for q in lines))
    capsys.readouterr()
    assert grade_cli.main([str(s), "--dry-run"]) == 0
    assert "1 would change" in capsys.readouterr().out and read_meta(s / "runs" / "a2")["grades"] == before["a2"]
    assert grade_cli.main([str(s)]) == 0
    out = capsys.readouterr().out
    after = {m["run_id"]: m["grades"] for m in map(read_meta, sorted((s / "runs").iterdir()))}
    assert [r for r in before if before[r] != after[r]] == ["a2"]
    assert after["a2"]["contains"] == 1.0 and after["a2"]["gold_source"] == "questions_path"
    assert "a2: " in out and "1 changed" in out
    assert pd.read_parquet(s / "runs.parquet").set_index("run_id").loc["a2", "contains"] == 1.0  # tables follow


def test_regrade_gold_sources(sweep, tmp_path):
    s, qfile = sweep
    override = tmp_path / "override.jsonl"
    override.write_text(json.dumps({"id": "nw03", "question": "Who led the restoration of Skerrow Point lighthouse?", "answer": "Ines Calloway"}) + "\n")
    assert grade_cli.main([str(s), "--questions", str(override)]) == 0
    g = {r: read_meta(s / "runs" / r)["grades"] for r in ("a1", "a3")}
    assert g["a3"]["gold_source"] == "questions" and g["a3"]["contains"] == 0.0
    assert g["a1"]["gold_source"] == "questions_path"
    qfile.unlink()  # the recorded file is gone: the gold as of the run
    override.write_text(json.dumps({"id": "nw03", "question": "A different question?", "answer": "Ines Calloway"}) + "\n")
    assert grade_cli.main([str(s), "--questions", str(override)]) == 0
    g = read_meta(s / "runs" / "a3")["grades"]
    assert g["gold_source"] == "run_meta" and g["contains"] == 1.0  # another question text is not this run's question


def test_regrade_with_the_judge(sweep, capsys):
    s, _ = sweep
    with JudgeServer(["judge-7b"]) as srv:
        assert grade_cli.main([str(s), "grading.judge=true", f"grading.judge_endpoint={srv.url}"]) == 0
        assert len(srv.requests) == 3
        g = read_meta(s / "runs" / "a1")["grades"]
        assert g["judge"] == 1.0 and g["judge_model"] == "judge-7b" and g["judge_endpoint"] == srv.url
        assert grade_cli.main([str(s), "--judge", "--judge-endpoint", srv.url]) == 0
        assert len(srv.requests) == 3  # every verdict cached
    runs = pd.read_parquet(s / "runs.parquet")
    assert set(runs["judge_model"]) == {"judge-7b"} and runs["judge"].notna().all()


@pytest.mark.parametrize("argv,message", [
    (["grading.judge_url=x"], "unknown override"),
    (["grading.judge=true"], "judge_endpoint"),
    (["grading.judge=perhaps"], "expected true or false"),
])
def test_regrade_bad_input_is_one_line(sweep, capsys, argv, message):
    s, _ = sweep
    assert grade_cli.main([str(s), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_regrade_says_when_there_is_nothing_to_regrade(tmp_path, capsys):
    (tmp_path / "tables").mkdir()
    assert grade_cli.main([str(tmp_path / "tables"), "--dry-run"]) == 0
    assert "no run directories" in capsys.readouterr().err


def test_regrade_missing_dir_and_dead_judge(tmp_path, sweep, capsys):
    assert grade_cli.main([str(tmp_path / "nope")]) == 2
    s, _ = sweep
    assert grade_cli.main([str(s), "--questions", str(tmp_path / "none.jsonl")]) == 2
    assert grade_cli.main([str(s), "grading.judge=true", "grading.judge_endpoint=http://127.0.0.1:9"]) == 2
    assert "v1/models" in capsys.readouterr().err


def test_grade_a_real_run(tmp_path):
    """The agent's own trace and ANSWER.md (scripted model, real tools) graded end to end."""
    from tests.conftest import run_script

    script = [{"tool_calls": [{"name": "grep", "arguments": {"pattern": "metres from base", "path": "dataroom"}}]},
              {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/people/staff.md"}}]},
              {"tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": "38.4 metres\n\nSources: reports/gannet-rock-survey.md"}}]},
              {"content": "done"}]
    _, _, rd = run_script(tmp_path, script, question="How tall is the Gannet Rock lighthouse?")
    g = grade(rd, load_questions(QUESTIONS, ids=["nw01"])[0])
    assert g["contains"] == 1.0 and g["exact_match"] == 1.0 and g["answer_part"] == "before_sources"
    assert g["evidence_recall"] == 1.0 and g["evidence_tools"] == "grep" and g["evidence_first_turn"] == 1
    g3 = grade(rd, load_questions(QUESTIONS, ids=["nw03"])[0])  # staff.md was read too: its evidence arrived by read
    assert g3["evidence_recall"] == 1.0 and g3["evidence_tools"] == "read" and g3["contains"] == 0.0


# ---- python -m searchbox.grade check -----------------------------------------------------------------
def test_check_prints_every_grade(capsys):
    assert grade_cli.main(["check", "--gold", "Scott Martens", "--answer", "Han Xiao? No - the author is Scott A. Martens"]) == 0
    out = capsys.readouterr().out
    for name in ("correct", "contains", "exact_match", "f1"):
        assert out.count(f"\n{name} ") + out.startswith(name) == 1, out
    assert "denied: Han Xiao" in out and "asserts 'Scott Martens'" in out


def test_check_json(capsys):
    assert grade_cli.main(["check", "--gold", "Han Xiao", "--answer", "Han Xiao, Scott Martens", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["correct"], got["contains"], got["exact_match"]) == (0.0, 1.0, 0.0) and got["f1"] == pytest.approx(2 / 3)
    assert got["contradicting"] == ["Scott Martens"] and got["grader_version"] == GRADER_VERSION
    assert grade_cli.main(["check", "--gold", "38.4 metres", "--alias", "38.4 m", "--answer", "38.40 m", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 1.0


def test_check_reads_stdin_and_files(tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("It is not Apache 2.0; it is CC BY-NC 4.0".encode())))
    assert grade_cli.main(["check", "--gold", "CC-BY-NC-4.0", "--answer", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 1.0
    f = tmp_path / "ANSWER.md"
    f.write_text("**Answer:** 2024-04-16T16:19:47.000+02:00\n\nSources: post.md\n")
    assert grade_cli.main(["check", "--gold", "2024-04-16", "--answer-file", str(f), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["correct"] == got["contains"] == got["exact_match"] == 1.0 and got["answer_part"] == "before_sources"


@pytest.mark.parametrize("argv,message", [
    (["--answer", "x"], "--gold"),
    (["--gold", "", "--answer", "x"], "--gold"),
    (["--gold", "x"], "needs the answer"),
    (["--gold", "x", "--answer", "   "], "empty"),
    (["--gold", "x", "--alias", "", "--answer", "x"], "--alias is empty"),
    (["--gold", "x", "--answer-file", "/nonexistent/answer.md"], "cannot read"),
    (["--gold", "x", "--answer", "x", "--answer-file", "y"], "once"),
    (["--gold", "x", "--answer", "x", "--bogus"], "unrecognized"),
    (["--gold", "x", "--answer-file", "/dev/zero"], "not a regular file"),  # read without end before
    (["--gold", "x" * 100_000, "--answer", "x"], "--gold of 100000 characters"),
    (["--gold", "x", "--alias", "y" * 100_000, "--answer", "x"], "--alias of 100000 characters"),  # hung past 120 s before
])
def test_check_bad_input_is_one_line(capsys, argv, message):
    assert grade_cli.main(["check", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_check_a_fifo_is_refused_not_waited_on(tmp_path, capsys):
    import os
    fifo = tmp_path / "answer.md"
    os.mkfifo(fifo)
    assert grade_cli.main(["check", "--gold", "x", "--answer-file", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("answer", ["**" * 1024, "**" * 8192, "1." * 8192, "(" * 16384, "(1.2" * 4096, "1" * 16384,
                                    "It is " + "9" * 5000 + " metres.", "Gannet Rock. " * 800_000])
def test_grading_time_is_bounded_whatever_the_answer(answer):
    """Hostile shapes (backtracking bait, Python's integer-string limit, 10 MB) are graded fast: the graders read the
    first answer.ANSWER_CAP characters, and the inline Sources rule is found in linear time ('**' x 1024 took minutes)."""
    import time

    from searchbox.grading import Question, grade_text

    t = time.monotonic()
    grades = grade_text(answer, Question("x", "How tall is Gannet Rock?", "38.4 metres"))
    assert time.monotonic() - t < 5
    assert grades["correct"] == 0.0


def test_the_answer_past_the_cap_is_not_read():
    from searchbox.grading import Question, grade_text
    from searchbox.grading.answer import ANSWER_CAP

    q = Question("x", "How tall is Gannet Rock?", "38.4 metres")
    assert grade_text("38.4 metres" + " " * (ANSWER_CAP - 20), q)["correct"] == 1.0
    assert grade_text(" " * ANSWER_CAP + "38.4 metres", q)["contains"] == 0.0


def test_inline_sources_keeps_the_old_rule():
    from searchbox.grading.answer import inline_sources

    for line, kept in [("38.4 metres. Sources: g.md", "38.4 metres."), ("38.4 metres (Sources: g.md)", "38.4 metres "),
                       ("38.4 metres **Sources:** g.md", "38.4 metres "), ("38.4 metres - Sources: g.md", "38.4 metres"),
                       ("38.4 metres; references: g.md", "38.4 metres;")]:
        assert line[: inline_sources(line)] == kept, line
    assert inline_sources("it draws on two sources: the card and the post") is None


def test_check_unreadable_file(tmp_path, capsys):
    f = tmp_path / "latin1.md"
    f.write_bytes("Z\xfcrich".encode("latin-1"))
    assert grade_cli.main(["check", "--gold", "x", "--answer-file", str(f)]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_check_in_a_fresh_process():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "searchbox.grade", "check", "--gold", "8K", "--answer", "8,192 tokens", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["correct"] == 1.0
    proc = subprocess.run([sys.executable, "-m", "searchbox.grade", "check", "--answer", "x"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
