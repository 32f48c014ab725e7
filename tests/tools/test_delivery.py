"""delivery=file: tool output goes to work/results/<n>-<tool>.txt, the model reads a pointer, and the tokens show it."""

from __future__ import annotations

from tests.conftest import make_cfg, run_script, tables

GREP = {"tool_calls": [{"name": "grep", "arguments": {"pattern": "the", "path": "dataroom", "ignore_case": True}}]}
WRITE = {"tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": "38.4 metres"}}]}
READ_RESULT = {"tool_calls": [{"name": "read", "arguments": {"path": "results/1-grep.txt"}}]}


def _tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_file_delivery_writes_the_output_and_sends_a_pointer(tmp_path):
    meta, srv, run_dir = run_script(tmp_path, [GREP, READ_RESULT, WRITE, {"content": "done"}], make_cfg(delivery="file"))
    delivered = run_dir / "work" / "results" / "1-grep.txt"
    text = delivered.read_text()
    assert "dataroom/reports/gannet-rock-survey.md:" in text  # the whole grep output, in the file
    pointer = _tool_messages(srv.requests[1])[-1]
    assert pointer.startswith("Result written to results/1-grep.txt") and f"{len(text)} characters" in pointer
    assert "gannet-rock-survey.md:" not in pointer  # the next request carries the pointer, not the text
    opened = _tool_messages(srv.requests[2])[-1]
    assert "gannet-rock-survey.md:" in opened  # read stays inline: it is how the agent opens a delivered result
    assert "Result written" not in _tool_messages(srv.requests[3])[-1]  # write reports inline too
    assert (run_dir / "work" / "ANSWER.md").read_text() == "38.4 metres"
    assert meta["delivery"] == "file"


def test_token_accounting_shows_the_difference(tmp_path):
    inline, srv_i, dir_i = run_script(tmp_path, [GREP, WRITE, {"content": "done"}], make_cfg(delivery="inline"), name="inline")
    filed, srv_f, dir_f = run_script(tmp_path, [GREP, READ_RESULT, WRITE, {"content": "done"}], make_cfg(delivery="file"), name="file")
    # the request right after the search call: inline pays for the output, file only for the pointer
    after_search_i = srv_i.responses[1]["usage"]["prompt_tokens"]
    after_search_f = srv_f.responses[1]["usage"]["prompt_tokens"]
    assert after_search_f < after_search_i
    assert after_search_i - after_search_f > 100  # the grep output is hundreds of tokens
    _, calls_i = tables(dir_i)
    _, calls_f = tables(dir_f)
    assert (calls_f["tool"] == "read").sum() == (calls_i["tool"] == "read").sum() + 1  # ... and one more read
    turns_i, _ = tables(dir_i)
    turns_f, _ = tables(dir_f)
    assert turns_i["prompt_tokens"].sum() == inline["tokens"]["prompt"] == sum(r["usage"]["prompt_tokens"] for r in srv_i.responses)
    assert turns_f["prompt_tokens"].sum() == filed["tokens"]["prompt"] == sum(r["usage"]["prompt_tokens"] for r in srv_f.responses)
