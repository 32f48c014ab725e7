"""A run directory as the dashboard reads it: the trace tailed as compact events, its tables, meta, files and answer.

Nothing here keeps its own bookkeeping: every number the dashboard shows comes from the run's own
artifacts (trace.jsonl appended live, the parquet tables rewritten after each turn, run_meta.json).
Everything under a run is opened without following links (safefs), so a link the model made in
work/ is never followed, and a run reference cannot leave the outputs directory.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Optional

import pyarrow.parquet as pq

from ..corpus import safefs
from ..errors import SearchboxError
from . import markdown

TEXT_CHARS = 4000  # assistant/user text and tool arguments sent to the browser
PREVIEW_CHARS = 1500  # tool output preview
FILE_CAP = 256 * 1024  # bytes of one file shown in the browser
TREE_CAP = 3000  # files listed in the tree
TRACE_CHUNK = 512 * 1024  # bytes of trace read per poll
LINE_CAP = 8 * 1024**2  # bytes of one trace line the transcript opens whole
SEARCH_CAP = 256 * 1024**2  # bytes of trace a search reads
SEARCH_HITS = 5000
MAX_DEPTH = 256  # directory levels listed below work/


class NotFound(SearchboxError):
    """No such run, file or sweep (or one the app refuses to show)."""


# ---- locating a run ------------------------------------------------------------------------
def resolve_run(outputs: Path, ref: str) -> Path:
    """The run directory `ref` names under outputs/: plain directories only, never inside a run's work/."""
    try:
        parts = safefs.parts_of(ref)
    except safefs.UnsafePath as exc:
        raise NotFound(f"no such run: {exc}") from exc
    if not parts or any(p.startswith(".") or p == "work" for p in parts):
        raise NotFound(f"no such run: {ref}")
    cur = Path(outputs)
    for part in parts:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError:
            raise NotFound(f"no such run: {ref}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise NotFound(f"no such run: {ref}")
    if not (_regular(cur / "run_meta.json") or _regular(cur / "trace.jsonl")):
        raise NotFound(f"not a run directory: {ref}")
    return cur


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _open_regular(path: Path) -> Optional[int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


# ---- the trace -----------------------------------------------------------------------------
def read_trace(run_dir: Path, offset: int = 0, limit: int = TRACE_CHUNK) -> tuple[list[dict], int]:
    """Complete trace lines after byte `offset` (at most about `limit` bytes), compacted; and the new offset."""
    fd = _open_regular(Path(run_dir) / "trace.jsonl")
    if fd is None:
        return [], offset
    try:
        size = os.fstat(fd).st_size
        if size < offset:  # the file was replaced: start over
            offset = 0
        if size == offset:
            return [], offset
        data = os.pread(fd, min(limit, size - offset), offset)
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        if len(data) >= limit:  # one enormous line: skip it rather than stall
            return [{"type": "skipped", "bytes": len(data)}], offset + len(data)
        return [], offset
    events, at = [], offset
    for line in data[: end + 1].split(b"\n")[:-1]:
        start, at = at, at + len(line) + 1
        if not line.strip():
            continue
        try:
            event = compact(json.loads(line))
        except (ValueError, TypeError, AttributeError):
            event = {"type": "unreadable"}
        event["at"] = start  # where the line starts: the transcript asks for it whole (trace_line) by this
        events.append(event)
    return events, offset + end + 1


def clip(value: Any, limit: int) -> tuple[str, int]:
    """Text of at most `limit` characters, and the full length."""
    if value is None:
        return "", 0
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return (text if len(text) <= limit else text[:limit] + " …"), len(text)


def compact(line: dict) -> dict:
    """A trace line as the browser needs it: roles, calls, usage and previews, never whole tool outputs."""
    kind = line.get("type", "")
    out: dict[str, Any] = {"type": kind, "turn": line.get("turn"), "t": line.get("t")}
    if kind == "message":
        m = line.get("message") or {}
        role = m.get("role", "")
        out["role"] = role
        out["content"], out["chars"] = clip(m.get("content"), PREVIEW_CHARS if role == "tool" else TEXT_CHARS)
        if role == "tool":
            out["tool_call_id"], out["name"] = str(m.get("tool_call_id", "")), str(m.get("name", ""))
            data = m.get("data")
            if isinstance(data, dict) and isinstance(data.get("exit_code"), int) and not isinstance(data.get("exit_code"), bool):
                out["exit_code"] = data["exit_code"]  # bash: a non-zero exit counts as an error in the dashboard
        if m.get("reasoning_content"):
            out["reasoning"], _ = clip(m.get("reasoning_content"), PREVIEW_CHARS)
        calls = []
        for call in m.get("tool_calls") or []:
            fn = (call or {}).get("function") or {}
            args, _ = clip(fn.get("arguments"), TEXT_CHARS)
            calls.append({"id": str(call.get("id", "")), "name": str(fn.get("name", "")), "arguments": args})
        if calls:
            out["tool_calls"] = calls
        usage = line.get("usage")
        if isinstance(usage, dict):
            out["usage"] = {k: usage.get(k) for k in ("prompt", "completion", "cached", "latency_s", "finish_reason", "estimated") if k in usage}
            timings = usage.get("timings")
            if isinstance(timings, dict):  # llama.cpp's own: tokens per second of prefill and decode
                out["usage"]["timings"] = {k: timings[k] for k in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n")
                                           if isinstance(timings.get(k), (int, float)) and not isinstance(timings.get(k), bool)}
    else:
        for key, value in line.items():
            if key in out or key == "type":
                continue
            out[key] = value if isinstance(value, (int, float, bool)) or value is None else clip(value, PREVIEW_CHARS)[0]
    return out


def trace_line(run_dir: Path, at: int) -> dict:
    """The trace line starting at byte `at`, whole (what the transcript shows when a preview is not enough)."""
    fd = _open_regular(Path(run_dir) / "trace.jsonl")
    if fd is None:
        raise NotFound("this run has no trace")
    try:
        size = os.fstat(fd).st_size
        if not 0 <= at < size or (at > 0 and os.pread(fd, 1, at - 1) != b"\n"):
            raise NotFound(f"no trace line starts at byte {at}")
        data = os.pread(fd, min(LINE_CAP, size - at), at)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    if end < 0:
        raise NotFound(f"the trace line at byte {at} is longer than {LINE_CAP // 1024**2} MiB or not finished")
    try:
        line = json.loads(data[:end])
    except ValueError:
        raise NotFound(f"the trace line at byte {at} is not JSON") from None
    return {"at": at, "line": json_safe(line) if isinstance(line, dict) else {"value": line}}


def _searchable(line: dict) -> str:
    """The text of a trace line a person searches: message content, reasoning, tool names and arguments, event fields."""
    if line.get("type") == "message":
        m = line.get("message") or {}
        parts = [m.get("content"), m.get("reasoning_content"), m.get("name")]
        for call in m.get("tool_calls") or []:
            fn = (call or {}).get("function") or {}
            parts += [fn.get("name"), fn.get("arguments")]
    else:
        parts = [v for k, v in line.items() if k not in ("t", "turn")]
    return "\n".join(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False, default=str) for p in parts if p is not None)


def search_trace(run_dir: Path, query: str) -> dict:
    """Where a text occurs in the trace (case-insensitive): the byte offsets of the lines holding it, in order."""
    needle = query.casefold()
    if not needle.strip():
        return {"query": query, "hits": [], "truncated": False}
    fd = _open_regular(Path(run_dir) / "trace.jsonl")
    if fd is None:
        return {"query": query, "hits": [], "truncated": False}
    hits: list[int] = []
    try:
        with os.fdopen(fd, "rb") as fh:
            at = 0
            for raw in fh:
                if at >= SEARCH_CAP or len(hits) >= SEARCH_HITS:
                    return {"query": query, "hits": hits, "truncated": True}
                start, at = at, at + len(raw)
                if not raw.endswith(b"\n"):
                    break  # a line still being written
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and needle in _searchable(line).casefold():
                    hits.append(start)
    except OSError:
        pass
    return {"query": query, "hits": hits, "truncated": False}


# ---- tables and meta -----------------------------------------------------------------------
def table_rows(path: Path) -> list[dict]:
    """A parquet table's rows, JSON-safe (NaN -> None); [] when missing or being replaced."""
    if not _regular(path):
        return []
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, ValueError):
        return []
    return [{k: json_safe(v) for k, v in row.items()} for row in rows]


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def read_meta(run_dir: Path) -> Optional[dict]:
    """run_meta.json without its bulky parts (the resolved config stays; the answer text is shown from ANSWER.md)."""
    fd = _open_regular(Path(run_dir) / "run_meta.json")
    if fd is None:
        return None
    try:
        data = os.read(fd, 8 * 1024**2)
    finally:
        os.close(fd)
    try:
        meta = json.loads(data)
    except ValueError:
        return None
    if isinstance(meta, dict):
        meta.pop("answer", None)
        return json_safe(meta)
    return None


def mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime_ns
    except OSError:
        return 0


# ---- files ---------------------------------------------------------------------------------
def file_tree(run_dir: Path) -> dict:
    """Regular files of the run: its artifacts, and work/ (dataroom and what the model wrote); links skipped.

    Paths are listed as `shown` spells them (any name the box allowed, escaped where it is not UTF-8), and work/ is
    walked by safefs.list_files, one directory descriptor at a time, so a tree deeper than PATH_MAX is listed too.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return {"artifacts": [], "work": [], "truncated": False}
    artifacts: list[list] = []
    for rel in sorted(_top_files(run_dir)):
        st = safefs.lstat(run_dir, rel)
        if st is not None and stat.S_ISREG(st.st_mode):
            artifacts.append([shown(rel), st.st_size])
    work: list[list] = []
    truncated = False
    st = safefs.lstat(run_dir, "work")
    if st is not None and stat.S_ISDIR(st.st_mode):
        listing = safefs.list_files(run_dir / "work", cap_files=TREE_CAP, max_depth=MAX_DEPTH)
        truncated = listing.truncated
        work = [[f"work/{shown(rel)}", size] for rel, size in listing.files if not _in_shared(run_dir, rel)]
        shared = _shared_room(run_dir)
        if shared is not None:  # the corpus's shared copy, shown where the run saw it (work/dataroom/)
            room = safefs.list_files(shared, cap_files=max(0, TREE_CAP - len(work)), max_depth=MAX_DEPTH)
            truncated = truncated or room.truncated
            work = sorted(work + [[f"work/dataroom/{shown(rel)}", size] for rel, size in room.files])
    return {"artifacts": artifacts, "work": work, "truncated": truncated}


def shown(rel: str) -> str:
    """A path as the API lists it: itself when valid UTF-8 without a backslash; otherwise every byte that is not
    UTF-8, and every backslash, as `\\xNN`, so any name the box allowed can be listed as JSON and asked for again."""
    raw = rel.encode("utf-8", errors="surrogateescape" if _escaped_only(rel) else "surrogatepass")
    try:
        text = raw.decode("utf-8")
        if "\\" not in text:
            return text
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="surrogateescape")
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else "\\x5c" if c == "\\" else c for c in text)


def real_name(path: str) -> str:
    """The path `shown` listed, as the file system spells it (its `\\xNN` escapes undone)."""
    if "\\" not in path and _escaped_only(path):
        return path
    out, i = bytearray(), 0
    while i < len(path):
        hexpart = path[i + 2:i + 4]
        if path.startswith("\\x", i) and len(hexpart) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexpart):
            out.append(int(hexpart, 16))
            i += 4
        else:
            out += path[i].encode("utf-8", errors="surrogatepass")
            i += 1
    return os.fsdecode(bytes(out))


def _escaped_only(text: str) -> bool:
    """No surrogate in text but the file system's own escapes of undecodable bytes (U+DC80..U+DCFF)."""
    return not any("\ud800" <= c <= "\udfff" and not "\udc80" <= c <= "\udcff" for c in text)


