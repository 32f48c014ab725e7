"""Issue 29.2, graded end to end: each command runs through the bash tool in real bwrap under real strace, its tool row
keeps the files it opened, and evidence credits its output to a gold file only when the call read that file; a call that
read it also shows it line-wrapped (`fold -w 40`) or case-changed (`tr a-z A-Z`)."""

from __future__ import annotations

import base64
import json
import shlex

import pytest

from searchbox.config import HarnessConfig
from searchbox.grading import evidence
from searchbox.record.record import TOOL_SCHEMA, ToolRow, write_table
from searchbox.tools import ToolContext, Toolset, opens, sandbox, select
from tests.fakes.runs import make_run

GOLD = "staff/curator.md"
LINE = "Curator: Dana Whitfield, head of the maritime collection at Port Ellis since 1998."
DOC = f"# Museum staff\n\n{LINE}\n\nThe building's roof was repaired in 2004.\n"
GOLDS = ["Dana Whitfield"]
B64 = base64.b64encode(LINE.encode()).decode()
QUESTION = "Who heads the maritime collection?"

CASES = {  # command -> the gold's passage reached the agent (the fooling cases, and the copies that count)
    f"cd dataroom && echo {B64} | base64 -d": False,
    f"echo \"{LINE[:40]}\"\"{LINE[40:]}\"; ls dataroom": False,
    f"python3 -c 'import os, base64; print(os.listdir(\"dataroom\")); print(base64.b64decode(\"{B64}\").decode())'": False,
    f"echo {B64} | base64 -d | tr a-z A-Z; cat dataroom/other.md": False,  # it read a file, not the gold one
    f"cat dataroom/{GOLD}": True,
    f"fold -w 40 dataroom/{GOLD}": True,
    f"tr a-z A-Z < dataroom/{GOLD}": True,
    f"python3 -c 'print(open(\"dataroom/{GOLD}\").read().upper())'": True,
    f"grep -rn Whitfield dataroom": True,
}

needs_box = pytest.mark.skipif(not (sandbox.bwrap_works() and not opens.unavailable()),
                               reason="needs bubblewrap and a strace that can trace")


def _run(tmp_path):
    room = tmp_path / "room"
    (room / "staff").mkdir(parents=True)
    (room / GOLD).write_text(DOC, encoding="utf-8")
    (room / "other.md").write_text("A page about gulls and the lighthouse lamp, nothing about curators.\n", encoding="utf-8")
    return make_run(tmp_path / "sweep", "r1", dataroom=room)


def _bash(rd, commands: list[str], mode: str = "bwrap"):
    """The native loop's record of bash calls (agent._call_tool): the trace's call and tool messages, and the tool rows."""
    toolset = Toolset(select("none"), ToolContext(work=rd / "work", sandbox_mode=mode,
                                                  harness=HarnessConfig(bash_timeout_s=20, output_cap_chars=8000, work_quota_mb=0)))
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": QUESTION}}]
    rows = []
    for step, command in enumerate(commands):
        out = toolset.call("bash", {"command": command})
        call_id = f"call_{step}"
        events.append({"type": "message", "turn": 1, "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": out.arguments}}]}})
        events.append({"type": "message", "turn": 1, "message": {"role": "tool", "tool_call_id": call_id, "name": "bash", "content": out.output}})
        rows.append(ToolRow(1, step, call_id, out.tool, out.arguments, out.programs, out.paths, out.duration_ms, out.setup_ms, out.ok,
                            out.error, out.output_chars, out.delivered, out.malformed, out.opened))
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    write_table(rows, TOOL_SCHEMA, rd / "tool_calls.parquet", "r1")
    return evidence.of_run(rd, [GOLD], GOLDS)


@needs_box
@pytest.mark.parametrize("command", CASES)
def test_bash_output_counts_only_when_the_call_read_the_gold_file(tmp_path, command):
    ev = _bash(_run(tmp_path), [command])
    assert ev.measured == [GOLD] and ev.grades()["evidence_opens"] == "observed"
    assert (ev.recall == 1.0) is CASES[command], command
    assert (ev.tools == ["bash"]) is CASES[command]


