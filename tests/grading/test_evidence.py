"""Evidence recall: a gold file counts when its answer-bearing passage reached the agent from the dataroom, never a name,
the agent's own text, its arguments or the question. Each test below is an attempt to fool it, or a case it must credit."""

from __future__ import annotations

import json
import shutil

import pytest

from searchbox.grading import evidence
from searchbox.config import HarnessConfig
from searchbox.corpus.dataroom import chunk_text
from searchbox.tools import builtins
from searchbox.tools.context import ToolContext
from tests.fakes.runs import DATAROOM, make_run

GOLD = "reports/gannet-rock-survey.md"
OTHER = "reports/annual-report-2023.md"
GOLDS = ["38.4 metres", "38.4 m", "38.4"]  # nw01, as the question file gives them
ANSWER_LINE = "The tower of Gannet Rock stands 38.4 metres from base to the top of the lantern, not 41 metres"
OTHER_LINE = "as stated in earlier guidebooks. The granite courses are sound. The gallery railings show"


def _text(out):
    return out if isinstance(out, str) else out.text  # a tool may return ToolResult(text, data)


@pytest.fixture
def run(tmp_path):
    """A run dir with the built-in dataroom and a tool context over it (the real tools make the outputs)."""
    rd = make_run(tmp_path, "r1")
    ctx = ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")
    return rd, ctx


def call(turn, tool, args, text, call_id):
    """An assistant tool call and its tool message, as trace.jsonl keeps them."""
    asked = {"type": "message", "turn": turn, "message": {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}}
    answered = {"type": "message", "turn": turn, "message": {"role": "tool", "tool_call_id": call_id, "name": tool, "content": _text(text)}}
    return [asked, answered]


def user(text, turn=1):
    return {"type": "message", "turn": turn, "message": {"role": "user", "content": text}}


def graded(rd, events, gold=(GOLD,), golds=GOLDS, question="How tall is the Gannet Rock lighthouse?"):
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [user(question), *events]))
    return evidence.of_run(rd, list(gold), list(golds))


def recall(rd, outputs, **kw):
    """(turn, tool, args, text) outputs, one call each."""
    return graded(rd, [e for n, o in enumerate(outputs) for e in call(o[0], o[1], o[2], o[3], f"c{n}")], **kw)


def search_result(picks, size=150):
    """A search_dataroom output as the tool serialises it: chunks of the given (path, chunk index)."""
    results = []
    for path, i in picks:
        text = (DATAROOM / path).read_text()
        results.append({"path": f"dataroom/{path}", "chunk": i, "score": 0.5, "text": chunk_text(text, size, 20)[i][1]})
    return json.dumps({"results": results, "scope_files": 7, "scope_chunks": 40}, ensure_ascii=False)


def gold_chunks(path=GOLD, size=150):
    chunks = chunk_text((DATAROOM / path).read_text(), size, 20)
    holding = [i for i, (_, t) in enumerate(chunks) if "38.4 metres from base to" in t]
    return holding, [i for i in range(len(chunks)) if i not in holding and "38.4" not in chunks[i][1]]


# ---- what counts ---------------------------------------------------------------------------------
def test_a_read_of_the_answer_lines_counts_and_of_other_lines_does_not(run):
    rd, ctx = run
    whole = builtins.read(ctx, f"dataroom/{GOLD}")
    ev = recall(rd, [(2, "read", {"path": f"dataroom/{GOLD}"}, whole)])
    assert ev.recall == 1.0 and ev.first_turn == 2 and ev.tools == ["read"] and ev.grades()["gold_content_seen"] == 1.0
    right = builtins.read(ctx, f"dataroom/{GOLD}", offset=5, limit=1)
    assert ANSWER_LINE in _text(right)
    assert recall(rd, [(1, "read", {"path": f"dataroom/{GOLD}", "offset": 5, "limit": 1}, right)]).recall == 1.0
    elsewhere = builtins.read(ctx, f"dataroom/{GOLD}", offset=1, limit=4) , builtins.read(ctx, f"dataroom/{GOLD}", offset=6)
    ev = recall(rd, [(1, "read", {"path": f"dataroom/{GOLD}", "offset": 1, "limit": 4}, elsewhere[0]),
                     (1, "read", {"path": f"dataroom/{GOLD}", "offset": 6}, elsewhere[1])])
    assert "38.4" not in _text(elsewhere[0]) + _text(elsewhere[1])
    assert ev.recall == 0.0 and ev.grades()["gold_content_seen"] == 1.0  # the right document, not the answer