def _shared_room(run_dir: Path) -> Optional[Path]:
    """The shared read-only copy a run's work/dataroom showed (corpus.store), or None for a run that holds its own."""
    from ..corpus.dataroom import POINTER, run_dataroom

    return run_dataroom(run_dir) if (Path(run_dir) / POINTER).is_file() else None


def _in_shared(run_dir: Path, rel: str) -> bool:
    return rel.startswith("dataroom/") and _shared_room(run_dir) is not None


def _top_files(run_dir: Path) -> list[str]:
    out = []
    with os.scandir(run_dir) as it:
        for entry in it:
            if entry.is_file(follow_symlinks=False):
                out.append(entry.name)
    snaps = safefs.lstat(run_dir, "snapshots")
    if snaps is not None and stat.S_ISDIR(snaps.st_mode):
        with os.scandir(run_dir / "snapshots") as it:
            out += [f"snapshots/{e.name}" for e in it if e.is_file(follow_symlinks=False)]
    return out


def read_file(run_dir: Path, rel: str) -> dict:
    """One file of the run for the viewer: text (capped) or a note that it is binary. Links and escapes refused."""
    try:
        parts = safefs.parts_of(real_name(rel))
    except safefs.UnsafePath as exc:
        raise NotFound(shown(str(exc))) from exc
    if not parts:
        raise NotFound("no file given")
    root, inner = Path(run_dir), "/".join(parts)
    shared = _shared_room(Path(run_dir))
    if shared is not None and parts[:2] == ("work", "dataroom") and len(parts) > 2:
        root, inner = shared, "/".join(parts[2:])  # the corpus's shared copy, read as the run saw it
    data = safefs.read_bytes(root, inner, cap=FILE_CAP + 1)
    if data is None:
        raise NotFound(f"{shown(rel)}: no such regular file (links and special files are not shown)")
    st = safefs.lstat(root, inner)
    size = st.st_size if st else len(data)
    if b"\x00" in data[:8192] or rel.endswith(".parquet"):
        return {"path": rel, "size": size, "binary": True, "text": "", "truncated": False}
    return {"path": rel, "size": size, "binary": False, "text": data[:FILE_CAP].decode("utf-8", errors="replace"),
            "truncated": len(data) > FILE_CAP}


