"""Evidence recall: the share of a question's gold files whose answer-bearing passage reached the agent in a tool output.

One definition for every tier, read from what the agent received (the tool messages in trace.jsonl):

- Where the question names its answer-bearing passages (its `evidence` spans, {file, text}: grading/qfile.py) and
  a span stands verbatim (whitespace collapsed) in a gold file, that file's passages are its spans: in each span
  line, the occurrence of the gold, or, in a line without one, its first SPAN_CHARS characters (a bridge passage).
  The other rules below apply to them unchanged. `evidence_rule` says which passages measured a run: "passage"
  (spans, for every measured file), "occurrence" (the rule below, for every one) or "mixed".
- A gold file's *answer-bearing passages* are where the gold answer or an alias occurs in it under the
  grader's normalisation (`searchbox.grading.normalize.contains`): on each such line, the shortest run of
  words that holds it (an *occurrence*); a gold hard-wrapped over two lines occurs in the two lines joined by a
  space, and an output shows it with its lines joined the same way. Not an occurrence: one inside a name (a file's or a model's:
  "jx-two-1.5b" spells 1.5B) that is not itself a gold, and one in a block that is not the document's own
  text (a bookmark card about another page, whose author or publisher is not this document's; see
  searchbox.corpus.markup). A gold file in which no gold occurs is *unmeasured*: a bridge document of a multi-hop
  question, or a gold the builder did not find, is left out of the ratio. A gold file the run's copy lost
  (removed by the agent without a sandbox) is read from the dataroom the run was given: missed, not unmeasured.
- An occurrence is *shown* by a tool output when the output holds it together with at least CONTEXT_CHARS
  more characters of its own line, on either side (or the whole line, when the line is shorter): enough of
  the line to say which line it is. What else is needed depends on whether the output names its file:
  - *attributed* text names its dataroom file: a `read` of that file, grep's `path:line:text` lines (the
    grep tool, `rg`/`grep -n` in bash, a delivered grep result), a search result's `{path, text}`; shown
    there, the occurrence counts for that file;
  - any other text (`cat` in bash, a search result cut by the output cap) counts only when what it shows is
    *distinctive*: found in no other dataroom file and no dataroom path (else, the answer line with its
    neighbouring lines, up to MAX_RADIUS on a side, widened until distinctive).
- A bash output whose call's file opens were *observed* (strace around the box, the tool row's `opened`:
  searchbox/tools/opens.py) counts for a gold file only when the call opened that file to read (or a result the harness
  delivered), whatever its command names: `cd dataroom && echo ... | base64 -d`, an echo beside `ls dataroom`, python
  decoding its own base64 after a listdir read no file and show nothing. Distinctive then means found in no other file
  the call read (and no path). For a call that read the gold file, a copy of its passage with lines broken anywhere or
  case changed (`fold -w 40`, `tr a-z A-Z`) shows it too: both sides compared with all whitespace removed and casefolded,
  CONTEXT_CHARS counted without whitespace. A call that also opened files the agent made (under work/, outside dataroom/,
  no delivered result: its notes, ANSWER.md) may print the agent's own text, typed in pieces or decoded: it shows only
  lines that name their dataroom file (grep's `path:line:`) and that none of those files holds as the run left them (a
  forged `path:line:` line in a note is the note's; a note the agent removed cannot be told apart, so holds it).
  A call whose opens were not observed (no strace, sandbox=none, a run from
  before) is judged by its text and command, as below; `evidence_opens` says which ("observed", "not observed", "mixed").
- Never evidence: a `read` of a file under work/ outside dataroom/ (the agent's own notes; only the results
  the harness delivered under results/ count: one the delivering tool's own message announced, that no write/edit
  and no bash command naming results/ with a way to write has touched, whatever the file's name), the output of a bash command that reads no dataroom text (observed:
  one that opened no dataroom file; not observed: one that names neither dataroom/ nor results/ and walks no tree: `echo`,
  `base64 -d` of what the agent typed),
  and any window that occurs in what the agent itself sent or
  was given before the output (every call's arguments, its own messages, the question): an error echoing a
  path, a note written then read or cat back, the question repeated. A line that only names the entity holds
  no occurrence, so a grep for the model's name is no evidence of its license.

evidence_recall = gold files whose occurrence was shown / gold files holding an occurrence (None when none).

A second, weaker measure, *gold_content_seen*, keeps the earlier definition: the share of gold files with a
distinctive span of any of their text (20-40 characters of a line, or a run of short lines, found in no
other file or path) in a tool output that came from the dataroom, by the same rules of origin. It says the
agent saw the right document, not that it saw the answer.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from functools import partial
from typing import Callable, Iterable, Iterator, Optional

from ..corpus import markup, safefs

EVIDENCE_VERSION = "evidence-9"  # bump when the definition above changes (6: a delivered result is one the harness announced; none the agent
#   wrote; 7: a question's `evidence` spans are its passages where they stand in their file (evidence_rule); a gold wrapped over two lines;
#   8: bash output by its call's observed opens (evidence_opens), and wrapped or case-changed copies from a call that read the gold file;
#   9: a call that also opened files the agent made shows only lines that name their dataroom file and that none of those files holds)
MIN_CHARS = 20  # shorter text is not specific enough to name a file (gold_content_seen)
SPAN_CHARS = 40  # long lines are cut into overlapping pieces this long, one every STEP_CHARS, so any view
STEP_CHARS = 20  # of SPAN_CHARS + STEP_CHARS characters of the line holds a whole piece
CONTEXT_CHARS = 30  # of an occurrence's own line, on one side of it, that a tool output must show with it
MAX_RADIUS = 4  # neighbouring lines joined to an answer line, at most, to make it distinctive
SLACK_WORDS = 3  # words an occurrence may span beyond the gold's own word count
FILE_CAP = 4 * 1024**2  # bytes read of one dataroom file
DELIVERED = re.compile(r"results/(\d+)-([A-Za-z0-9_.-]+)\.txt")  # where the toolset delivers a result (delivery=file)
# A delivered result is one the harness announced in the delivering tool's own message (tools/__init__.py _deliver);
# a file of that name the agent made (write, or a bash command that names results/ and can write) never is.
ANNOUNCED = re.compile(r"Result written to (results/\d+-[A-Za-z0-9_.-]+\.txt)(?![\w.-])")
BASH_WRITES_RESULTS = re.compile(r"results.*?(?:>|\btee\b|\bcp\b|\bmv\b|\bsed\b|\bdd\b|\bln\b|\btouch\b|\btruncate\b|\bpython|\bperl\b|\bnode\b)"
                                 r"|(?:>|\btee\b|\bcp\b|\bmv\b|\bdd\b|\bln\b|\btouch\b|\bpython|\bperl\b|\bnode\b).*?results", re.DOTALL)
AGENT_WRITES = ("write", "edit")  # tools whose path argument names a file the agent made
_READ_PREFIX = re.compile(r"^\s*\d+\t")  # read, cat -n, nl
_NAME_FIELD = re.compile(r"^(?:model_name|slug):[ \t]*[\"']?([^\"'\n]+?)[\"']?[ \t]*$", re.MULTILINE)  # what a document is named
# A bash command that can print dataroom text: it names dataroom/ (or a delivered result), walks the working tree (rg,
# grep -r, find, ls -R, a glob, "."), or changes into it. Anything else (echo, printf, base64 -d of what the agent typed)
# prints only what the agent itself put there.
READS_TREE = re.compile(r"dataroom|results/|\brg\b|\bfind\b|\bgrep\b[^|;&]*\s-[A-Za-z]*[rR]|\bls\b[^|;&]*\s-[A-Za-z]*R|[*?]|(?<![\w./-])\.(?:/|\s|$)|\bcd\b")
_GREP_PREFIX = re.compile(r"^(?:[^\t\n]*?[:-])?\d+[:-]")  # path:12: / 12: (one file) / path-12- (context)
_GREP_LINE = re.compile(r"^([^\t\n:]+):(\d+)[:-](.*)$")  # path:12:text, the path to be checked against the dataroom
_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}
# A sweep grades many runs of one dataroom (each run has its own copy): both caches are keyed by content, not location.
_CORPORA: dict[str, "Corpus"] = {}  # dataroom content -> its text
_ROOMS: dict[tuple, "Room"] = {}  # (dataroom content, gold files, golds) -> what grading needs of it


@dataclass(frozen=True)
class Occurrence:
    """Where a gold occurs in a gold file: a line, the span of the occurrence in it, and its distinctive neighbourhoods."""

    line: str  # whitespace-collapsed
    start: int
    end: int
    joined: tuple[str, ...]  # the line with its neighbouring lines, narrowest first (text that does not name its file may show
    #                          a short front-matter line that way, when the neighbourhood is found in no other file)


@dataclass(frozen=True)
class Passages:
    """What one gold file offers as evidence of its answer."""

    occurrences: tuple[Occurrence, ...]


class Corpus:
    """A dataroom's text files, whitespace-collapsed, and its paths, searchable as one byte string (UTF-8: a search
    through a str that holds any non-ASCII character scans four bytes a character)."""

    def __init__(self, texts: dict[str, str], paths: list[str]):
        self.texts, self.files = texts, set(paths)
        parts = [*(("\n".join(lines_of(t)).encode(), rel) for rel, t in texts.items()), *((p.encode(), "\x00" + p) for p in paths)]
        self.names = [name for _, name in parts]  # a path part is named "\x00path": no file's own text
        self.starts, at = [], 0
        for text, _ in parts:
            self.starts.append(at)
            at += len(text) + 1
        self.blob = b"\x00".join(text for text, _ in parts)
        self._memo: dict[tuple[str, frozenset], bool] = {}
        self._squashed: dict[str, str] = {}  # file (or "\x00" for every path) -> squashed(text), made when first asked

    def elsewhere(self, window: str, mine: set[str]) -> bool:
        """The window occurs in some file outside `mine`, or in a path (asked lazily: only of text an output showed)."""
        key = (window, frozenset(mine))
        if key not in self._memo:
            needle, found = window.encode(), False
            p = self.blob.find(needle)
            while p >= 0 and not found:
                found = self.names[bisect.bisect_right(self.starts, p) - 1] not in mine
                p = self.blob.find(needle, p + 1)
            self._memo[key] = found
        return self._memo[key]

    def elsewhere_among(self, window: str, among: frozenset) -> bool:
        """The window occurs in one of the files `among` (those a bash call was observed to read, less the gold's own),
        or in a path."""
        needle, p = window.encode(), self.blob.find(window.encode())
        while p >= 0:
            name = self.names[bisect.bisect_right(self.starts, p) - 1]
            if name in among or name.startswith("\x00"):
                return True
            p = self.blob.find(needle, p + 1)
        return False

    def squashed_among(self, window: str, among: frozenset) -> bool:
        """elsewhere_among for a squashed window (whitespace gone, casefolded), against the squashed files and paths."""
        if "\x00" not in self._squashed:
            self._squashed["\x00"] = "\x00".join(squashed(p) for p in sorted(self.files))
        for rel in sorted(among & self.texts.keys()):
            if rel not in self._squashed:
                self._squashed[rel] = squashed(self.texts[rel])
        return any(window in self._squashed[rel] for rel in ("\x00", *sorted(among & self.texts.keys())))


@dataclass
class Room:
    """What a question's grading needs of one dataroom, computed once per (dataroom content, question)."""

    corpus: Optional[Corpus]
    passages: dict[str, Optional[Passages]]  # gold -> its passages (None: missing from the dataroom, or no occurrence)
    mine: dict[str, set[str]]  # gold -> the dataroom files it names
    spans: dict[str, list[str]]  # gold -> content spans (gold_content_seen counts those found in no other file)
    owner: dict[str, str]  # dataroom file -> the gold it is
    by_span: set[str] = field(default_factory=set)  # gold files whose passages are the question's own spans (rule "passage")

    @property
    def files(self) -> set[str]:
        return self.corpus.files if self.corpus else set()


@dataclass
class Evidence:
    """What one run received of its gold files."""

    gold: list[str]  # gold files as the question names them
    measured: list[str] = field(default_factory=list)  # in the dataroom, and the gold answer occurs in them
    received: list[str] = field(default_factory=list)  # measured files whose occurrence a tool output showed
    unmeasured: list[str] = field(default_factory=list)  # missing from the dataroom, or no gold occurs in them
    first_turn: Optional[int] = None  # turn of the first tool output showing an occurrence
    tools: list[str] = field(default_factory=list)  # tools whose output first showed a gold file's occurrence
    content_measured: list[str] = field(default_factory=list)  # gold files with a distinctive span (gold_content_seen)
    content_seen: list[str] = field(default_factory=list)
    by_span: list[str] = field(default_factory=list)  # measured files whose passages are the question's `evidence` spans
    bash_observed: dict = field(default_factory=lambda: {True: 0, False: 0})  # bash outputs whose opens were observed or not

    @property
    def opens(self) -> Optional[str]:
        """How the run's bash outputs were judged: "observed" (every one by the opens its call was seen to make),
        "not observed" (every one by its text alone: no strace, sandbox=none, or a run from before), "mixed"; None: no bash."""
        seen, unseen = self.bash_observed[True], self.bash_observed[False]
        return None if not seen and not unseen else "observed" if not unseen else "not observed" if not seen else "mixed"

    @property
    def rule(self) -> Optional[str]:
        """Which rule measured evidence_recall: "passage" (every measured file by its spans), "occurrence" (none), "mixed"."""
        if not self.measured:
            return None
        return "passage" if len(self.by_span) == len(self.measured) else "occurrence" if not self.by_span else "mixed"

    @property
    def recall(self) -> Optional[float]:
        return len(self.received) / len(self.measured) if self.measured else None

    @property
    def content_recall(self) -> Optional[float]:
        return len(self.content_seen) / len(self.content_measured) if self.content_measured else None

    def grades(self) -> dict:
        return {"evidence_recall": self.recall, "evidence_gold_files": len(self.measured), "evidence_received": len(self.received),
                "evidence_unmeasured": len(self.unmeasured), "evidence_first_turn": self.first_turn,
                "evidence_tools": ",".join(self.tools), "evidence_rule": self.rule, "evidence_opens": self.opens, "gold_content_seen": self.content_recall, "evidence_version": EVIDENCE_VERSION}


# ---- text as both sides are compared ----------------------------------------------------------
def lines_of(text: str) -> list[str]:
    """Non-empty lines with whitespace collapsed (the unit both sides are compared in)."""
    return [ln for ln in (" ".join(raw.split()) for raw in text.splitlines()) if ln]


def squashed(text: str) -> str:
    """Text with every whitespace character gone and casefolded: how a call observed to read a gold file is compared
    with it, so that `fold -w 40` (lines broken inside words) and `tr a-z A-Z` still show its lines."""
    return "".join(text.split()).casefold()


def spans_of(text: str) -> list[str]:
    """The candidate content spans of one file (gold_content_seen)."""
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


def occurrences(line: str, golds: list[str]) -> list[tuple[int, int]]:
    """Character spans of the shortest runs of words of one line in which a gold occurs under the grader's normalisation.

    (Finding *where* a gold occurs is not something the grader needs; it is built here on its public `contains`.)
    """
    from .normalize import contains  # here, not at the top: searchbox.grading imports this module

    if not golds or not contains(line, golds):
        return []
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", line)]
    width = max(len(g.split()) for g in golds) + SLACK_WORDS
    found: list[tuple[int, int]] = []
    for a, (start, _) in enumerate(words):
        last = min(len(words), a + width)
        if not contains(line[start : words[last - 1][1]], golds):
            continue  # no gold in the widest run from here: skip the narrower ones
        for b in range(a, last):
            if contains(line[start : words[b][1]], golds):
                found.append((start, words[b][1]))
                break
    return [s for s in found if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in found)]  # innermost only


