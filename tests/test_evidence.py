"""Evidence recall from what tool outputs actually delivered: one definition for read, grep, search, bash and the rest."""

from __future__ import annotations

import json
import shutil

import pytest

from searchbox import evidence
from searchbox.config import HarnessConfig
from searchbox.dataroom import chunk_text
from searchbox.tools import builtins
from searchbox.tools.context import ToolContext
from tests.fakes.runs import DATAROOM, make_run

GOLD = "reports/gannet-rock-survey.md"
OTHER = "reports/annual-report-2023.md"


@pytest.fixture
def run(tmp_path):
    """A run dir with the built-in dataroom and a tool context over it (the real tools make the outputs)."""
    rd = make_run(tmp_path, "r1")
    ctx = ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")
    return rd, ctx


def recall(rd, outputs, gold=(GOLD,)):
    (rd / "trace.jsonl").write_text("".join(json.dumps(evidence_event(*o)) + "\n" for o in outputs))
    return evidence.of_run(rd, list(gold))


def evidence_event(turn, tool, text):
    return {"type": "message", "turn": turn, "message": {"role": "tool", "name": tool, "content": text}}


def search_result(picks):
    """A search_dataroom output as the tool serialises it: chunks of the given (path, chunk index)."""
    results = []
    for path, i in picks:
        text = (DATAROOM / path).read_text()
        results.append({"path": f"dataroom/{path}", "chunk": i, "score": 0.5, "text": chunk_text(text, 150, 20)[i][1]})
    return json.dumps({"results": results, "scope_files": 7, "scope_chunks": 40}, ensure_ascii=False)


def test_read_output_counts(run):
    rd, ctx = run
    out = builtins.read(ctx, f"dataroom/{GOLD}")
    assert out.lstrip().startswith("1\t")  # the shape this test is about: numbered lines
    ev = recall(rd, [(2, "read", out)])
    assert ev.recall == 1.0 and ev.first_turn == 2 and ev.tools == ["read"]


def test_read_of_another_file_does_not(run):
    rd, ctx = run
    assert recall(rd, [(1, "read", builtins.read(ctx, f"dataroom/{OTHER}"))]).recall == 0.0


def test_partial_read_of_short_lines_counts(run):
    rd, ctx = run
    out = builtins.read(ctx, "dataroom/reports/lighthouses.csv", offset=3, limit=1)  # one csv row
    assert "Gannet Rock,1884" in out
    assert recall(rd, [(1, "read", out)], gold=["reports/lighthouses.csv"]).recall == 1.0


def test_grep_over_the_tree_and_over_one_file(run):
    rd, ctx = run
    tree = builtins.grep(ctx, "38.4 metres", "dataroom")
    assert tree.startswith(f"dataroom/{GOLD}:")
    assert recall(rd, [(1, "grep", tree)]).recall == 1.0
    single = builtins.grep(ctx, "granite", f"dataroom/{GOLD}")
    assert "granite courses are sound" in single
    assert recall(rd, [(1, "grep", single)]).recall == 1.0
    line = next(ln for ln in (DATAROOM / GOLD).read_text().splitlines() if "granite" in ln)
    assert recall(rd, [(1, "bash", f"6:{line}")]).recall == 1.0  # `rg PATTERN FILE` in bash: `line:text`, no path


def test_grep_that_matched_only_other_files_does_not(run):
    rd, ctx = run
    out = builtins.grep(ctx, "Skerrow", "dataroom")
    assert GOLD not in out and "Skerrow" in out
    assert recall(rd, [(1, "grep", out)]).recall == 0.0


def test_search_credits_only_the_gold_chunk(run):
    rd, _ = run
    only_others = search_result([(OTHER, 0), ("people/staff.md", 1), ("products/guidebook.md", 0)])
    assert recall(rd, [(1, "search_dataroom", only_others)]).recall == 0.0
    with_gold = search_result([(OTHER, 0), (GOLD, 2), ("people/staff.md", 1)])  # k=3, one gold chunk mid-file
    ev = recall(rd, [(1, "search_dataroom", only_others), (3, "search_dataroom", with_gold)])
    assert ev.recall == 1.0 and ev.first_turn == 3


def test_search_output_cut_by_the_cap_still_reads(run):
    rd, _ = run
    text = search_result([(GOLD, 1), (OTHER, 0)])
    cut = text[: text.index('"path": "dataroom/reports/annual')]  # not valid JSON any more
    with pytest.raises(ValueError):
        json.loads(cut)
    assert recall(rd, [(1, "search_dataroom", cut + "\n[output truncated: 9999 characters in all]")]).recall == 1.0


def test_bash_cat_and_sed_output(run):
    rd, _ = run
    text = (DATAROOM / GOLD).read_text()
    assert recall(rd, [(1, "bash", text)]).recall == 1.0
    sed = "\n".join(text.splitlines()[4:6])  # sed -n '5,6p'
    assert recall(rd, [(1, "bash", sed)]).recall == 1.0
    nl = "\n".join(f"{i:6d}\t{ln}" for i, ln in enumerate(text.splitlines()[4:6], 5))  # cat -n / nl
    assert recall(rd, [(1, "bash", nl)]).recall == 1.0


def test_names_and_arguments_are_not_content(run):
    rd, ctx = run
    listing = builtins.find(ctx, "*.md", "dataroom")
    grep_l = f"dataroom/{GOLD}\ndataroom/{OTHER}"
    failed = f"cat: dataroom/{GOLD}: Permission denied\n[exit code 1]"
    assert recall(rd, [(1, "find", listing), (1, "bash", grep_l), (1, "bash", failed)]).recall == 0.0