def test_a_read_of_another_file_does_not(run):
    rd, ctx = run
    assert recall(rd, [(1, "read", {"path": f"dataroom/{OTHER}"}, builtins.read(ctx, f"dataroom/{OTHER}"))]).recall == 0.0


def test_a_grep_that_shows_the_answer_line_counts_one_that_shows_other_lines_does_not(run):
    rd, ctx = run
    tree = builtins.grep(ctx, "38.4 metres", "dataroom")
    assert _text(tree).startswith(f"dataroom/{GOLD}:")
    assert recall(rd, [(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, tree)]).recall == 1.0
    other = builtins.grep(ctx, "granite", f"dataroom/{GOLD}")
    assert OTHER_LINE in _text(other)
    ev = recall(rd, [(1, "grep", {"pattern": "granite", "path": f"dataroom/{GOLD}"}, other)])
    assert ev.recall == 0.0 and ev.content_recall == 1.0
    assert recall(rd, [(1, "bash", {"command": f"rg -n tower {GOLD}"}, f"5:{ANSWER_LINE}")]).recall == 1.0  # `rg -n PAT FILE`: no path


def test_a_grep_that_only_names_the_entity_is_not_evidence(tmp_path):
    room = cards(tmp_path)
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    ctx = ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")
    named = builtins.grep(ctx, "jina-reranker-v3", "dataroom")
    assert 'model_name: "jina-reranker-v3"' in _text(named) and "CC-BY-NC-4.0" not in _text(named)
    ev = recall(rd, [(1, "grep", {"pattern": "jina-reranker-v3", "path": "dataroom"}, named)], gold=["jina-reranker-v3.md"],
                golds=["CC-BY-NC-4.0"], question="What license is the model jina-reranker-v3 distributed under?")
    assert ev.recall == 0.0  # the name reached the agent, the license did not
    assert ev.content_recall == 1.0  # (the weaker measure: some of the gold file's text was seen)
    # A grep for the field shows every card's license line, each named by its file: the gold file's counts.
    field = builtins.grep(ctx, "^license:", "dataroom")
    assert _text(field).count("CC-BY-NC-4.0") == 2
    assert recall(rd, [(1, "grep", {"pattern": "^license:", "path": "dataroom"}, field)], gold=["jina-reranker-v3.md"],
                  golds=["CC-BY-NC-4.0"]).recall == 1.0
    # The same line with no file named is no evidence: another card has it too.
    assert recall(rd, [(1, "bash", {"command": "rg -o ..."}, 'license: "CC-BY-NC-4.0"')], gold=["jina-reranker-v3.md"],
                  golds=["CC-BY-NC-4.0"]).recall == 0.0
    whole = (room / "jina-reranker-v3.md").read_text()  # cat in bash: the line with its neighbours is the gold file's own
    assert recall(rd, [(1, "bash", {"command": "cat dataroom/jina-reranker-v3.md"}, whole)], gold=["jina-reranker-v3.md"],
                  golds=["CC-BY-NC-4.0"]).recall == 1.0


def test_a_search_chunk_holding_the_answer_counts(run):
    rd, _ = run
    holding, without = gold_chunks()
    assert holding and without
    only_others = search_result([(OTHER, 0), ("people/staff.md", 1), (GOLD, without[0])])
    ev = recall(rd, [(1, "search_dataroom", {"query": "height"}, only_others)])
    assert ev.recall == 0.0 and ev.content_recall == 1.0  # a chunk of the gold file, not its answer
    with_gold = search_result([(OTHER, 0), (GOLD, holding[0]), ("people/staff.md", 1)])
    ev = recall(rd, [(1, "search_dataroom", {"query": "height"}, only_others), (3, "search_dataroom", {"query": "tall"}, with_gold)])
    assert ev.recall == 1.0 and ev.first_turn == 3 and ev.tools == ["search_dataroom"]