def _match_gold(rel: str, gold: str) -> bool:
    gold = gold.strip("/")
    gold = gold[len("dataroom/"):] if gold.startswith("dataroom/") else gold
    return rel == gold or rel.endswith("/" + gold)


def _read(root: Path, rel: str) -> Optional[str]:
    data = safefs.read_bytes(root, rel, FILE_CAP)
    if data is None or b"\x00" in data[:8192]:
        return None  # gone, a link, or binary: no text to recognise
    return data.decode("utf-8", errors="replace")


def own_lines(text: str) -> tuple[list[str], set[int]]:
    """lines_of(text), and which of them lie in a block that is not the document's own text (a bookmark card about
    another page: its author or publisher is no statement of this document)."""
    spans, lines, foreign, at = markup.foreign_spans(text), [], set(), 0
    for raw in text.splitlines(keepends=True):
        line = " ".join(raw.split())
        if line:
            if any(a <= at < b for a, b in spans):
                foreign.add(len(lines))
            lines.append(line)
        at += len(raw)
    return lines, foreign


def in_a_name(line: str, s: int, e: int, golds: list[str], names: set[str]) -> bool:
    """The occurrence is part of a name (a file's or a model's, "jx-two-1.5b" for 1.5B) that is not itself a gold."""
    from .normalize import tokens

    a = line.rfind(" ", 0, s) + 1
    b = line.find(" ", e)
    word = line[a : b if b >= 0 else len(line)].strip("\"'`()[]{}<>,;:.!?*")
    return word.lower() in names and all(tokens(word) != tokens(g) for g in golds)


