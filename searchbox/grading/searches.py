"""Search calls: how many calls of a run searched the dataroom, per retrieval tool, grep included.

Read from tool_calls.parquet (what the harness ran, not what the model wrote): a call of a search tool (grep, find,
search_dataroom, answer_question) counts once under its name; a bash call counts once per search program it ran
(grep, egrep, fgrep, rg, ag, ack, find), under `bash:<program>`. Reads (read, cat) and writes are not searches.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

SEARCH_TOOLS = ("grep", "find", "search_dataroom", "answer_question")
SEARCH_PROGRAMS = ("grep", "egrep", "fgrep", "rg", "ag", "ack", "find")


def count(tool_rows: list[dict]) -> Counter:
    out: Counter = Counter()
    for row in tool_rows:
        tool = str(row.get("tool") or "")
        if tool in SEARCH_TOOLS:
            out[tool] += 1
        elif tool == "bash":
            for prog in row.get("programs") or []:
                name = str(prog).rsplit("/", 1)[-1]
                if name in SEARCH_PROGRAMS:
                    out[f"bash:{name}"] += 1
    return out


def of_run(run_dir: Path) -> dict:
    """{search_calls, search_calls_by_tool (JSON)}; None when the run left no tool_calls.parquet."""
    path = Path(run_dir) / "tool_calls.parquet"
    if not path.is_file():
        return {"search_calls": None, "search_calls_by_tool": None}
    import pyarrow.parquet as pq

    counts = count(pq.read_table(path, columns=["tool", "programs"]).to_pylist())
    return {"search_calls": sum(counts.values()), "search_calls_by_tool": json.dumps(dict(sorted(counts.items())))}


def of_rows(rows: Optional[list[dict]]) -> int:
    return sum(count(rows or []).values())
