"""The grep tool without ripgrep: Python's regex over work/, run as a child process the harness kills at the deadline.

A pattern like `(a+)+$` backtracks for ever inside the `re` module, where no signal or check reaches
it, so the search never runs in the harness process: `search` starts this module as a child under
the same deadline (and memory and CPU limits) as a bash call and kills it when the deadline passes.
Files are read through searchbox.corpus.safefs (no links, no special files, capped), ignore files are not
read and hidden files are searched: the same view as `grep -r` in bash.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import resource
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

MEMORY_BYTES = 2 * 1024**3  # RLIMIT_AS of the child, as for one process of the box
MAX_HITS_PER_FILE = 20


@dataclass
class Request:
    """One search, sent to the child as JSON on stdin."""

    root: str  # work/, the trusted root every path is walked from
    target: str  # relative file or folder under root ("." for all of it)
    pattern: str
    glob: str | None
    ignore_case: bool
    cap: int  # output bytes kept
    read_cap: int  # bytes read from one file


class Timeout(Exception):
    """The search passed its deadline and was killed."""


class BadPattern(ValueError):
    """The pattern is not a regular expression Python accepts."""


def search(req: Request, timeout_s: float) -> tuple[list[tuple[str, int, str]], bool]:
    """(path, line, text) matches for req and whether the output cap cut them, from a child killed after timeout_s
    (Timeout) or on a bad pattern (BadPattern)."""
    pkg_parent = str(Path(__file__).resolve().parents[2])
    code = f"import sys; sys.path.insert(0, {pkg_parent!r}); from searchbox.tools.fallback_grep import main; main()"
    payload = json.dumps(asdict(req)).encode()  # ensure_ascii: any string the model sent survives the pipe
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", code], input=payload, capture_output=True,
                              timeout=timeout_s, env={"PATH": os.defpath}, start_new_session=True)
    except subprocess.TimeoutExpired as exc:  # run() has killed the child already
        raise Timeout(f"grep timed out after {timeout_s:g}s") from exc
    try:
        answer = json.loads(proc.stdout)
    except ValueError as exc:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"fallback grep failed (exit {proc.returncode}): {err[-1] if err else 'no output'}") from exc
    if "error" in answer:
        raise BadPattern(answer["error"])
    return [(str(f), int(n), str(t)) for f, n, t in answer["matches"]], bool(answer["truncated"])


def _limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(req: Request) -> tuple[list[list], bool]:
    """The search itself (in the child): [path, line, text] matches, at most MAX_HITS_PER_FILE per file, and whether
    req.cap (counted as `path:line:text` lines) cut them."""
    from ..corpus import safefs

    rx = re.compile(req.pattern, re.IGNORECASE if req.ignore_case else 0)
    root = Path(req.root)
    if safefs.is_regular(root, req.target):
        files = [req.target]
    else:
        base = "" if req.target == "." else req.target + "/"
        files = [base + name for name, _ in safefs.walk_files(root / req.target)]
    out, size = [], 0
    for f in files:
        if req.glob and not fnmatch.fnmatch(os.path.basename(f), req.glob) and not fnmatch.fnmatch(f, req.glob):
            continue
        data = safefs.read_bytes(root, f, cap=req.read_cap)
        if data is None or b"\x00" in data[:8192]:
            continue
        hits = 0
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                out.append([f, n, line[:300]])
                size += len(f"{f}:{n}:{line[:300]}") + 1
                hits += 1
                if size > req.cap:
                    return out, True
                if hits >= MAX_HITS_PER_FILE:
                    break
    return out, False


def main() -> None:
    _limit_self()
    req = Request(**json.loads(sys.stdin.buffer.read()))
    try:
        matches, truncated = run(req)
        answer = {"matches": matches, "truncated": truncated}
    except re.error as exc:
        answer = {"error": f"invalid regular expression: {exc}"}
    except RecursionError:
        answer = {"error": "invalid regular expression: nested too deeply"}
    except MemoryError:
        answer = {"error": "the regular expression needs more memory than a search may use"}
    # File names that are not UTF-8 come back as surrogate escapes: keep them as JSON escapes, never fail here.
    sys.stdout.write(json.dumps(answer))