def _passages(text: str, golds: list[str], names: set[str]) -> Optional[Passages]:
    lines, foreign = own_lines(text)
    found = []
    for i, line in enumerate(lines):
        if i in foreign:
            continue
        for s, e in occurrences(line, golds):
            if in_a_name(line, s, e, golds, names):
                continue
            joined = (w for r in range(1, MAX_RADIUS + 1)
                      for w in ("\n".join(lines[max(0, i - r) : i + 1]), "\n".join(lines[i : i + r + 1])) if "\n" in w)
            found.append(Occurrence(line, s, e, tuple(dict.fromkeys(joined))))  # narrowest first; distinct or not is asked lazily
    for i in range(len(lines) - 1):  # a gold hard-wrapped over two lines ("Dana" / "Whitfield"): the two lines as one
        if i in foreign or i + 1 in foreign:
            continue
        pair = f"{lines[i]} {lines[i + 1]}"
        found.extend(Occurrence(pair, s, e, ()) for s, e in occurrences(pair, golds)
                     if s < len(lines[i]) < e and not in_a_name(pair, s, e, golds, names))
    return Passages(tuple(found)) if found else None


def span_passages(text: str, spans: list[str], golds: list[str]) -> Optional[Passages]:
    """The passages of a gold file named by its question (`evidence` spans), each where it stands in the file verbatim (up to
    whitespace); one not in the file names nothing. A passage line's occurrence of the gold is what must be shown of it; a
    line without one must be shown from its start for SPAN_CHARS characters (or whole)."""
    body = "\n".join(lines_of(text))
    found = []
    for span in spans:
        span_lines = lines_of(span)
        if not span_lines or "\n".join(span_lines) not in body:
            continue
        for line in span_lines:
            found.extend(Occurrence(line, s, e, ()) for s, e in occurrences(line, golds) or [(0, min(len(line), SPAN_CHARS))])
    return Passages(tuple(found)) if found else None


