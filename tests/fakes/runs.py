"""Finished run directories built by hand (run_meta v2, trace, parquet, ANSWER.md, dataroom) for grading and analysis tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterable, Optional

import searchbox
from searchbox.config import RunConfig
from searchbox.record.record import TOOL_SCHEMA, TURN_SCHEMA, write_meta, write_table

BUILTIN = Path(searchbox.__file__).parent / "builtin"
DATAROOM = BUILTIN / "dataroom"
QUESTIONS = BUILTIN / "questions.jsonl"


def builtin_gold(question_id: str, path: Path = QUESTIONS) -> dict:
    for line in Path(path).read_text().splitlines():
        if line.strip():
            q = json.loads(line)
            if q["id"] == question_id:
                return q
    raise KeyError(question_id)


def config_dict(overrides: Optional[dict[str, Any]] = None) -> dict:
    """A resolved RunConfig as a dict, with dotted overrides (`model.temperature`: 0.7, `tools`: "high")."""
    cfg = RunConfig().to_dict()
    for key, value in (overrides or {}).items():
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return cfg


def tool_event(turn: int, tool: str, content: str, call_id: str = "c") -> dict:
    return {"type": "message", "turn": turn, "t": 0.0,
            "message": {"role": "tool", "tool_call_id": call_id, "name": tool, "content": content}}


def make_run(sweep: Path, run_id: str, *, question_id: str = "nw01", answer: Optional[str] = "38.4 metres\n\nSources: reports/gannet-rock-survey.md",
             outputs: Iterable[tuple[int, str, str]] = (), config: Optional[dict] = None, axes: Optional[dict] = None,
             stop_reason: str = "budget_spent", turns: int = 1, malformed: int = 0, old_malformed_rows: int = 0,
             grades: Optional[dict] = None, questions_path: Path = QUESTIONS, gold: Optional[dict] = None,
             model: str = "smollm2-135m", served_id: str = "SmolLM2-135M-Instruct", done: bool = True,
             dataroom: Optional[Path] = DATAROOM, question_type: Optional[str] = None) -> Path:
    """One finished run under sweep/runs/run_id. `outputs`: (turn, tool, text) of each tool call, in order."""
    rd = Path(sweep) / "runs" / run_id
    (rd / "work").mkdir(parents=True, exist_ok=True)
    if dataroom is not None and not (rd / "work" / "dataroom").exists():
        shutil.copytree(dataroom, rd / "work" / "dataroom")
    if answer is not None:
        (rd / "work" / "ANSWER.md").write_text(answer, encoding="utf-8")
    q = dict(gold or builtin_gold(question_id, questions_path))
    cfg = config_dict(config)
    outputs = list(outputs)
    events = [{"type": "message", "turn": 1, "t": 0.0, "message": {"role": "system", "content": "sys"}},
              {"type": "message", "turn": 1, "t": 0.0, "message": {"role": "user", "content": q["question"]}}]
    calls = []
    for step, (turn, tool, text) in enumerate(outputs, 1):
        cid = f"call_{step}"
        events.append({"type": "message", "turn": turn, "t": 0.0, "message": {
            "role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function", "function": {"name": tool, "arguments": "{}"}}]}})
        events.append(tool_event(turn, tool, text, cid))
        calls.append({"run_id": run_id, "turn": turn, "step": step, "call_id": cid, "tool": tool, "arguments": "{}",
                      "programs": ["cat"] if tool == "bash" else [], "paths": [], "duration_ms": 1.0, "ok": True, "error": "",
                      "output_chars": len(text)})
    for i in range(old_malformed_rows):  # the schema-1 agent logged malformed replies as tool calls
        calls.append({"run_id": run_id, "turn": 1, "step": 100 + i, "call_id": "", "tool": "(malformed)", "arguments": "{oops",
                      "programs": [], "paths": [], "duration_ms": 0.0, "ok": False, "error": "not JSON", "output_chars": 0})
    (rd / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    turn_rows = []
    for t in range(1, turns + 1):
        n_calls = sum(1 for c in calls if c["turn"] == t)
        turn_rows.append({"run_id": run_id, "turn": t, "prompt_tokens": 100 * t, "completion_tokens": 10, "cached_tokens": 50 * (t - 1),
                          "prompt_tokens_cum": 50 * t * (t + 1), "completion_tokens_cum": 10 * t, "cached_tokens_cum": 25 * t * (t - 1),
                          "context_tokens": 100 * t + 10, "llm_calls": n_calls + 1, "llm_ms": 100.0, "tool_ms": 5.0, "tool_calls": n_calls,
                          "compactions": 0, "answer_chars": len(answer or ""), "answer_changed": t == 1, "elapsed_ms": 110.0,
                          "ended_by": "no_tool_calls", "malformed": malformed if t == 1 else 0})
    write_table(turn_rows, TURN_SCHEMA, rd / "turns.parquet")
    write_table(calls, TOOL_SCHEMA, rd / "tool_calls.parquet")
    tools = cfg.get("tools")
    meta = {
        "run_id": run_id, "question_id": q["id"], "question": q["question"], "question_type": question_type or q.get("type", ""),
        "questions_path": str(questions_path),
        "gold": {"answer": q.get("answer", ""), "aliases": q.get("aliases", []), "gold_files": q.get("gold_files", []), "type": q.get("type", "")},
        "config": cfg, "axes": axes if axes is not None else {"model": model, "tools": tools or "default", "budget": cfg["harness"]["budget"]},
        "sweep": Path(sweep).name, "model": model,
        "served": {"model_id": served_id, "endpoint": "http://127.0.0.1:1", "gguf_sha256": None, "llama_cpp": None},
        "stop_reason": stop_reason, "stop_detail": "", "turns": turns,
        "tokens": {"prompt": sum(r["prompt_tokens"] for r in turn_rows), "completion": 10 * turns, "cached": 0,
                   "total": sum(r["prompt_tokens"] for r in turn_rows) + 10 * turns, "uncached_prompt": 0, "estimated_calls": 0},
        "tool_calls": len(outputs) + old_malformed_rows, "malformed_replies": malformed, "tool_errors": 0,
        "elapsed_s": 1.0 * turns, "llm_s": 0.6 * turns, "tool_s": 0.2 * turns, "setup_s": 0.1,
        "answer_present": bool((answer or "").strip()), "answer_chars": len(answer or ""), "answer_source": "model", "answer": answer or "",
        "dataroom": {"source": str(dataroom), "sha256": "d" * 64, "files": 7, "bytes": 4000},
        "grades": grades or {},
    }
    write_meta(rd, meta)
    if done:
        (rd / "DONE").write_text(stop_reason)
    return rd