@needs_box
def test_the_fooling_commands_print_the_gold_line(tmp_path):
    """The cases are fair: each fooling command does print the gold's line (or its upper-cased copy), and by text alone
    (no observed opens: the rule before) the first three were credited."""
    rd = _run(tmp_path)
    fooling = [c for c, ok in CASES.items() if not ok]
    toolset = Toolset(select("none"), ToolContext(work=rd / "work", harness=HarnessConfig(bash_timeout_s=20), sandbox_mode="bwrap"))
    for command in fooling:
        assert evidence.squashed(LINE) in evidence.squashed(toolset.call("bash", {"command": command}).output), command
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": QUESTION}}]
    for n, command in enumerate(fooling[:3]):
        text = toolset.call("bash", {"command": command}).output
        events.append({"type": "message", "turn": 1, "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}})
        events.append({"type": "message", "turn": 1, "message": {"role": "tool", "tool_call_id": f"c{n}", "name": "bash", "content": text}})
        (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:1] + events[-2:]), encoding="utf-8")
        ev = evidence.measure(rd / "work" / "dataroom", rd / "trace.jsonl", [GOLD], GOLDS)
        assert ev.recall == 1.0 and ev.grades()["evidence_opens"] == "not observed", command


@needs_box
def test_a_wrapped_or_upper_cased_copy_needs_the_read(tmp_path):
    """Squashed comparison is for the call that read the gold file only: the same fold typed by the agent, or an
    upper-cased copy of another file's read, stays the agent's own."""
    rd = _run(tmp_path)
    folded = "\n".join(LINE[i : i + 40] for i in range(0, len(LINE), 40)).upper()
    typed = f"printf %s {shlex.quote(base64.b64encode(folded.encode()).decode())} | base64 -d; cat dataroom/other.md"
    assert _bash(rd, [typed]).recall == 0.0
    assert _bash(rd, [f"fold -w 40 dataroom/{GOLD} | tr a-z A-Z"]).recall == 1.0


@needs_box
def test_the_squashed_window_must_be_distinct_among_the_files_read(tmp_path):
    rd = _run(tmp_path)
    (rd / "work" / "dataroom" / "copy.md").write_text(f"Copied from the staff page:\n{LINE}\n", encoding="utf-8")
    assert _bash(rd, [f"cat dataroom/copy.md dataroom/{GOLD} | tr a-z A-Z"]).recall == 0.0  # which file it showed is unknown
    assert _bash(rd, [f"tr a-z A-Z < dataroom/{GOLD}"]).recall == 1.0  # copy.md holds it too, but this call did not read it


def test_without_observed_opens_bash_is_judged_by_its_text(tmp_path):
    rd = _run(tmp_path)
    ev = _bash(rd, [f"cat dataroom/{GOLD}", f"tr a-z A-Z < dataroom/{GOLD}"], mode="none")
    assert ev.recall == 1.0 and ev.grades()["evidence_opens"] == "not observed"
    assert _bash(rd, [f"tr a-z A-Z < dataroom/{GOLD}"], mode="none").recall == 0.0  # no squashed copies without the read


def test_opens_of_an_older_run_are_not_observed(tmp_path):
    rd = _run(tmp_path)
    write_table([{"run_id": "r1", "turn": 1, "step": 0, "call_id": "c", "tool": "bash", "arguments": "{}", "programs": [], "paths": [],
                  "duration_ms": 0.0, "setup_ms": 0.0, "ok": True, "error": "", "output_chars": 0, "delivered": "", "malformed": False}],
                TOOL_SCHEMA.remove(TOOL_SCHEMA.get_field_index("opened")), rd / "tool_calls.parquet")
    assert evidence.observed_opens(rd) == [("c", None)]
    (rd / "tool_calls.parquet").write_text("not parquet")
    assert evidence.observed_opens(rd) == []


def test_a_delivered_result_read_by_bash_is_judged_by_its_text(tmp_path):
    """An observed call that opened a result the harness delivered (and nothing touched) may show any file's text."""
    rd = _run(tmp_path)
    (rd / "work" / "results").mkdir()
    (rd / "work" / "results" / "1-grep.txt").write_text(f"dataroom/{GOLD}:3:{LINE}\n")
    events = [{"type": "message", "turn": 1, "message": {"role": "user", "content": QUESTION}}]
    for call_id, tool, args, text in (("a", "grep", {"pattern": "Whitfield"}, "Result written to results/1-grep.txt (90 characters, 1 lines)."),
                                      ("b", "bash", {"command": "cat results/1-grep.txt"}, f"dataroom/{GOLD}:3:{LINE}\n")):
        events.append({"type": "message", "turn": 1, "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}})
        events.append({"type": "message", "turn": 1, "message": {"role": "tool", "tool_call_id": call_id, "name": tool, "content": text}})
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    trace = rd / "trace.jsonl"
    assert evidence.measure(rd / "work" / "dataroom", trace, [GOLD], GOLDS, opened=[("b", ["results/1-grep.txt"])]).recall == 1.0
    assert evidence.measure(rd / "work" / "dataroom", trace, [GOLD], GOLDS, opened=[("b", ["notes.md"])]).recall == 0.0
