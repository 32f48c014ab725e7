"""Reading a question file as untrusted input: bounded, typed, one line of error naming the file and line.

Every reader of question files (grading.load_questions, the audit's questions.build.load) goes through
`records`, so the same line is refused, or read, the same way everywhere:
- the path is a regular file (no FIFO, device or /dev/zero) of at most MAX_FILE_BYTES, read once;
- it is UTF-8; an undecodable byte is named by its line;
- each line is at most MAX_LINE_CHARS, a JSON object nested at most MAX_DEPTH deep, its integers at most
  MAX_DIGITS digits (Python's own limit would raise deep inside);
- `id` is a string or an integer, `question` a non-empty string, `answer` a string or number, `aliases` and the
  file lists lists of strings (a string is refused, never read as its characters), `evidence` a list of
  {"file": dataroom path, "text": the passage as the file holds it} objects, both non-empty, a passage at most
  MAX_SPAN_CHARS; a gold (answer or alias) or question longer than MAX_GOLD_CHARS / MAX_QUESTION_CHARS is
  refused (graders read them whole);
- an id seen on an earlier line is refused, naming both lines (the audit alone reads on, to report it).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import ConfigError

MAX_FILE_BYTES = 64 * 1024**2
MAX_LINE_CHARS = 256 * 1024
MAX_DEPTH = 8  # a question line is an object of lists of objects: 3 levels; 8 leaves room, not recursion
MAX_DIGITS = 64
MAX_GOLD_CHARS = 1000
MAX_QUESTION_CHARS = 4000
MAX_SPAN_CHARS = 20000  # of one evidence passage (a paragraph, not a document)
LISTS = ("aliases", "gold_files", "evidence_files")


def read_bounded(path: Path, cap: int, what: str = "file") -> str:
    """A regular file's UTF-8 text, at most `cap` bytes; anything else is a ConfigError of one line."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: not a regular file")
        if st.st_size > cap:
            raise ConfigError(f"{path}: {st.st_size} bytes, over the {cap}-byte cap for a {what}")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = fh.read(cap + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > cap:
        raise ConfigError(f"{path}: over the {cap}-byte cap for a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte {data[exc.start]:#04x})") from None


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number of {len(text)} digits (at most {MAX_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_DIGITS * 2:
        raise ValueError(f"a number of {len(text)} characters")
    return float(text)


def _depth_ok(line: str) -> bool:
    """Nesting stays within MAX_DEPTH, counted in one pass outside strings (before the parser recurses)."""
    level, in_str, esc = 0, False, False
    for ch in line:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            level += 1
            if level > MAX_DEPTH:
                return False
        elif ch in "]}":
            level -= 1
    return True


def parse_line(line: str) -> Any:
    """One JSON line under the size, depth and number limits (ValueError naming the limit)."""
    if len(line) > MAX_LINE_CHARS:
        raise ValueError(f"a line of {len(line)} characters (at most {MAX_LINE_CHARS})")
    if not _depth_ok(line):
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    return json.loads(line, parse_int=_int, parse_float=_float, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not a number")))


def _text(raw: dict, key: str, cap: int, numbers: bool = False, required: bool = False) -> str:
    value = raw.get(key)
    if value is None:
        if required:
            raise ValueError(f"no {key!r}")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float) if numbers else str):
        raise ValueError(f"{key!r} must be a {'string or number' if numbers else 'string'}, not {type(value).__name__}")
    text = str(value)
    if required and not text.strip():
        raise ValueError(f"{key!r} is empty")
    if len(text) > cap:
        raise ValueError(f"{key!r} of {len(text)} characters (at most {cap})")
    return text


def _strings(raw: dict, key: str, cap: int, numbers: bool = False) -> list[str]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list, not {type(value).__name__}")
    return [_text({key: v}, key, cap, numbers, required=True) for v in value]


def fields(raw: Any) -> dict:
    """The checked fields of one parsed question line (ValueError naming the field)."""
    if not isinstance(raw, dict):
        raise ValueError(f"a question line is a JSON object, not {type(raw).__name__}")
    qid = raw.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise ValueError("'id' must be a non-empty string or an integer")
    evidence = raw.get("evidence") or []
    if not isinstance(evidence, list) or not all(isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("text"), str)
                                                 and e["file"].strip() and e["text"].strip() for e in evidence):
        raise ValueError("'evidence' must be a list of {\"file\": dataroom path, \"text\": the passage, verbatim} objects, both non-empty")
    if any(len(e["file"]) > MAX_QUESTION_CHARS or len(e["text"]) > MAX_SPAN_CHARS for e in evidence):
        raise ValueError(f"'evidence' holds a file over {MAX_QUESTION_CHARS} or a passage over {MAX_SPAN_CHARS} characters")
    return {"id": str(qid), "question": _text(raw, "question", MAX_QUESTION_CHARS, required=True),
            "answer": _text(raw, "answer", MAX_GOLD_CHARS, numbers=True), "aliases": _strings(raw, "aliases", MAX_GOLD_CHARS, numbers=True),
            "gold_files": _strings(raw, "gold_files", MAX_QUESTION_CHARS), "evidence_files": _strings(raw, "evidence_files", MAX_QUESTION_CHARS),
            "type": _text(raw, "type", 100), "template": _text(raw, "template", 200), "fact": _text(raw, "fact", MAX_QUESTION_CHARS, numbers=True),
            "evidence": [{"file": e["file"], "text": e["text"]} for e in evidence]}


def records(path: Path, duplicates: bool = False) -> list[dict]:
    """Every question line of a file, checked (see the module docstring); a bad line is one ConfigError naming it.
    `duplicates=True` keeps a repeated id (the audit reports it as a finding of its own, `duplicate_id`)."""
    text = read_bounded(path, MAX_FILE_BYTES, "question file")
    out, seen = [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = fields(parse_line(line))
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{path}:{n}: not a question line ({str(exc).splitlines()[0][:200]})") from None
        if rec["id"] in seen and not duplicates:
            raise ConfigError(f"{path}:{n}: duplicate question id {rec['id']!r} (first on line {seen[rec['id']]})")
        seen[rec["id"]] = n
        out.append(rec)
    return out