def answer(run_dir: Path) -> dict:
    """work/ANSWER.md rendered (escaped markdown subset), read without following links."""
    text = safefs.read_text(Path(run_dir) / "work", "ANSWER.md", cap=FILE_CAP) if (Path(run_dir) / "work").is_dir() else None
    if text is None:
        return {"present": False, "html": "", "chars": 0}
    return {"present": True, "html": markdown.render(text), "chars": len(text)}


def result(run_dir: Path) -> dict:
    """The point of the run beside its answer: gold, grades (with why `correct` says what it says) and which gold files'
    answer-bearing passages reached the agent. Grades are the recorded ones; the why is recomputed from the run's files,
    in a child process with a time bound (recompute.py), never in the request's path."""
    meta = read_meta(run_dir) or {}
    out: dict[str, Any] = {"question": meta.get("question"), "gold": meta.get("gold"), "grades": meta.get("grades") or {},
                           "verdict": None, "evidence": None, "status": meta.get("status")}
    if meta.get("status") == "complete" and meta.get("gold"):
        from .recompute import bounded

        out.update(bounded(Path(run_dir)))
    return json_safe(out)


def snapshot(run_dir: Path) -> dict:
    """Everything at once (for scripts and tests): meta, turns, tool calls."""
    run_dir = Path(run_dir)
    return {"meta": read_meta(run_dir), "turns": table_rows(run_dir / "turns.parquet"), "calls": table_rows(run_dir / "tool_calls.parquet")}