def test_short_fragments_are_not_specific(run):
    rd, _ = run
    # Under MIN_CHARS a string does not name a file, even when only the gold file holds it.
    assert recall(rd, [(1, "bash", "stands 38.4 metres\ngranite courses")]).recall == 0.0
    assert recall(rd, [(1, "bash", "Halden & Mure Engineering. Date of inspection: 14 June")]).recall == 1.0


def test_text_shared_with_another_file_is_not_distinctive(tmp_path):
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room)
    shared = "The foghorn compressor is beyond repair and was decommissioned."
    (room / "products" / "copy.md").write_text(f"Quoted from the survey:\n{shared}\n")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    ev = recall(rd, [(1, "read", f"     1\tQuoted from the survey:\n     2\t{shared}")])
    assert ev.recall == 0.0  # it came from copy.md: nothing only the gold file holds
    assert evidence.distinctive_spans(rd / "work" / "dataroom", [GOLD])[GOLD]  # while the gold file keeps other spans


def test_two_gold_files_and_missing_ones(run):
    rd, ctx = run
    ev = recall(rd, [(1, "read", builtins.read(ctx, f"dataroom/{GOLD}"))], gold=[GOLD, OTHER, "nope.md"])
    assert ev.recall == 0.5 and ev.unmeasured == ["nope.md"]
    assert ev.grades()["evidence_gold_files"] == 2 and ev.grades()["evidence_received"] == 1
    assert recall(rd, [], gold=["nope.md"]).recall is None  # nothing measurable: missing, never 0
    assert recall(rd, [], gold=[]).recall is None


def test_gold_paths_match_through_a_wrapper_folder(tmp_path):
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room / "archive")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    text = (DATAROOM / GOLD).read_text()
    assert recall(rd, [(1, "bash", text)], gold=[GOLD]).recall == 1.0


def test_a_linked_dataroom_is_not_followed(tmp_path):
    rd = make_run(tmp_path, "r1", dataroom=None)
    (rd / "work" / "dataroom").symlink_to(DATAROOM)
    ev = recall(rd, [(1, "bash", (DATAROOM / GOLD).read_text())])
    assert ev.recall is None and ev.unmeasured == [GOLD]


def test_torn_trace_lines_are_skipped(run):
    rd, ctx = run
    good = json.dumps(evidence_event(1, "read", builtins.read(ctx, f"dataroom/{GOLD}")))
    (rd / "trace.jsonl").write_text('{"type": "message", "turn": 1, "mess\n' + good + "\n" + good[:40])
    assert evidence.of_run(rd, [GOLD]).recall == 1.0


def test_a_file_that_spells_its_own_path_is_not_credited_by_the_path(tmp_path):
    # Front matter that repeats the file's name (`slug:` lines) must not let an error echoing the path count.
    room = tmp_path / "room"
    shutil.copytree(DATAROOM, room)
    gold = "posts/quantization-aware-training-of-jina-embeddings-v4.md"
    (room / "posts").mkdir()
    (room / gold).write_text("slug: quantization-aware-training-of-jina-embeddings-v4\n"
                             "Quantization-aware training keeps 4-bit vectors within a point of full precision.\n")
    rd = make_run(tmp_path / "s", "r1", dataroom=room)
    echoed = "error: no such file: quantization-aware-training-of-jina-embeddings-v4.json"
    assert recall(rd, [(1, "read", echoed)], gold=[gold]).recall == 0.0
    listing = f"dataroom/{gold}\ndataroom/{OTHER}"
    assert recall(rd, [(1, "bash", listing)], gold=[gold]).recall == 0.0
    body = "keeps 4-bit vectors within a point of full precision"  # the content still counts
    assert recall(rd, [(1, "read", f"     2\t{body}")], gold=[gold]).recall == 1.0


def _call_and_output(turn, tool, args, text, call_id):
    call = {"type": "message", "turn": turn, "message": {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}}
    out = {"type": "message", "turn": turn, "message": {"role": "tool", "tool_call_id": call_id, "name": tool, "content": text}}
    return [call, out]


def test_an_output_echoing_the_calls_own_arguments_or_the_question_is_not_evidence(run):
    rd, ctx = run
    line = "Halden & Mure Engineering. Date of inspection: 14 June"  # a distinctive line of the gold file
    assert recall(rd, [(1, "bash", line)]).recall == 1.0
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": "Who inspected Gannet Rock?"}},
              *_call_and_output(1, "read", {"path": line}, f"Error: {line}: no such file", "c1")]
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert evidence.of_run(rd, [GOLD]).recall == 0.0  # the model typed it; the tool only echoed it
    asked = [{"type": "message", "turn": 1, "message": {"role": "user", "content": f"Who wrote '{line}'?"}},
             *_call_and_output(1, "bash", {"command": "echo hi"}, line, "c2")]
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in asked))
    assert evidence.of_run(rd, [GOLD]).recall == 0.0  # the question already held it
    found = [*_call_and_output(1, "grep", {"pattern": "Date of inspection", "path": "dataroom"},
                               f"dataroom/{GOLD}:5:{line}", "c3")]
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in found))
    assert evidence.of_run(rd, [GOLD]).recall == 1.0  # a match shows more of the line than the pattern typed