def test_a_search_output_cut_by_the_cap_still_reads(run):
    rd, _ = run
    text = search_result([(GOLD, gold_chunks(size=400)[0][0]), (OTHER, 0)], size=400)
    cut = text[: text.index('"path": "dataroom/reports/annual')]  # not valid JSON any more
    with pytest.raises(ValueError):
        json.loads(cut)
    out = cut + "\n[output truncated: 9999 characters in all]"
    assert recall(rd, [(1, "search_dataroom", {"query": "q"}, out)]).recall == 1.0


def test_a_delivered_search_result_opened_with_read_and_cut_by_the_cap_still_reads(tmp_path):
    room = cards(tmp_path)
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    ctx = ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")
    hits = [{"path": f"dataroom/{name}", "chunk": 0, "score": 0.5, "text": (room / name).read_text()}
            for name in ("jina-reranker-v3.md", "jina-embeddings-v3.md")]
    (rd / "work" / "results").mkdir()
    (rd / "work" / "results" / "1-search_dataroom.txt").write_text(json.dumps({"results": hits}))  # JSON: quotes escaped
    opened = _text(builtins.read(ctx, "results/1-search_dataroom.txt"))
    cut = opened[: opened.index("dataroom/jina-embeddings-v3")]  # the output cap cut the one long line: no JSON any more
    assert '\\"CC-BY-NC-4.0\\"' in cut
    events = [*call(1, "search_dataroom", {"query": "q"}, "Result written to results/1-search_dataroom.txt", "c1"),
              *call(1, "read", {"path": "results/1-search_dataroom.txt"}, cut + "\n[output truncated: 9999 characters in all]", "c2")]
    ev = graded(rd, events, gold=["jina-reranker-v3.md"], golds=["CC-BY-NC-4.0"])
    assert ev.recall == 1.0 and ev.tools == ["read"]


def test_bash_cat_sed_and_nl(run):
    rd, _ = run
    text = (DATAROOM / GOLD).read_text()
    assert recall(rd, [(1, "bash", {"command": f"cat dataroom/{GOLD}"}, text)]).recall == 1.0
    assert recall(rd, [(1, "bash", {"command": f"sed -n 5p dataroom/{GOLD}"}, ANSWER_LINE)]).recall == 1.0
    assert recall(rd, [(1, "bash", {"command": f"sed -n 6,7p dataroom/{GOLD}"}, "\n".join(text.splitlines()[5:7]))]).recall == 0.0
    nl = "\n".join(f"{i:6d}\t{ln}" for i, ln in enumerate(text.splitlines()[4:6], 5))
    assert recall(rd, [(1, "bash", {"command": f"nl dataroom/{GOLD}"}, nl)]).recall == 1.0


def test_a_fragment_too_short_to_name_the_file_is_not_evidence(run):
    rd, _ = run
    look = {"command": "grep -o 'G.*to' dataroom/reports/*.md"}
    assert recall(rd, [(1, "bash", look, "stands 38.4 metres\ngranite courses")]).recall == 0.0
    assert recall(rd, [(1, "bash", look, "Gannet Rock stands 38.4 metres from base to")]).recall == 1.0


# ---- what the agent itself wrote, sent or was given ---------------------------------------------------
def test_a_note_written_then_read_or_cat_back_is_not_evidence(run):
    rd, ctx = run
    note = f"copied: {ANSWER_LINE}\n"
    builtins.write(ctx, "notes.md", note)
    events = [*call(1, "write", {"path": "notes.md", "content": note}, builtins.write(ctx, "notes.md", note), "c1"),
              *call(1, "read", {"path": "notes.md"}, builtins.read(ctx, "notes.md"), "c2"),
              *call(1, "bash", {"command": "cat notes.md"}, note, "c3")]
    ev = graded(rd, events)
    assert ev.recall == 0.0 and ev.content_recall == 0.0