def room(dataroom: Path, gold_files: list[str], golds: list[str], source: Optional[Path] = None,
         spans: Iterable[dict] = ()) -> Room:
    """Passages and content spans of each gold file, against every other file and path of the dataroom. A gold file gone
    from the run's copy (removed during a run without a sandbox) is read from the dataroom the run was given (`source`):
    the run missed it, it is not unmeasured."""
    listing = safefs.walk_files(dataroom)
    texts = {rel: t for rel, _ in listing if (t := _read(dataroom, rel)) is not None}
    gone = [g for g in gold_files if not any(_match_gold(rel, g) for rel in texts)]
    if gone and source is not None:
        for rel, text in _source_texts(source).items():
            if any(_match_gold(rel, g) for g in gone) and rel not in texts:
                texts[rel] = text
                listing = [*listing, (rel, len(text.encode()))]
    content = hashlib.sha256(json.dumps([listing, texts]).encode()).hexdigest()
    spans = [(str(e.get("file") or ""), str(e.get("text") or "")) for e in spans or () if isinstance(e, dict)]
    key = (content, tuple(sorted(gold_files)), tuple(golds), tuple(spans))
    if key in _ROOMS:
        return _ROOMS[key]
    if content not in _CORPORA:
        if len(_CORPORA) >= 8:
            _CORPORA.clear()
        _CORPORA[content] = Corpus(texts, [rel for rel, _ in listing])
    corpus = _CORPORA[content]
    out = Room(corpus, {}, {}, {}, {})
    names = {PurePosixPath(rel).stem.lower() for rel in texts} | {m.strip().lower() for t in texts.values() for m in _NAME_FIELD.findall(t[:20000])}
    for gold in gold_files:
        mine = {rel for rel in texts if _match_gold(rel, gold)}
        out.mine[gold] = mine
        out.owner.update({rel: gold for rel in mine})
        out.spans[gold] = list(dict.fromkeys(s for rel in sorted(mine) for s in spans_of(texts[rel])))  # distinct or not: asked lazily
        named = [p for rel in sorted(mine) if (p := span_passages(texts[rel], [t for f, t in spans if _match_gold(rel, f)], golds))]
        if named:  # the question names this file's passages: they alone are its evidence
            out.by_span.add(gold)
        found = named or [p for rel in sorted(mine) if (p := _passages(texts[rel], golds, names)) is not None]
        out.passages[gold] = Passages(tuple(o for p in found for o in p.occurrences)) if found else None
    if len(_ROOMS) >= 512:
        _ROOMS.clear()
    _ROOMS[key] = out
    return out


