"""Evidence by passage: where a question names its answer-bearing passages (`evidence` spans), evidence_recall is those
passages reaching the agent, and `evidence_rule` says "passage"; where it names none, the occurrence rule measures it and
`evidence_rule` says "occurrence". A hard-wrapped gold ("Dana\\nWhitfield") is measured, not unmeasured."""

from __future__ import annotations

import json

from searchbox.grading import evidence
from tests.fakes.runs import make_run

GOLD = "people/curator.md"
HEADING = "Curators 1998-2004: Ana Ruiz, Dana Whitfield, Tom Berg, and the volunteer board of the museum"
PASSAGE = "In 2001 the board named Dana Whitfield head curator of the maritime collection at Port Ellis."
DOC = f"# Museum staff\n\n{HEADING}\n\nSome unrelated history of the building and its roof repairs.\n\n{PASSAGE}\n"
WRAPPED = "The keeper's log was kept from 1890 by Dana\nWhitfield, who handed it on in 1921 to the harbour board.\n"
GOLDS = ["Dana Whitfield"]


def _run(tmp_path, files: dict[str, str]):
    room = tmp_path / "room"
    for rel, text in files.items():
        (room / rel).parent.mkdir(parents=True, exist_ok=True)
        (room / rel).write_text(text, encoding="utf-8")
    (room / "other.md").write_text("A page about gulls and the lighthouse lamp, nothing about curators.\n", encoding="utf-8")
    return make_run(tmp_path / "sweep", "r1", dataroom=room)


def _graded(rd, outputs, spans=None, gold=(GOLD,)):
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": "Who was named head curator in 2001?"}}]
    for n, (tool, args, text) in enumerate(outputs):
        events.append({"type": "message", "turn": n + 1, "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}})
        events.append({"type": "message", "turn": n + 1, "message": {"role": "tool", "tool_call_id": f"c{n}", "name": tool, "content": text}})
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return evidence.of_run(rd, list(gold), GOLDS, spans=spans)


def test_with_spans_an_unrelated_line_holding_the_gold_is_no_evidence(tmp_path):
    rd = _run(tmp_path, {GOLD: DOC})
    spans = [{"file": GOLD, "text": PASSAGE}]
    heading = _graded(rd, [("grep", {"pattern": "Whitfield"}, f"dataroom/{GOLD}:3:{HEADING}")], spans)
    assert heading.recall == 0.0 and heading.grades()["evidence_rule"] == "passage"
    # the occurrence rule (no spans) credits that same heading line: the reason passages win where a question has them
    assert _graded(rd, [("grep", {"pattern": "Whitfield"}, f"dataroom/{GOLD}:3:{HEADING}")]).grades()["evidence_rule"] == "occurrence"
    shown = _graded(rd, [("grep", {"pattern": "curator"}, f"dataroom/{GOLD}:7:{PASSAGE}")], spans)
    assert shown.recall == 1.0 and shown.tools == ["grep"]


def test_a_span_of_another_file_or_not_in_its_file_leaves_the_occurrence_rule(tmp_path):
    rd = _run(tmp_path, {GOLD: DOC})
    ev = _graded(rd, [("grep", {"pattern": "Whitfield"}, f"dataroom/{GOLD}:3:{HEADING}")],
                 [{"file": GOLD, "text": "A passage the file does not hold at all, whatever the builder said."}])
    assert ev.grades()["evidence_rule"] == "occurrence" and ev.recall == 1.0


def test_a_hard_wrapped_gold_is_measured_and_its_read_counts(tmp_path):
    rd = _run(tmp_path, {GOLD: WRAPPED})
    none = _graded(rd, [("bash", {"command": "ls dataroom"}, "other.md\npeople\n")])
    assert none.measured == [GOLD] and none.recall == 0.0
    shown = _graded(rd, [("read", {"path": f"dataroom/{GOLD}"}, "1\tThe keeper's log was kept from 1890 by Dana\n2\tWhitfield, who handed it on in 1921 to the harbour board.\n")])
    assert shown.recall == 1.0


def test_a_wrapped_passage_the_agent_typed_itself_is_no_evidence(tmp_path):
    rd = _run(tmp_path, {GOLD: WRAPPED})
    typed = "The keeper's log was kept from 1890 by Dana\nWhitfield, who handed it on in 1921 to the harbour board."
    ev = _graded(rd, [("bash", {"command": f"cd dataroom && printf '%s' \"{typed}\""}, typed)])
    assert ev.measured == [GOLD] and ev.recall == 0.0


def test_spans_are_validated_in_one_line():
    import pytest
    from searchbox.grading.qfile import fields

    base = {"id": "q1", "question": "Who?", "answer": "Dana Whitfield"}
    assert fields({**base, "evidence": [{"file": GOLD, "text": PASSAGE}]})["evidence"] == [{"file": GOLD, "text": PASSAGE}]
    for bad in ("x", [{"file": GOLD}], [{"file": "", "text": PASSAGE}], [{"file": GOLD, "text": "  "}], [{"file": GOLD, "text": 3}]):
        with pytest.raises(ValueError, match="'evidence'"):
            fields({**base, "evidence": bad})


def test_the_evidence_version_is_nine():  # 8: bash by observed opens (test_evidence_opens.py); 9: the agent's own files (test_evidence_own_files.py)
    assert evidence.EVIDENCE_VERSION == "evidence-9"