def test_a_file_under_work_outside_the_dataroom_is_never_evidence(run):
    rd, ctx = run
    shutil.copy(DATAROOM / GOLD, rd / "work" / "copy.md")  # content the agent did not type, but not the dataroom's either
    assert recall(rd, [(1, "read", {"path": "copy.md"}, builtins.read(ctx, "copy.md"))]).recall == 0.0


def test_a_delivered_result_counts_unless_the_agent_wrote_over_it(run):
    rd, ctx = run
    grep = builtins.grep(ctx, "38.4 metres", "dataroom")
    (rd / "work" / "results").mkdir()
    (rd / "work" / "results" / "1-grep.txt").write_text(_text(grep))
    pointer = 'Result written to results/1-grep.txt (120 characters, 1 lines). Open it with read(path="results/1-grep.txt").'
    opened = builtins.read(ctx, "results/1-grep.txt")
    events = [*call(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, pointer, "c1"),
              *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    ev = graded(rd, events)
    assert ev.recall == 1.0 and ev.tools == ["read"]
    forged = [*call(1, "write", {"path": "results/1-grep.txt", "content": "x"}, "wrote 1 bytes to results/1-grep.txt", "c0"),
              *call(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, pointer, "c1"),
              *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    assert graded(rd, forged).recall == 0.0
    assert recall(rd, [(1, "read", {"path": "results/1-grep.txt"}, opened)]).recall == 0.0  # no grep ever delivered it


def test_an_error_echoing_the_arguments_is_not_evidence(run):
    rd, _ = run
    assert recall(rd, [(1, "read", {"path": ANSWER_LINE}, f"Error: {ANSWER_LINE}: no such file")]).recall == 0.0
    assert recall(rd, [(1, "bash", {"command": f"echo '{ANSWER_LINE}' | grep x"}, f"grep: {ANSWER_LINE}\n[exit code 1]")]).recall == 0.0
    # An argument typed in an earlier call does not become evidence when a later output echoes it either.
    assert recall(rd, [(1, "bash", {"command": f"X='{ANSWER_LINE}'"}, "[no output, exit code 0]"),
                       (2, "bash", {"command": "echo $X"}, ANSWER_LINE)]).recall == 0.0


def test_bash_that_reads_no_dataroom_prints_only_what_the_agent_put_there(run):
    rd, _ = run
    assert recall(rd, [(1, "bash", {"command": "echo Z3Vlc3M= | base64 -d"}, ANSWER_LINE)]).recall == 0.0
    assert recall(rd, [(1, "bash", {"command": "python3 -c 'print(42)'"}, ANSWER_LINE)]).recall == 0.0
    for command in (f"cat dataroom/{GOLD}", "rg -n tower", "grep -rn tower .", "cat */*/*.md", "cd dataroom && cat reports/g*"):
        assert recall(rd, [(1, "bash", {"command": command}, ANSWER_LINE)]).recall == 1.0, command


def test_the_question_repeated_is_not_evidence(run):
    rd, _ = run
    ev = recall(rd, [(1, "bash", {"command": "echo hi"}, ANSWER_LINE)], question=f"Is it true that '{ANSWER_LINE}'?")
    assert ev.recall == 0.0 and ev.content_recall == 0.0


def test_a_match_shows_more_than_the_pattern_typed(run):
    rd, _ = run
    ev = recall(rd, [(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, f"dataroom/{GOLD}:5:{ANSWER_LINE}")])
    assert ev.recall == 1.0


# ---- which gold files are measured ---------------------------------------------------------------------
def test_multi_hop_measures_the_file_that_holds_the_answer(tmp_path):
    room = cards(tmp_path)
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    ctx = ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")
    gold, golds = ["jina-reranker-v3.md", "reranker-v3-launch.md"], ["2025-10-01", "October 1, 2025"]
    q = "On what date was the blog post that announced jina-reranker-v3 published?"
    card = call(1, "read", {"path": "dataroom/jina-reranker-v3.md"}, builtins.read(ctx, "dataroom/jina-reranker-v3.md"), "c1")
    ev = graded(rd, card, gold=gold, golds=golds, question=q)
    assert ev.measured == ["reranker-v3-launch.md"] and ev.unmeasured == ["jina-reranker-v3.md"]  # the card names no date
    assert ev.recall == 0.0 and ev.content_recall == 0.5
    post = call(2, "read", {"path": "dataroom/reranker-v3-launch.md"}, builtins.read(ctx, "dataroom/reranker-v3-launch.md"), "c2")
    ev = graded(rd, card + post, gold=gold, golds=golds, question=q)
    assert ev.recall == 1.0 and ev.first_turn == 2 and ev.content_recall == 1.0


def test_missing_gold_files_and_files_without_the_answer_are_unmeasured(run):
    rd, ctx = run
    ev = recall(rd, [(1, "read", {"path": f"dataroom/{GOLD}"}, builtins.read(ctx, f"dataroom/{GOLD}"))], gold=[GOLD, OTHER, "nope.md"])
    assert ev.recall == 1.0 and ev.measured == [GOLD] and ev.unmeasured == [OTHER, "nope.md"]
    assert ev.grades()["evidence_gold_files"] == 1 and ev.grades()["evidence_unmeasured"] == 2
    assert recall(rd, [], gold=["nope.md"]).recall is None  # nothing measurable: missing, never 0
    assert recall(rd, [], gold=[]).recall is None
    assert recall(rd, [], golds=[]).recall is None  # no gold answer: nothing to look for
    assert recall(rd, [], gold=[OTHER], golds=["Atlantis"]).recall is None


def test_gold_answers_are_found_under_the_graders_normalisation(tmp_path):
    assert evidence.occurrences("It stands 38.4-metre tall.", ["38.4 metres"]) == [(10, 20)]
    assert evidence.occurrences("Visitors: 41,200 in all", ["41200"]) == [(10, 16)]
    assert evidence.occurrences('license: "CC-BY-NC-4.0"', ["CC-BY-NC-4.0"]) == [(9, 23)]
    assert evidence.occurrences("no answer here", ["41,200"]) == []


def test_text_shared_with_another_file_needs_the_file_named(tmp_path):
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room)
    (room / "products" / "copy.md").write_text(f"Quoted from the survey:\n{ANSWER_LINE}\n")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    ev = recall(rd, [(1, "read", {"path": "dataroom/products/copy.md"}, f"     1\tQuoted from the survey:\n     2\t{ANSWER_LINE}")])
    assert ev.recall == 0.0  # it came from copy.md
    assert recall(rd, [(1, "bash", {"command": "cat dataroom/*/*.md"}, ANSWER_LINE)]).recall == 0.0  # which file? copy.md has it too
    assert recall(rd, [(1, "grep", {"pattern": "tower"}, f"dataroom/{GOLD}:5:{ANSWER_LINE}")]).recall == 1.0


def test_gold_paths_match_through_a_wrapper_folder(tmp_path):
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room / "archive")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    assert recall(rd, [(1, "bash", {"command": f"cat dataroom/archive/{GOLD}"}, (DATAROOM / GOLD).read_text())]).recall == 1.0
    ev = recall(rd, [(1, "grep", {"pattern": "x"}, f"dataroom/archive/{GOLD}:5:{ANSWER_LINE}")])
    assert ev.recall == 1.0


