"""Evidence recall, attacked by a reviewer (issue 19): holes found in searchbox/evidence.py.

Each says what a careful reader expects; they were strict xfails until evidence.py closed the holes.
"""

from __future__ import annotations

import base64
import json

import pytest

from searchbox.grading import evidence
from searchbox.config import HarnessConfig
from searchbox.tools import builtins
from searchbox.tools.context import ToolContext
from tests.fakes.runs import make_run

POST = "how-we-rerank.md"
BOOKMARK = ('<div class="kg-bookmark-metadata"><span class="kg-bookmark-author">Jina AI</span>'
            '<span class="kg-bookmark-publisher">Han Xiao</span></div>')


def _text(out):
    return out if isinstance(out, str) else out.text


def room(tmp_path):
    """A post by Han Xiao whose body links another page Han Xiao published (jq053's shape), and a card whose name
    spells its parameter count (jq301's shape)."""
    r = tmp_path / "room"
    r.mkdir()
    (r / POST).write_text('---\ntitle: "How we rerank"\nslug: how-we-rerank\nauthors: "Han Xiao"\n'
                          'published_at: 2024-05-10T10:00:00.000+02:00\n---\n# How we rerank\n\n'
                          f"We build on earlier work on submodular selection.\n\n{BOOKMARK}\n\nThe rest of the post.\n")
    (r / "jx-two-1.5b.md").write_text('---\nmodel_name: "jx-two-1.5b"\nlicense: "CC-BY-NC-4.0"\nparameter_size: "1.5B"\n---\n'
                                      "# jx-two-1.5b\n\nThe new model.\n")
    (r / "other.md").write_text("# Other\n\nNothing to see here.\n")
    return r


def graded(rd, question, outputs, gold_files, golds):
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": question}}]
    for n, (tool, args, text) in enumerate(outputs):
        cid = f"c{n}"
        events.append({"type": "message", "turn": n + 1, "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}})
        events.append({"type": "message", "turn": n + 1, "message": {"role": "tool", "tool_call_id": cid, "name": tool,
                                                                     "content": _text(text)}})
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return evidence.of_run(rd, gold_files, golds)


@pytest.fixture
def run(tmp_path):
    r = room(tmp_path)
    rd = make_run(tmp_path / "s", "r1", dataroom=r)
    return rd, ToolContext(work=rd / "work", harness=HarnessConfig(), sandbox_mode="none")


def test_a_bookmark_card_naming_another_pages_publisher_is_not_evidence_of_the_author(run):
    rd, ctx = run
    shown = builtins.grep(ctx, "kg-bookmark-publisher", "dataroom")
    assert "Han Xiao" in _text(shown) and "authors:" not in _text(shown)
    ev = graded(rd, 'Who is the author of the article "How we rerank"?', [("grep", {"pattern": "kg-bookmark-publisher",
                                                                                  "path": "dataroom"}, shown)], [POST], ["Han Xiao"])
    assert ev.recall == 0.0  # the authors: line never reached the agent, only a card about another page


def test_a_name_that_spells_the_answer_is_not_evidence(run):
    rd, ctx = run
    shown = builtins.grep(ctx, "model_name", "dataroom")
    assert "jx-two-1.5b" in _text(shown) and "parameter_size" not in _text(shown)
    ev = graded(rd, "What is the parameter count of the model whose card is jx-two-1.5b.md?", [("grep", {"pattern": "model_name",
                                                                                                       "path": "dataroom"}, shown)],
                ["jx-two-1.5b.md"], ["1.5B"])
    assert ev.recall == 0.0


def test_text_the_agent_typed_and_a_command_decoded_is_not_evidence(run):
    rd, _ = run
    line = 'parameter_size: "1.5B"'
    blob = base64.b64encode(f'---\nmodel_name: "jx-two-1.5b"\nlicense: "CC-BY-NC-4.0"\n{line}\n'.encode()).decode()
    ev = graded(rd, "What is the parameter count of jx-two-1.5b?", [("bash", {"command": f"echo {blob} | base64 -d"},
                                                                   f'---\nmodel_name: "jx-two-1.5b"\nlicense: "CC-BY-NC-4.0"\n{line}\n')],
                ["jx-two-1.5b.md"], ["1.5B"])
    assert ev.recall == 0.0


def test_a_gold_file_removed_during_the_run_is_missed_not_unmeasured(run):
    rd, _ = run
    (rd / "work" / "dataroom" / "jx-two-1.5b.md").unlink()  # what `rm dataroom/jx-two-1.5b.md` leaves without a sandbox
    ev = graded(rd, "What is the parameter count of jx-two-1.5b?", [("bash", {"command": "ls dataroom"}, "how-we-rerank.md\nother.md")],
                ["jx-two-1.5b.md"], ["1.5B"])
    assert ev.recall == 0.0


def test_the_straight_cases_still_hold(run):
    """Not a hole: the authors line read counts; a grep that shows no occurrence does not."""
    rd, ctx = run
    whole = builtins.read(ctx, f"dataroom/{POST}")
    assert graded(rd, 'Who wrote "How we rerank"?', [("read", {"path": f"dataroom/{POST}"}, whole)], [POST], ["Han Xiao"]).recall == 1.0
    other = builtins.grep(ctx, "Nothing", "dataroom")
    assert graded(rd, 'Who wrote "How we rerank"?', [("grep", {"pattern": "Nothing", "path": "dataroom"}, other)], [POST],
                  ["Han Xiao"]).recall == 0.0
