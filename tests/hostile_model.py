"""Hostile battery, round two (model): attempts registered into tests.hostile_attempts.ATTEMPTS (imported at its end).

A scripted model sends what a broken or adversarial model could: output a tool cannot take, replies the loop cannot
take apart, nonsense usage, a reply too large to hold. Each run goes through run.execute in a forked child: it must
end as a result (never model_error/tool_error, never a traceback or a hang), with run_meta, trace and both tables
written and readable.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile_attempts import GUARD_S, _cfg, attempt, held, run_child  # noqa: F401

QUESTION = "How tall is Gannet Rock?"
DONE = {"content": "done"}
WIDE = {"n_ctx": 400_000}  # a huge call stays in the conversation: these attempts are about the call, not the window


def _call(name: str, arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _model_run(tmp: Path, script: list, server_kw: dict | None = None, protocol: str = "native", **harness) -> tuple[dict, Path]:
    """The script through a real run in a child; the run must be a result with every artifact readable."""
    import pyarrow.parquet as pq

    from searchbox.harness.agent import INFRA_STOPS
    from tests.fakes.scripted_server import ScriptedServer

    run_dir = tmp / "run"

    def go() -> None:
        from searchbox.run.runner import execute

        cfg = _cfg(**harness)
        cfg.model.protocol = protocol
        execute(cfg, QUESTION, None, run_dir, srv.url)

    with ScriptedServer(script, **(server_kw or {})) as srv:
        run_child(go, GUARD_S)
    held((run_dir / "run_meta.json").exists(), "no run_meta.json")
    meta = json.loads((run_dir / "run_meta.json").read_text(encoding="utf-8"))
    held(meta.get("status") == "complete", f"run_meta left {meta.get('status')!r}")
    held(meta["stop_reason"] not in INFRA_STOPS, f"the run ended as {meta['stop_reason']}: {meta['stop_detail'][:300]}")
    for table in ("turns.parquet", "tool_calls.parquet"):
        held((run_dir / table).exists(), f"no {table}")
        pq.read_table(run_dir / table)
    for line in (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)
    return meta, run_dir


def _refused(tmp: Path, script: list, needle: str) -> str:
    """The call is answered as a malformed call the model reads, and the run goes on to a result."""
    import pyarrow.parquet as pq

    meta, run_dir = _model_run(tmp, script + [DONE], server_kw=WIDE)
    calls = pq.read_table(run_dir / "tool_calls.parquet").to_pylist()
    held(len(calls) == 1 and not calls[0]["ok"], f"the call ran: {calls}")
    held(calls[0]["malformed"] and meta["malformed_calls"] == 1, "the refusal was not counted as a malformed call")
    held(needle in calls[0]["error"], f"the model was told {calls[0]['error'][:200]!r}")
    return f"{meta['stop_reason']}; the model read: {calls[0]['error'][:90]}"


def _malformed_reply(tmp: Path, script: list, needle: str = "", **kw) -> str:
    """The reply is a malformed step the model is told about; no tool runs from it; the run goes on."""
    meta, run_dir = _model_run(tmp, script + [DONE], **kw)
    held(meta["malformed_replies"] >= 1, "the reply was not counted as malformed")
    events = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()]
    errors = [e["error"] for e in events if e["type"] == "malformed"]
    held(any(needle in e for e in errors), f"malformed events: {[e[:120] for e in errors]}")
    return f"{meta['stop_reason']}, {meta['malformed_replies']} malformed reply: {errors[0][:90]}"


# ---- arguments a tool cannot take ---------------------------------------------------------------
@attempt("model", "a NUL byte in a bash command", lead=True)
def nul_in_bash(tmp: Path) -> str:
    return _refused(tmp, [_call("bash", {"command": "echo a\x00b"})], "NUL")


@attempt("model", "a NUL byte in a grep pattern", lead=True)
def nul_in_grep(tmp: Path) -> str:
    return _refused(tmp, [_call("grep", {"pattern": "a\x00b", "path": "dataroom"})], "NUL")


@attempt("model", "a 200 KB bash command (Argument list too long for bwrap)", lead=True)
def huge_bash_command(tmp: Path) -> str:
    return _refused(tmp, [_call("bash", {"command": "echo " + "x" * 200_000})], "allowed")


@attempt("model", "a 140 KB glob (fnmatch never ends on unclosed brackets)", lead=True)
def huge_glob(tmp: Path) -> str:
    return _refused(tmp, [_call("grep", {"pattern": "a", "glob": "[a" * 70_000})], "allowed")


@attempt("model", "read with offset=2.0 (slicing raised TypeError)", lead=True)
def float_offset(tmp: Path) -> str:
    return _refused(tmp, [_call("read", {"path": "dataroom/README.md", "offset": 2.0})], "integer")


@attempt("model", "a bash timeout of NaN", lead=True)
def nan_timeout(tmp: Path) -> str:
    return _refused(tmp, [_call("bash", '{"command": "echo hi", "timeout": NaN}')], "NaN")


@attempt("model", "arguments nested 100,000 deep in the arguments string", lead=True)
def deep_arguments(tmp: Path) -> str:
    return _refused(tmp, [_call("bash", '{"command": ' + _deep(100_000) + "}")], "nested too deep")


@attempt("model", "a lone surrogate (half an emoji) in a write's content", lead=True)
def surrogate_argument(tmp: Path) -> str:
    return _refused(tmp, [_call("write", {"path": "notes.md", "content": "half \ud83d"})], "not valid Unicode")


@attempt("model", "a raw lone surrogate inside the arguments text (killed the parquet write)", lead=True)
def surrogate_in_arguments_text(tmp: Path) -> str:
    return _refused(tmp, [_call("bash", '{"command": "echo \ud83d"}')], "not valid Unicode")


# ---- replies the loop cannot take apart ------------------------------------------------------------
@attempt("model", "a lone surrogate in the reply's text (snapshot and ANSWER.md writes)", lead=True)
def surrogate_content(tmp: Path) -> str:
    meta, run_dir = _model_run(tmp, [{"content": "38.4 m \ud83d"}])
    answer = (run_dir / "work" / "ANSWER.md").read_text(encoding="utf-8")
    held(answer.strip() == "38.4 m \ufffd", f"ANSWER.md is {answer!r}")
    return f"{meta['stop_reason']}; the half emoji became U+FFFD in ANSWER.md and the snapshot"


@attempt("model", "arguments nested 100,000 deep inside the response body", lead=True)
def deep_body(tmp: Path) -> str:
    body = ('{"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", '
            '"type": "function", "function": {"name": "ls", "arguments": ' + _deep(100_000) + "}}]}}]}")
    return _malformed_reply(tmp, [{"body": body}], "nested too deep")


@attempt("model", "arguments nested 100,000 deep through the constrained-JSON protocol", lead=True)
def deep_json_protocol(tmp: Path) -> str:
    return _malformed_reply(tmp, [{"raw": '{"tool": "ls", "arguments": ' + _deep(100_000) + "}"}], "", protocol="json", server_kw=WIDE)


@attempt("model", "tool_calls as a string, as [\"ls\", 5], and with a string `function` (AttributeError)", lead=True)
def tool_call_shapes(tmp: Path) -> str:
    shapes = ["ls", ["ls", 5], [{"id": "c", "type": "function", "function": "ls"}]]
    script = [{"message": {"role": "assistant", "content": None, "tool_calls": s}} for s in shapes]
    meta, _ = _model_run(tmp, script + [DONE], max_repeat_calls=0)
    held(meta["malformed_replies"] == 3 and meta["tool_calls"] == 0, f"{meta['malformed_replies']} malformed, {meta['tool_calls']} calls")
    return f"{meta['stop_reason']}; 3 malformed replies, no call ran"


@attempt("model", "a numeric tool name (failed the parquet write)", lead=True)
def numeric_tool_name(tmp: Path) -> str:
    reply = {"message": {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": 12345, "arguments": "{}"}}]}}
    return _malformed_reply(tmp, [reply], "name")


@attempt("model", "content as OpenAI content parts (valid: must work), and as a number", lead=True)
def content_shapes(tmp: Path) -> str:
    parts = [{"type": "text", "text": "It is "}, {"type": "text", "text": "38.4 metres."}]
    meta, _ = _model_run(tmp, [{"message": {"role": "assistant", "content": parts}}])
    held(meta["answer"].strip() == "It is 38.4 metres.", f"the answer is {meta['answer'][:80]!r}")
    meta, _ = _model_run(tmp / "number", [{"message": {"role": "assistant", "content": 42}}, DONE])
    held(meta["malformed_replies"] == 1 and meta["answer"].strip() == "done", "a numeric content was not a malformed reply")
    return "content parts read as text; a number is a malformed reply"


@attempt("model", "a 50 MB reply (was held whole: 534 MB peak, 157 MB state.json)", lead=True)
def huge_reply(tmp: Path) -> str:
    meta, run_dir = _model_run(tmp, [{"content": "x" * (50 * 1024**2)}, DONE])
    sizes = {p.name: p.stat().st_size for p in (run_dir / "state.json", run_dir / "trace.jsonl")}
    held(all(size < 1024**2 for size in sizes.values()), f"artifacts grew: {sizes}")
    held(meta["malformed_replies"] == 1, "the over-size reply was not a malformed step")
    return f"refused at the size limit, read no further; state.json {sizes['state.json']} bytes"


# ---- usage: nonsense is estimated and marked ---------------------------------------------------------
@attempt("model", "llama.cpp timings with string values and no usage", lead=True)
def string_timings(tmp: Path) -> str:
    meta, _ = _model_run(tmp, [{"content": "38.4", "usage": None, "timings": {"prompt_n": "lots", "predicted_n": "some"}}])
    held(meta["tokens"]["estimated_calls"] == 1 and meta["tokens"]["total"] > 0, f"tokens {meta['tokens']}")
    return f"estimated and marked: {meta['tokens']['total']} tokens"


@attempt("model", "cached_tokens of 10**30 (failed the parquet write)", lead=True)
def huge_cached_tokens(tmp: Path) -> str:
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10**30}}
    meta, _ = _model_run(tmp, [{"content": "38.4", "usage": usage}])
    held(meta["tokens"]["estimated_calls"] == 1 and meta["tokens"]["cached"] <= meta["tokens"]["prompt"], f"tokens {meta['tokens']}")
    return "the count was not believed: estimated and marked"


@attempt("model", "usage prompt_tokens -500, completion_tokens \"many\" under a 2,000-token budget (ran 64 turns at 0 tokens)", lead=True)
def nonsense_usage(tmp: Path) -> str:
    step = {**_call("ls", {"path": "dataroom"}), "usage": {"prompt_tokens": -500, "completion_tokens": "many"}}
    meta, _ = _model_run(tmp, [step] * 300, budget=2000, budget_unit="tokens", max_turns=64)
    held(meta["stop_reason"] == "token_budget_spent" and meta["turns"] < 64, f"{meta['stop_reason']} after {meta['turns']} turns")
    held(meta["tokens"]["estimated_calls"] == meta["llm_calls"], "nonsense usage was not marked as estimated")
    return f"token_budget_spent after {meta['turns']} turns, every call estimated"


@attempt("model", "usage prompt_tokens 1e999 (OverflowError)", lead=True)
def infinite_usage(tmp: Path) -> str:
    body = ('{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "38.4"}}], '
            '"usage": {"prompt_tokens": 1e999, "completion_tokens": 3}}')
    meta, _ = _model_run(tmp, [{"body": body}])
    held(meta["tokens"]["estimated_calls"] == 1, f"tokens {meta['tokens']}")
    return f"estimated and marked: prompt {meta['tokens']['prompt']}"


@attempt("answer", "an ANSWER.md that games the lenient grade: negated or retracted gold, six authors, wrong unit, gold as an HTML blob's publisher")
def gamed_grade(tmp: Path) -> str:
    from searchbox.grading import Question, grade_text

    games = [("It is not Apache-2.0; it is CC-BY-NC-4.0", "Apache-2.0"), ("Han Xiao? No - the author is Scott Martens", "Han Xiao"),
             ("Han Xiao, Scott Martens, Alex C-G, Saba Sturua, Michael Günther, Bo Wang", "Scott Martens"),
             ("It supports 32, 64, 128, 256, 512 and 768 dimensions", "768"), ("It is 38.4 feet tall", "38.4 metres"),
             ("Maybe Scott Martens, or Han Xiao", "Scott Martens"), ("Published 2024-04-16, 2024-04-17 or 2024-04-18", "2024-04-16"),
             ('</div><span class="kg-bookmark-author">Jina AI</span><span class="kg-bookmark-publisher">Han Xiao</span></div>', "Han Xiao")]
    graded = [grade_text(answer, Question("q", "?", gold)) for answer, gold in games]
    won = [answer for (answer, _), g in zip(games, graded) if g["correct"] != 0.0]
    held(not won, f"correct credited: {won}")
    return f"correct 0 on all {len(games)}; the lenient contains credits {sum(g['contains'] == 1.0 for g in graded)}"


@attempt("answer", "a 200 KB one-line ANSWER.md of dates, numbers, names, licenses and negations (grading crash or blow-up?)")
def huge_claim(tmp: Path) -> str:
    import random

    from searchbox.grading import Question, grade_text

    words = ["Apache 2.0", "16 April 2024", "38.4 m", "Han Xiao", "not", "maybe", "?", "jina-v3", "8K", "2024-04-16T16:19:47Z", "(", "]"]
    text = " ".join(random.Random(0).choice(words) for _ in range(25_000))
    g = grade_text(text, Question("q", "?", "Han Xiao"))
    held(g["correct"] in (0.0, 1.0) and g["contains"] in (0.0, 1.0), f"grades {g['correct']}, {g['contains']}")
    return f"graded: correct {g['correct']}, contains {g['contains']} (the claim is read up to its first 2,000 characters)"


@attempt("answer", "an ANSWER.md that games correct itself: bounds, struck text, scare quotes, names of two kinds, year-like counts, exact K")
def gamed_correct(tmp: Path) -> str:
    from searchbox.grading import Question, grade_text

    games = [("35%, or more than 40%", "35%"), ("Engineering Group and Scott Martens", "Scott Martens"), ("768 or 2048", "768"),
             ("1K or 512", "1K"), ("- Han Xiao\n- Engineering Group", "Han Xiao"), ('It is "not" Apache-2.0', "Apache-2.0"),
             ("~~Scott Martens~~ Han Xiao", "Scott Martens"), ("Before 2024-04-16.", "2024-04-16"), ("Berlin or Munich", "Berlin"),
             ("scott martens and han xiao", "Scott Martens"), ("Yes (or no)", "yes"), ("Possibly:\n- Scott Martens", "Scott Martens"),
             ("120 m", "120 m²"), ("$1.2 billion", "$1.2 million")]
    won = [answer for answer, gold in games if grade_text(answer, Question("q", "?", gold))["correct"] != 0.0]
    held(not won, f"correct credited: {won}")
    return f"correct 0 on all {len(games)}"