def test_a_linked_dataroom_is_not_followed(tmp_path):
    rd = make_run(tmp_path, "r1", dataroom=None)
    (rd / "work" / "dataroom").symlink_to(DATAROOM)
    ev = recall(rd, [(1, "bash", {"command": f"cat dataroom/{GOLD}"}, (DATAROOM / GOLD).read_text())])
    assert ev.recall is None and ev.unmeasured == [GOLD]


def test_torn_trace_lines_are_skipped(run):
    rd, ctx = run
    good = "".join(json.dumps(e) + "\n" for e in call(1, "read", {"path": f"dataroom/{GOLD}"}, builtins.read(ctx, f"dataroom/{GOLD}"), "c1"))
    (rd / "trace.jsonl").write_text('{"type": "message", "turn": 1, "mess\n' + good + good[:40])
    assert evidence.of_run(rd, [GOLD], GOLDS).recall == 1.0


def test_a_path_the_file_spells_is_not_its_content(tmp_path):
    # Front matter that repeats the file's name (`slug:` lines) must not let an error echoing the path count.
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room)
    gold = "posts/quantization-aware-training-of-jina-embeddings-v4.md"
    (room / "posts").mkdir()
    (room / gold).write_text("slug: quantization-aware-training-of-jina-embeddings-v4\n"
                             "Quantization-aware training keeps 4-bit vectors within a point of full precision.\n")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    echoed = "error: no such file: quantization-aware-training-of-jina-embeddings-v4.json"
    kw = {"gold": [gold], "golds": ["4-bit"]}
    assert recall(rd, [(1, "read", {"path": "x.json"}, echoed)], **kw).content_recall == 0.0
    assert recall(rd, [(1, "bash", {"command": "ls"}, f"dataroom/{gold}\ndataroom/{OTHER}")], **kw).content_recall == 0.0
    body = "training keeps 4-bit vectors within a point of full precision"
    ev = recall(rd, [(1, "bash", {"command": f"cat -n dataroom/{gold}"}, f"     2\t{body}")], **kw)
    assert ev.recall == 1.0 and ev.content_recall == 1.0


