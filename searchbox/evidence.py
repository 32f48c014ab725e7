"""Evidence recall: the share of a question's gold files whose content reached the agent in a tool output.

One definition for every tier, read from what the agent received (the tool messages in
trace.jsonl), never from the arguments it sent or the paths a tool noted:

- A gold file's *spans*: its lines, whitespace-collapsed; a line of at least MIN_CHARS is cut
  into pieces of SPAN_CHARS starting every STEP_CHARS (tails of at least MIN_CHARS kept), and
  runs of shorter lines are joined until they reach MIN_CHARS. Only spans found in no other dataroom
  file and in no dataroom path count (*distinctive*): a span a path spells (front matter repeating the
  file's name) names the file, it is no content, and an error echoing the path must not credit it.
  A gold file with none is unmeasurable and left out of the ratio.
- A tool output is searched as written, with read/cat -n/nl line-number prefixes and grep's
  `path:line:` prefixes stripped, and, when it is JSON (search results), as the strings inside
  it. Overlapping pieces mean a search chunk, a grep line or a truncated output that shows
  part of a long line (any 60 characters of it) still counts.
- A gold file is *received* when any of its distinctive spans occurs in a tool output and not in what the
  agent itself sent or was given: the arguments of the call that made the output (an error echoing a
  path or a pattern the model typed) and the user messages (the question).

evidence_recall = received gold files / measurable gold files (None when there are none).
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

from . import safefs

EVIDENCE_VERSION = "evidence-3"  # bump when the definition above changes
MIN_CHARS = 20  # shorter text is not specific enough to name a file
SPAN_CHARS = 40  # long lines are cut into overlapping pieces this long, one every STEP_CHARS, so any view
STEP_CHARS = 20  # of SPAN_CHARS + STEP_CHARS characters of the line holds a whole piece
FILE_CAP = 4 * 1024**2  # bytes read of one dataroom file
_READ_PREFIX = re.compile(r"^\s*\d+\t")  # read, cat -n, nl
_GREP_PREFIX = re.compile(r"^(?:[^\t\n]*?[:-])?\d+[:-]")  # path:12: / 12: (one file) / path-12- (context)
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}
_SPAN_CACHE: dict[str, dict[str, list[str]]] = {}  # (dataroom content, gold paths) -> spans; a sweep grades many runs of one dataroom


@dataclass
class Evidence:
    """What one run received of its gold files."""

    gold: list[str]  # gold files as the question names them
    measured: list[str] = field(default_factory=list)  # found in the dataroom with a distinctive span
    received: list[str] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)  # missing from the dataroom, or nothing distinctive in it
    first_turn: Optional[int] = None  # turn of the first tool output holding gold content
    tools: list[str] = field(default_factory=list)  # tools whose output first delivered a gold file

    @property
    def recall(self) -> Optional[float]:
        return len(self.received) / len(self.measured) if self.measured else None

    def grades(self) -> dict:
        return {"evidence_recall": self.recall, "evidence_gold_files": len(self.measured), "evidence_received": len(self.received),
                "evidence_unmeasured": len(self.unmeasured), "evidence_first_turn": self.first_turn,
                "evidence_tools": ",".join(self.tools), "evidence_version": EVIDENCE_VERSION}


def lines_of(text: str) -> list[str]:
    """Non-empty lines with whitespace collapsed (the unit both sides are compared in)."""
    return [ln for ln in (" ".join(raw.split()) for raw in text.splitlines()) if ln]


def spans_of(text: str) -> list[str]:
    """The candidate spans of one file (see the module docstring)."""
    spans, short = [], []
    for line in lines_of(text):
        if len(line) >= MIN_CHARS:
            if short:  # a run of short lines before this one
                spans.append("\n".join(short))
                short = []
            spans.extend(line[i : i + SPAN_CHARS] for i in range(0, len(line) - MIN_CHARS + 1, STEP_CHARS))
        else:
            short.append(line)
            if sum(map(len, short)) + len(short) - 1 >= MIN_CHARS:
                spans.append("\n".join(short))
                short = []
    return spans


def _match_gold(rel: str, gold: str) -> bool:
    gold = gold.strip("/")
    gold = gold[len("dataroom/"):] if gold.startswith("dataroom/") else gold
    return rel == gold or rel.endswith("/" + gold)


def _read(root: Path, rel: str) -> Optional[str]:
    data = safefs.read_bytes(root, rel, FILE_CAP)
    if data is None or b"\x00" in data[:8192]:
        return None  # gone, a link, or binary: no text to recognise
    return data.decode("utf-8", errors="replace")


def distinctive_spans(dataroom: Path, gold_files: list[str]) -> dict[str, list[str]]:
    """For each gold file: its spans found in no other dataroom file or path ([] when missing or none)."""
    listing = safefs.walk_files(dataroom)
    texts = {rel: t for rel, _ in listing if (t := _read(dataroom, rel)) is not None}
    # Keyed by content, not location: every run of a sweep has its own copy of one dataroom.
    key = hashlib.sha256(json.dumps([listing, texts, sorted(gold_files)]).encode()).hexdigest()
    if key in _SPAN_CACHE:
        return _SPAN_CACHE[key]
    norm = {rel: "\n".join(lines_of(t)) for rel, t in texts.items()}
    paths = [rel for rel, _ in listing]
    out: dict[str, list[str]] = {}
    for gold in gold_files:
        mine = [rel for rel in texts if _match_gold(rel, gold)]
        others = "\x00".join([*(v for rel, v in norm.items() if rel not in mine), *paths])
        spans = list(dict.fromkeys(s for rel in mine for s in spans_of(texts[rel])))
        out[gold] = [s for s in spans if s not in others]
    if len(_SPAN_CACHE) > 64:
        _SPAN_CACHE.clear()
    _SPAN_CACHE[key] = out
    return out


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _arguments(call: dict) -> str:
    """The strings a tool call sent, one per line (its arguments are JSON text, or already parsed)."""
    args = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return "\n".join(_strings(args))


def tool_outputs(trace: Path) -> Iterator[tuple[int, str, str, str]]:
    """(turn, tool, text, sent) of every tool message in a trace: the output as the agent received it, and what the
    agent sent or was given before it (the call's arguments and the user messages so far)."""
    if not Path(trace).is_file():
        return
    sent: dict[str, str] = {}  # tool call id -> its arguments
    given: list[str] = []  # user messages
    with open(trace, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed run
            message = event.get("message") if isinstance(event, dict) else None
            if event.get("type") != "message" or not isinstance(message, dict):
                continue
            role = message.get("role")
            if role == "user":
                given.append(_content(message))
            elif role == "assistant":
                for call in message.get("tool_calls") or []:
                    if isinstance(call, dict):
                        sent[str(call.get("id"))] = _arguments(call)
            elif role == "tool":
                echoable = "\n".join([sent.get(str(message.get("tool_call_id")), ""), *given])
                yield int(event.get("turn") or 0), str(message.get("name") or "?"), _content(message), echoable


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def views(text: str) -> str:
    """The normalised text of one tool output in every form searched, joined."""
    out = [lines_of(text)]
    out.append([ln for ln in (" ".join(_GREP_PREFIX.sub("", _READ_PREFIX.sub("", raw)).split()) for raw in text.splitlines()) if ln])
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            inner = "\n".join(_strings(json.loads(stripped)))
        except ValueError:  # a JSON result cut by the output cap: undo its escapes as far as it goes
            inner = _JSON_ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "u" else _ESCAPES[m[1]], stripped)
        out.append(lines_of(inner))
    return "\x00".join("\n".join(v) for v in out)


def measure(dataroom: Path, trace: Path, gold_files: Iterable[str]) -> Evidence:
    """Evidence of one run from its dataroom and trace."""
    gold = [g for g in dict.fromkeys(gold_files) if g]
    ev = Evidence(gold)
    if not gold:
        return ev
    spans = distinctive_spans(dataroom, gold) if Path(dataroom).is_dir() else {g: [] for g in gold}
    ev.measured = [g for g in gold if spans[g]]
    ev.unmeasured = [g for g in gold if not spans[g]]
    pending = {g: spans[g] for g in ev.measured}
    for turn, tool, text, sent in tool_outputs(trace):
        if not pending:
            break
        seen, echoed = views(text), "\n".join(lines_of(sent))
        hits = [g for g, ss in pending.items() if any(s in seen and s not in echoed for s in ss)]
        for g in hits:
            del pending[g]
            ev.received.append(g)
        if hits:
            ev.first_turn = turn if ev.first_turn is None else ev.first_turn
            if tool not in ev.tools:
                ev.tools.append(tool)
    ev.received.sort(key=ev.measured.index)
    return ev


def of_run(run_dir: Path, gold_files: Iterable[str]) -> Evidence:
    """Evidence of a run directory: its work/dataroom (a real directory, never a link) and trace.jsonl."""
    run_dir = Path(run_dir)
    st = safefs.lstat(run_dir / "work", "dataroom") if (run_dir / "work").is_dir() else None
    dataroom = run_dir / "work" / "dataroom" if st is not None and stat.S_ISDIR(st.st_mode) else run_dir / "work" / ".no-dataroom"
    return measure(dataroom, run_dir / "trace.jsonl", gold_files)