def _source_texts(source: Path) -> dict[str, str]:
    """The text files of the dataroom a run was given (a zip or a folder), as the dataroom shows them; {} when unreadable."""
    from ..errors import SearchboxError
    from ..corpus.dataroom import corpus_texts

    try:
        return corpus_texts(source) if Path(source).exists() else {}
    except (SearchboxError, OSError, ValueError):
        return {}


def distinctive_spans(dataroom: Path, gold_files: list[str]) -> dict[str, list[str]]:
    """For each gold file: its content spans found in no other dataroom file or path ([] when missing or none)."""
    r = room(dataroom, gold_files, [])
    return {g: [s for s in spans if not r.corpus.elsewhere(s, r.mine[g])] for g, spans in r.spans.items()}


# ---- what the agent received ------------------------------------------------------------------
@dataclass
class Output:
    """One tool message of a trace, with what the agent had sent or been given before it."""

    turn: int
    tool: str
    text: str
    sent: str  # every call's arguments, the agent's own messages and the user messages so far, as collapsed lines
    origin: str  # "dataroom": a read of a dataroom file; "delivered": a read of a harness-delivered result;
    #              "agent": a read of any other file under work/ (or a write/edit report): never evidence; "tool": the rest
    path: Optional[str] = None  # the read's file, dataroom-relative, when origin is "dataroom"
    reads: Optional[frozenset] = None  # bash, opens observed: the dataroom files (dataroom-relative) the call opened to read,
    #                                    whose text alone its output can show; None: any file's (not observed, or it read a
    #                                    delivered result)
    observed: Optional[bool] = None  # bash: whether the call's opens were observed (tools.opens); None for other tools
    own: tuple[str, ...] = ()  # bash, opens observed: the files under work/ it opened that the agent made (outside dataroom/, no
    #                            delivered result), whose text, printed back, is the agent's own


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _parsed(call: dict) -> tuple[str, dict, str]:
    """(tool name, arguments as a dict, the strings the call sent one per line) of a tool call."""
    fn = (call.get("function") or {}) if isinstance(call, dict) else {}
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return str(fn.get("name") or ""), {}, args
    return str(fn.get("name") or ""), args if isinstance(args, dict) else {}, "\n".join(_strings(args))


def work_path(path) -> Optional[str]:
    """A path argument as a work/-relative path ("dataroom/..." for the dataroom), or None when it is no path."""
    if not isinstance(path, str) or not path.strip():
        return None
    norm = PurePosixPath(os.path.normpath(path.strip()))
    parts = [p for p in norm.parts if p not in ("/", ".")]
    if norm.is_absolute():  # /any/run/work/dataroom/x -> dataroom/x; /any/run/work/notes.md -> notes.md
        if "dataroom" in parts:
            parts = parts[len(parts) - 1 - parts[::-1].index("dataroom"):]
        elif "work" in parts:
            parts = parts[len(parts) - parts[::-1].index("work"):]
    return "/".join(parts) or "."