def cards(tmp_path):
    """A small corpus shaped like the packaged one: two cards sharing a license line, a launch post."""
    room = tmp_path / "cards"
    room.mkdir()
    (room / "jina-reranker-v3.md").write_text(
        '---\nmodel_name: "jina-reranker-v3"\nmodel_type: "reranker"\nlicense: "CC-BY-NC-4.0"\nparameter_size: "597M"\n'
        'release_blog: "/news/reranker-v3-launch"\n---\n# jina-reranker-v3\n\njina-reranker-v3 is a listwise reranker.\n')
    (room / "jina-embeddings-v3.md").write_text(
        '---\nmodel_name: "jina-embeddings-v3"\nmodel_type: "embedding"\nlicense: "CC-BY-NC-4.0"\nparameter_size: "570M"\n---\n'
        "# jina-embeddings-v3\n\nA multilingual embedding model.\n")
    (room / "reranker-v3-launch.md").write_text(
        '---\ntitle: "Meet jina-reranker-v3"\nslug: reranker-v3-launch\npublished_at: 2025-10-01T09:00:00.000+02:00\n---\n'
        "# Meet jina-reranker-v3\n\nToday, October 1, 2025, we release jina-reranker-v3, a listwise reranker.\n")
    return room


def test_a_results_file_the_agent_made_with_bash_is_never_delivered(run):
    """Issue 29: the agent wrote results/1-grep.txt and opened it with read; it was credited as if the harness delivered it."""
    rd, ctx = run
    grep = builtins.grep(ctx, "38.4 metres", "dataroom")
    (rd / "work" / "results").mkdir()
    (rd / "work" / "results" / "1-grep.txt").write_text(_text(grep))
    opened = builtins.read(ctx, "results/1-grep.txt")
    pointer = 'Result written to results/1-grep.txt (120 characters, 1 lines). Open it with read(path="results/1-grep.txt").'
    refused = "Error: could not deliver the result to results/1-grep.txt: exists"
    made = [*call(1, "bash", {"command": "mkdir -p results && printf '%s' \"$T\" > results/1-grep.txt"}, "", "c0"),
            *call(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, refused, "c1"),  # the harness could not deliver
            *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    assert graded(rd, made).recall == 0.0
    over = [*call(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, pointer, "c1"),
            *call(1, "bash", {"command": "cp notes.txt results/1-grep.txt"}, "", "c0"),  # written over after a real delivery
            *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    assert graded(rd, over).recall == 0.0
    echoed = [*call(1, "bash", {"command": "echo 'Result written to results/1-grep.txt (1 characters)'"},
                    "Result written to results/1-grep.txt (1 characters)", "c0"),  # bash cannot announce a delivery
              *call(1, "grep", {"pattern": "x", "path": "dataroom"}, "no matches", "c1"),
              *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    assert graded(rd, echoed).recall == 0.0
    real = [*call(1, "grep", {"pattern": "38.4 metres", "path": "dataroom"}, pointer, "c1"),
            *call(1, "read", {"path": "results/1-grep.txt"}, opened, "c2")]
    assert graded(rd, real).recall == 1.0
