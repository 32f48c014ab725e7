"""A run's trajectory as plain data, without ids or clocks: two runs with equal trajectories ran the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..config import stable_hash

# What a step of the trace says about the run itself; ids (tool call ids are random), times and latencies say
# only how it was carried out.
MESSAGE_KEYS = ("role", "content", "name", "raw", "truncated", "reasoning_content")
USAGE_KEYS = ("prompt", "completion", "cached", "estimated")


def trajectory(run_dir: Path | str) -> list[dict]:
    """Every message of the run's trace (tool calls as name and arguments) with the tokens billed for it, then
    its stop reason."""
    steps: list[dict] = []
    for line in (Path(run_dir) / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("type") == "message":
            message = event.get("message") or {}
            step = {k: message[k] for k in MESSAGE_KEYS if k in message}
            calls = message.get("tool_calls") or []
            if calls:
                step["tool_calls"] = [[(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")] for c in calls]
            if isinstance(event.get("usage"), dict):
                step["usage"] = {k: event["usage"].get(k) for k in USAGE_KEYS}
            steps.append(step)
        elif event.get("type") == "stop":
            steps.append({"stop": event.get("reason")})
    return steps


def fingerprint(run_dir: Path | str) -> str:
    """A short hash of the trajectory."""
    return stable_hash(trajectory(run_dir))


def first_difference(a: list[dict], b: list[dict]) -> Optional[str]:
    """Where two trajectories part, for people ("step 3 (assistant): content, usage"); None when they are equal."""
    for n, (x, y) in enumerate(zip(a, b)):
        if x != y:
            fields = sorted(k for k in {*x, *y} if x.get(k) != y.get(k))
            return f"step {n} ({x.get('role') or 'stop'}): {', '.join(fields)}"
    if len(a) != len(b):
        return f"one has {len(a)} steps, the other {len(b)}"
    return None