def tool_outputs(trace: Path, opened: Iterable[tuple[str, Optional[list]]] = ()) -> Iterator[Output]:
    """Every tool message of a trace as the agent received it, with its origin and what the agent had sent before it.
    `opened`: (call id, the files it opened to read, work/-relative, or None: not observed) of each bash call's tool row,
    in order (a call id the model reused is matched call by call)."""
    if not Path(trace).is_file():
        return
    observations: dict[str, list[Optional[list]]] = {}
    for call_id, files in opened:
        observations.setdefault(str(call_id), []).append(files)
    calls: dict[str, tuple[str, dict]] = {}  # tool call id -> (name, arguments)
    sent: list[str] = []
    written: set[str] = set()  # work paths the agent's write/edit calls named
    called: dict[str, int] = {}  # tool name -> calls so far (a delivered result names its tool)
    announced: set[str] = set()  # results/<n>-<tool>.txt that the harness said it wrote, in that tool's own message
    bash_wrote_results = False  # a bash command that names results/ and can write: no file there is the harness's any more
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
            if role in ("user", "assistant", "system"):
                if role != "system":
                    sent.append("\n".join(lines_of(_content(message))))
                for call in (message.get("tool_calls") or []) if role == "assistant" else []:
                    name, args, strings = _parsed(call)
                    calls[str(call.get("id") if isinstance(call, dict) else "")] = (name, args)
                    sent.append("\n".join(lines_of(strings)))
                    called[name] = called.get(name, 0) + 1
                    if name in AGENT_WRITES and (p := work_path(args.get("path"))):
                        written.add(p)
                    if name == "bash" and isinstance(args.get("command"), str) and BASH_WRITES_RESULTS.search(args["command"]):
                        bash_wrote_results = True
            elif role == "tool":
                name, args = calls.get(str(message.get("tool_call_id")), (str(message.get("name") or "?"), {}))
                name = str(message.get("name") or name)
                origin, path = "tool", None
                if name != "bash" and (m := ANNOUNCED.match(_content(message))) and DELIVERED.fullmatch(m[1]) \
                        and DELIVERED.fullmatch(m[1])[2] == name:
                    announced.add(m[1])
                if name == "read":
                    p = work_path(args.get("path")) or ""
                    delivered = DELIVERED.fullmatch(p)
                    if not p:
                        origin = "tool"  # a call the trace kept no path of: judged by its text alone
                    elif p.startswith("dataroom/"):
                        origin, path = "dataroom", p[len("dataroom/"):]
                    elif delivered and p in announced and p not in written and not bash_wrote_results:
                        origin = "delivered"
                    else:
                        origin = "agent"
                elif name in AGENT_WRITES:
                    origin = "agent"
                reads, observed, own = None, None, ()
                if name == "bash":
                    queue = observations.get(str(message.get("tool_call_id")), [])
                    files = queue.pop(0) if queue else None
                    observed = files is not None
                    if files is not None:  # what the call opened decides, whatever its command names (tools.opens)
                        harness = {f for f in files if DELIVERED.fullmatch(f) and f in announced and f not in written and not bash_wrote_results}
                        own = tuple(sorted(f for f in files if f != "dataroom" and not f.startswith("dataroom/") and f not in harness))
                        delivered = bool(harness)
                        reads = None if delivered else frozenset(f[len("dataroom/"):] for f in files if f.startswith("dataroom/"))
                        origin = "tool" if delivered or reads else "agent"  # read no dataroom text: printed only its own
                    elif isinstance(args.get("command"), str) and not READS_TREE.search(args["command"]):
                        origin = "agent"  # its output can hold no dataroom text
                yield Output(int(event.get("turn") or 0), name, _content(message), "\n".join(sent), origin, path, reads, observed, own)


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _json_inner(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The strings inside a JSON tool output (search results), and its (path, text) results when it parses whole."""
    stripped = text.lstrip()
    if stripped[:1] not in ("{", "["):
        return "", []
    try:
        value = json.loads(stripped)
    except ValueError:  # a JSON result cut by the output cap: undo its escapes as far as it goes, name no file
        return _JSON_ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "u" else _ESCAPES[m[1]], stripped), []
    hits = value.get("results") if isinstance(value, dict) else None
    pairs = [(h["path"], h["text"]) for h in hits or [] if isinstance(h, dict) and isinstance(h.get("path"), str) and isinstance(h.get("text"), str)]
    return "\n".join(_strings(value)), pairs


def views(text: str) -> str:
    """The normalised text of one tool output in every form searched, joined."""
    out = [lines_of(text)]
    out.append([ln for ln in (" ".join(_GREP_PREFIX.sub("", _READ_PREFIX.sub("", raw)).split()) for raw in text.splitlines()) if ln])
    unnumbered = "\n".join(_READ_PREFIX.sub("", raw) for raw in text.splitlines())  # a delivered JSON result opened with read
    for candidate in dict.fromkeys([text, unnumbered]):
        inner, _ = _json_inner(candidate)
        if inner:
            out.append(lines_of(inner))
    return "\x00".join("\n".join(v) for v in out)


def attributed(out: Output, files: set[str]) -> list[tuple[str, str]]:
    """(dataroom file, the text shown of it) of each part of an output that names its file."""
    if out.origin == "agent":
        return []
    if out.origin == "dataroom":
        return [(out.path or "", "\n".join(lines_of("\n".join(_READ_PREFIX.sub("", raw) for raw in out.text.splitlines()))))]
    text = out.text if out.origin == "tool" else "\n".join(_READ_PREFIX.sub("", raw) for raw in out.text.splitlines())
    blocks = []
    for raw in text.splitlines():
        m = _GREP_LINE.match(raw)
        if m and (rel := _dataroom_file(m[1], files)):
            blocks.append((rel, " ".join(m[3].split())))
    _, pairs = _json_inner(text)
    blocks += [(rel, "\n".join(lines_of(t))) for p, t in pairs if (rel := _dataroom_file(p, files))]
    return blocks


def _dataroom_file(path: str, files: set[str]) -> Optional[str]:
    """The dataroom file a path printed by a tool names (relative to work/ or to the dataroom), or None."""
    p = work_path(path.removeprefix("./")) or ""
    p = p[len("dataroom/"):] if p.startswith("dataroom/") else p
    return p if p in files else None


def extents(o: Occurrence, text: str) -> Iterator[tuple[int, int]]:
    """Each place a text shows the occurrence: the span of its line that the text shows around it, as far as it agrees."""
    anchor, p = o.line[o.start : o.end], text.find(o.line[o.start : o.end])
    while p >= 0:
        left = 0
        while left < o.start and left < p and text[p - left - 1] == o.line[o.start - left - 1]:
            left += 1
        right, q = 0, p + len(anchor)
        while o.end + right < len(o.line) and q + right < len(text) and text[q + right] == o.line[o.end + right]:
            right += 1
        yield o.start - left, o.end + right
        p = text.find(anchor, p + 1)


def shows(p: Passages, text: str, sent: str, elsewhere: Optional[Callable[[str], bool]]) -> bool:
    """A text shows a gold file's answer: an occurrence with CONTEXT_CHARS of its line (or the whole line) that the agent did not
    send itself; when the text does not name the file (`elsewhere` given), that window must also be found in no other file."""
    flat = text.replace("\n", " ")  # a line wrapped by the file or by the command still shows its line ...
    sent = f"{sent}\x00{sent.replace(chr(10), ' ')}"  # ... and what the agent sent wrapped is still its own
    for o in p.occurrences:
        for a, b in (*extents(o, text), *(extents(o, flat) if "\n" in text else ())):
            window = o.line[a:b]
            if (b - a) - (o.end - o.start) < CONTEXT_CHARS and (a, b) != (0, len(o.line)):
                continue  # too little of the line to say which line it is
            if window not in sent and (elsewhere is None or not elsewhere(window)):
                return True
        if elsewhere is not None and any(w in text and w not in sent and not elsewhere(w) for w in o.joined):
            return True
    return False


def shows_loosely(p: Passages, text: str, said: str, elsewhere: Callable[[str], bool]) -> bool:
    """shows(), for the output of a call observed to read the gold file: both sides squashed (whitespace gone, casefolded),
    so a line broken inside a word (`fold -w 40`) or case-changed (`tr a-z A-Z`) is still shown; CONTEXT_CHARS then
    counts characters other than whitespace. `said`: what the agent sent, squashed; `elsewhere`: the squashed window
    occurs in another file the call read, or in a path."""
    flat = squashed(text)
    for o in p.occurrences:
        before, anchor, after = squashed(o.line[: o.start]), squashed(o.line[o.start : o.end]), squashed(o.line[o.end :])
        if not anchor:
            continue
        sq = Occurrence(before + anchor + after, len(before), len(before) + len(anchor), ())
        for a, b in extents(sq, flat):
            if (b - a) - (sq.end - sq.start) < CONTEXT_CHARS and (a, b) != (0, len(sq.line)):
                continue
            window = sq.line[a:b]
            if window not in said and not elsewhere(window):
                return True
    return False


def measure(dataroom: Path, trace: Path, gold_files: Iterable[str], golds: Iterable[str] = (), source: Optional[Path] = None,
            spans: Iterable[dict] = (), opened: Iterable[tuple[str, Optional[list]]] = (), work: Optional[Path] = None) -> Evidence:
    """Evidence of one run from its dataroom, its trace and the question's gold answer and aliases (`source`: the dataroom
    the run was given, read only for a gold file gone from its copy; `spans`: the question's `evidence` passages;
    `opened`: each bash call's observed opens from its tool row, see tool_outputs; `work`: the run's work folder, where the
    files the agent made are read as they were left, see _shown)."""
    gold = [g for g in dict.fromkeys(gold_files) if g]
    from .normalize import tokens  # here, not at the top: searchbox.grading imports this module

    golds = [g for g in dict.fromkeys(golds) if g and tokens(g)]
    ev = Evidence(gold)
    if not gold:
        return ev
    if Path(dataroom).is_dir():
        r = room(dataroom, gold, golds, source, spans)
    else:
        r = Room(None, {g: None for g in gold}, {}, {g: [] for g in gold}, {})
    ev.measured = [g for g in gold if r.passages[g] is not None]
    ev.unmeasured = [g for g in gold if r.passages[g] is None]
    ev.by_span = [g for g in ev.measured if g in r.by_span]
    ev.content_measured = [g for g in gold if any(not r.corpus.elsewhere(s, r.mine[g]) for s in r.spans[g])]  # stops at the first
    pending = {g: r.passages[g] for g in ev.measured}
    unseen = {g: r.spans[g] for g in ev.content_measured}
    for out in tool_outputs(trace, opened):
        if out.observed is not None:
            ev.bash_observed[out.observed] += 1
        if (not pending and not unseen) or out.origin == "agent":
            continue
        blocks = attributed(out, r.files)
        if out.own:  # it printed files the agent made too: only lines that name their dataroom file, none the agent's files hold
            blocks = [(f, t) for f, t in blocks if not _in_own(work, out.own, t)]
        seen = "\n".join(t for _, t in blocks) if out.own else views(out.text)
        hits = [g for g, p in pending.items() if _shown(r, g, p, out, seen, blocks)]
        for g in hits:
            del pending[g]
            ev.received.append(g)
        if hits:
            ev.first_turn = out.turn if ev.first_turn is None else ev.first_turn
            if out.tool not in ev.tools:
                ev.tools.append(out.tool)
        for g in [g for g, spans in unseen.items() if out.reads is None or r.mine[g] & out.reads
                  if any(s in seen and s not in out.sent and not r.corpus.elsewhere(s, r.mine[g]) for s in spans)]:
            del unseen[g]
            ev.content_seen.append(g)
    ev.received.sort(key=ev.measured.index)
    ev.content_seen.sort(key=ev.content_measured.index)
    return ev


def _shown(r: Room, g: str, p: Passages, out: Output, seen: str, blocks: list[tuple[str, str]]) -> bool:
    """Whether one output shows gold file g's passages. A bash call observed to read files shows only theirs: text it
    printed from no file it read is its own (tools.opens); a window is then distinctive when no other file it read (and
    no path) holds it, and its squashed copies count too (shows_loosely)."""
    if out.reads is not None and not r.mine[g] & out.reads:
        return False
    if any(r.owner.get(f) == g and shows(p, t, out.sent, None) for f, t in blocks):
        return True
    if out.own:
        return False  # the rest of its text may be the agent's own: a note typed in pieces, or decoded, printed back
    if out.reads is None:
        return shows(p, seen, out.sent, partial(r.corpus.elsewhere, mine=r.mine[g]))
    among = out.reads - r.mine[g]
    return shows(p, seen, out.sent, partial(r.corpus.elsewhere_among, among=among)) \
        or shows_loosely(p, out.text, squashed(out.sent), partial(r.corpus.squashed_among, among=among))


def _in_own(work: Optional[Path], own: tuple[str, ...], text: str) -> bool:
    """The text (squashed) is in one of the agent's files a call opened, as the run left them, or cannot be told: no work
    folder, or a file gone (the agent may have removed the note it printed)."""
    if work is None:
        return True
    needle = squashed(text)
    for rel in own:
        st = safefs.lstat(Path(work), rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            continue  # a folder opened to list it ("grep -r X results"): no text of its own
        data = safefs.read_bytes(Path(work), rel, FILE_CAP)
        if data is None or needle in squashed(data.decode("utf-8", errors="replace")):
            return True
    return False


def observed_opens(run_dir: Path) -> list[tuple[str, Optional[list]]]:
    """(call id, opened) of each bash row of a run's tool_calls.parquet, in order; [] when it has none or is unreadable
    (then every bash output is judged by its text alone)."""
    from ..record import artifacts
    from ..record.record import TOOL_SCHEMA

    try:
        rows = artifacts.read_table(Path(run_dir), "tool_calls.parquet", TOOL_SCHEMA).to_pylist()
    except artifacts.DamagedArtifact:
        return []
    return [(str(row.get("call_id") or ""), row.get("opened")) for row in rows if row.get("tool") == "bash"]


def of_run(run_dir: Path, gold_files: Iterable[str], golds: Iterable[str] = (), spans: Iterable[dict] = ()) -> Evidence:
    """Evidence of a run directory: its work/dataroom (a real directory, never a link), trace.jsonl and, for bash, the
    opens its tool rows observed (tool_calls.parquet)."""
    from ..corpus.dataroom import POINTER, run_dataroom

    run_dir = Path(run_dir)
    st = safefs.lstat(run_dir / "work", "dataroom") if (run_dir / "work").is_dir() else None
    dataroom = run_dir / "work" / "dataroom" if st is not None and stat.S_ISDIR(st.st_mode) else run_dir / "work" / ".no-dataroom"
    if (run_dir / POINTER).is_file():  # the shared read-only copy the run's work/dataroom showed (corpus.store)
        dataroom = run_dataroom(run_dir)
    return measure(dataroom, run_dir / "trace.jsonl", gold_files, golds, _given(run_dir), spans, observed_opens(run_dir), run_dir / "work")


def _given(run_dir: Path) -> Optional[Path]:
    """The dataroom a run was given, from its run_meta.json (a path relative to where it ran, or to the repository)."""
    try:
        source = json.loads((run_dir / "run_meta.json").read_text(encoding="utf-8"))["dataroom"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(source, str) or not source:
        return None
    path = Path(source)
    if path.is_absolute() or path.exists():
        return path
    return Path(__file__).resolve().parents[2] / path
