"""The result page's why, recomputed from a run's files in a child process with a time bound: never in a request's path.

`correct`'s reasons and the evidence are recomputed from ANSWER.md and the trace each time the page asks. Grading
is pure Python and can be slow on a hostile answer; run inside the server it would hold the interpreter and stall
every other request (/api/config waited 39.5 s behind one '**' x 1024 answer). So it runs here, in its own process,
at most RECOMPUTE_S, at most AT_ONCE at a time; past either the page says so where the reason would be.

    python -m searchbox.web.recompute RUN_DIR     (what the app runs: prints the JSON of compute())
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

RECOMPUTE_S = 10.0  # the most one page's recompute may take
AT_ONCE = 2  # recomputes running at once (each a process); a page waits for a free one within the same bound
OUTPUT_CAP = 4 * 1024**2
_slots = threading.BoundedSemaphore(AT_ONCE)


def compute(run_dir: Path) -> dict:
    """{verdict, evidence} of a complete run with a gold, as runview.result shows them (in this process)."""
    from ..grading import Question, explain, read_answer
    from ..record import artifacts

    try:
        meta = artifacts.read_json(Path(run_dir), "run_meta.json")
    except artifacts.DamagedArtifact:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    question = Question.from_record(meta)
    out: dict[str, Any] = {"verdict": None, "evidence": None}
    if question is None or meta.get("status") != "complete":
        return out
    try:
        part, why = explain(read_answer(Path(run_dir)), question)
        out["verdict"] = {**why.as_dict(), "claim": part.claim[:1000]}
    except Exception as exc:  # a grader bug must not cost the page; say so where the reason would be
        out["verdict"] = {"reason": f"could not recompute: {type(exc).__name__}"}
    if question.gold_files:
        try:
            from ..grading.evidence import of_run

            ev = of_run(Path(run_dir), question.gold_files, question.golds, getattr(question, "evidence", ()))
            out["evidence"] = {"recall": ev.recall, "rule": ev.rule, "first_turn": ev.first_turn, "tools": ev.tools,
                               "files": [{"path": f, "measured": f in ev.measured, "received": f in ev.received} for f in ev.gold]}
        except Exception as exc:
            out["evidence"] = {"error": f"could not recompute: {type(exc).__name__}"}
    return out


def bounded(run_dir: Path, timeout_s: float = RECOMPUTE_S) -> dict:
    """compute() in a child process, within timeout_s (waiting for a free slot included)."""
    failed = {"verdict": {"reason": f"not recomputed: took longer than {timeout_s:g} s (the recorded grades stand)"}, "evidence": None}
    if not _slots.acquire(timeout=timeout_s):
        return {"verdict": {"reason": "not recomputed: the server is busy recomputing other pages (the recorded grades stand)"},
                "evidence": None}
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                                       os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.run([sys.executable, "-m", "searchbox.web.recompute", str(run_dir)], capture_output=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL, env=env)
        except subprocess.TimeoutExpired:
            return failed
    finally:
        _slots.release()
    try:
        if proc.returncode != 0 or len(proc.stdout) > OUTPUT_CAP:
            raise ValueError
        data = json.loads(proc.stdout)
        return {"verdict": data.get("verdict"), "evidence": data.get("evidence")}
    except (ValueError, AttributeError):
        return {"verdict": {"reason": "could not recompute: the recompute process failed"}, "evidence": None}


def main(argv: list[str]) -> int:
    from ..bounds import json_safe

    print(json.dumps(json_safe(compute(Path(argv[0]))), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
