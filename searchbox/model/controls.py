"""Non-neural control policies that stand in for the chat model: control-keyword, control-dense, control-oracle.

Each drives the same harness, tools, logs and grading as a model does, with no LLM: it is an in-process
stand-in for searchbox.model.llm.ChatClient whose `chat()` answers with the next native tool call, one per step,
until it writes ANSWER.md and ends with a plain message. Usage is zero tokens. Every control reads the
tools' structured results (the `data` the harness keeps beside each tool message in trace.jsonl), never
the rendered text a model reads, so rewording a tool's message moves no control. With delivery=file a
result waits in a file: the control opens it with `read`, as a model would, and decodes what it read
with the tool's own decoder.

- keyword: grep the question's rarest terms, read the file they point to.
- dense:   one search_dataroom(question) call, read its top hit.
- oracle:  read the gold files: *gold retrieval + the same reader*, so the gap between the oracle and the
           others is retrieval, and the oracle's own misses are the reader's.

One reader serves all three (`Reader`): it strips markup (HTML, markdown links and images, bookmark cards
that describe another page), prefers a front-matter field whose name answers the question (`authors:` for
"who wrote", `license:` for a license) and answers with its value, and otherwise picks the prose sentence
that best matches the question's terms. A multi-hop question ("the model that superseded it", "the article
... announces a model") is answered through both documents: the reader finds the name the first document
links to (its `deprecated_by`, `release_blog`, or the model a post is about), the policy fetches that
document (grep for the name, a search for it, or the second gold file), and the answer comes from it.
A policy whose tool is not selected answers nothing and says why (in its final message's reasoning).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping, Optional

from ..corpus import markup
from ..config import ModelConfig
from ..errors import ConfigError
from .llm import Response, Usage

POLICIES = ("keyword", "dense", "oracle")
NEEDS = {"keyword": ("grep", "read"), "dense": ("search_dataroom", "read"), "oracle": ("read",)}
MAX_GREPS = 4  # rarest-term probes per question
MAX_PAGES = 12  # read calls per file (each page is one tool output, capped by the harness)
READ_LIMIT = 2000  # lines asked per read
ANSWER_CHARS = 300
CONTEXT_WINDOW = 1 << 20  # controls have no context limit; a large window keeps compaction out of their way

STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not of off on once only or other our out over
own same she should so some such than that the their them then there these they this those through to too under until
up very was we were what when where which while who whom why will with would you your give name tell does did""".split())
DOC_NOUNS = frozenset("article articles post posts blog document documents file files model models paper page".split())  # name the kind of document, not evidence in it
SYNONYMS = {"wrote": ("author",), "written": ("author",), "writer": ("author",), "authored": ("author",), "when": ("date",),
            "distributed": ("license",), "count": ("size",)}
# question words that ask through a link to another document -> the front-matter field that holds the link
RELATIONS = (("supersed", "deprecated_by"), ("successor", "deprecated_by"), ("replac", "deprecated_by"), ("announc", "release_blog"))
QUOTED = re.compile(r'"([^"]{3,})"|“([^”]{3,})”|(?<!\w)\'([^\']{3,})\'(?!\w)')
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]|[A-Za-z0-9]")
FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)
FIELD = re.compile(r"^([A-Za-z_][\w-]*):\s*(.*)$")
ISO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})T\d{2}:\d{2}")
MODEL_NAME = re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9.]*[A-Za-z0-9])+(?![\w-])")  # jina-clip-v2, ReaderLM-v2
RX_META = re.compile(r"([\\.^$*+?()\[\]{}|])")


# ---- what a control needs --------------------------------------------------------------------
def missing_tools(policy: str, offered: Iterable[str]) -> list[str]:
    """The tools a control policy needs (NEEDS) that the run does not offer."""
    have = set(offered)
    return [t for t in NEEDS[policy] if t not in have]


def cannot_act(policy: Optional[str], tools: Iterable[str], answered: bool) -> str:
    """Why a run could not act at all ('' when it could): a control policy whose tools are not all among the run's tools,
    which answered nothing. Such a run scores 0 by construction; it is no result about the control or the tier (dense
    under grep_only has nothing to call), so its grades are missing (None), never 0 (grading.grade, analysis.frames)."""
    if not isinstance(policy, str) or policy not in NEEDS or answered:
        return ""
    missing = missing_tools(policy, tools)
    return f"control-{policy} needs {', '.join(missing)}, which this tool selection does not offer" if missing else ""


def row_cannot_act(row: Mapping[str, Any]) -> str:
    """cannot_act of a runs.parquet row: its served policy (or configured one), its enabled tools and whether it answered."""
    policy = row.get("served_policy") if "served_policy" in row else row.get("model.policy")
    tools = row.get("tools_enabled")
    if not isinstance(tools, str):  # a row that does not say its tools says nothing of what it could do
        return ""
    return cannot_act(policy if isinstance(policy, str) else None, tools.split(","), row.get("answer_present") in (True, 1))


# ---- the reader ------------------------------------------------------------------------------
def stem(word: str) -> str:
    """A crude English stem so `released` meets `release_date` and `published` meets `published_at`."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "s", "e"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    return w


def words(text: str) -> list[str]:
    """Lower-case words, splitting identifiers such as `parameter_size` into their parts."""
    return [p for w in WORD.findall(text) for p in re.split(r"[._-]+", w.lower()) if p]


def entity_terms(question: str) -> list[str]:
    """What names the documents: quoted phrases, then identifier-like tokens (digits, hyphens, inner capitals)."""
    phrases = [next(g for g in m.groups() if g) for m in QUOTED.finditer(question)]
    rest = QUOTED.sub(" ", question)
    tokens = [t.rstrip(".") for t in WORD.findall(rest)]
    idents = [t for t in tokens if re.search(r"\d|-|[a-z][A-Z]", t) and t.lower() not in STOPWORDS]
    # runs of capitalised words after the first word are names ("the Gannet Rock lighthouse")
    names, run = [], []
    for i, t in enumerate(tokens + [""]):
        if i > 0 and t[:1].isupper() and t.lower() not in STOPWORDS:
            run.append(t)
        elif run:
            names.append(" ".join(run))
            run = []
    return list(dict.fromkeys(phrases + idents + names))


def content_terms(question: str) -> list[str]:
    """Question words that are neither stopwords nor entity names, in question order."""
    rest = QUOTED.sub(" ", question)
    entity = {w.lower() for t in entity_terms(question) for w in [t, *t.split()]}
    out = []
    for token in WORD.findall(rest):
        t = token.rstrip(".")
        if t.lower() in STOPWORDS or t.lower() in DOC_NOUNS or t.lower() in entity or len(t) < 3:
            continue
        out.append(t)
    return list(dict.fromkeys(out))


def probe_terms(question: str) -> list[str]:
    """Terms to grep, most likely rare first: entity names, then longer content words (not a word that asks through a
    link, "superseded": that is the next hop's business)."""
    content = sorted((t for t in content_terms(question) if not any(stem(t).startswith(w) for w, _ in RELATIONS)),
                     key=lambda t: (-len(t), t.lower()))
    return (entity_terms(question) + content)[:MAX_GREPS]


def scoring_stems(question: str) -> set[str]:
    """Stems that are evidence for an answer sentence (entity names excluded, a few synonyms added)."""
    entity = {stem(w) for t in entity_terms(question) for w in words(t)}
    out = set()
    for t in content_terms(question):
        for w in words(t):
            if w in STOPWORDS:
                continue
            out.add(stem(w))
            out.update(stem(s) for s in SYNONYMS.get(w, ()))
    return out - entity


def strip_markup(body: str) -> str:
    """A document body as prose (searchbox.corpus.markup: bookmark cards about another page dropped, tags and link targets removed)."""
    return markup.strip(body)


@dataclass(frozen=True)
class Doc:
    """A document as the reader sees it: its front-matter fields (lists folded into one value) and its prose units."""

    fields: dict[str, str]
    units: list[str]

    @classmethod
    def of(cls, text: str) -> "Doc":
        fields: dict[str, str] = {}
        body, front = text, FRONT_MATTER.match(text)
        if front:
            body, key = text[front.end():], None
            for line in front.group(1).splitlines():
                m = FIELD.match(line)
                if m and not line[:1].isspace():
                    key = m.group(1)
                    fields[key] = m.group(2).strip().strip("\"'")
                elif key and line.strip().startswith("- "):  # a list item belongs to the field above it
                    item = line.strip()[2:].strip().strip("\"'")
                    fields[key] = f"{fields[key]}, {item}" if fields[key] else item
        return cls(fields, prose_units(strip_markup(body)))

    def names(self) -> set[str]:
        """What the document is, by name: its model_name, slug and title (lower case)."""
        return {self.fields[k].lower() for k in ("model_name", "slug", "title") if self.fields.get(k)}


def prose_units(body: str) -> list[str]:
    """Candidate answers in a body: list and table rows as they are, paragraphs split into sentences (headings left out:
    a title restates the question, it does not answer it)."""
    out = []
    for para in re.split(r"\n\s*\n", body):
        lines = [" ".join(ln.split()) for ln in para.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        lines = [ln for ln in lines if re.search(r"[A-Za-z0-9]", ln)]
        if not lines:
            continue
        if any(re.match(r"([-*+|>]|\d+[.)]\s|\S+,\S+,)", ln) for ln in lines):
            out += [ln for ln in lines if len(words(ln)) > 1 or "," in ln]  # a bare "- license" is a tag, not an answer
            continue
        joined = " ".join(lines)
        out += [u.strip() for u in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", joined) if u.strip()]
    return out


def field_value(value: str) -> str:
    """A front-matter value as an answer (a timestamp as its date)."""
    iso = ISO_TIME.match(value)
    return iso.group(1) if iso else value[:ANSWER_CHARS]


class Reader:
    """Answers one question from the documents a policy read; shared by every control."""

    def __init__(self, question: str):
        self.question = question
        self.evidence = scoring_stems(question)
        self.entity = {stem(w) for t in entity_terms(question) for w in words(t)} - self.evidence
        qstems = {stem(w) for w in words(QUOTED.sub(" ", question))}  # a quoted title's words ask nothing
        self.link = next((key for word, key in RELATIONS if any(s.startswith(word) for s in qstems)), None)

    # ---- multi-hop ----------------------------------------------------------------------------
    def bridge(self, text: str) -> Optional[str]:
        """The name of the document this one links to through the question's relation (None when single-hop or none)."""
        if self.link is None:
            return None
        doc = Doc.of(text)
        value = doc.fields.get(self.link, "")
        if value:
            first = value.split(",")[0].strip()
            return first.rstrip("/").rsplit("/", 1)[-1] if self.link == "release_blog" else first
        if self.link == "release_blog" and "model_name" not in doc.fields:  # a post that announces a model: the one it names most
            mine = doc.names()
            counts = Counter(m for u in doc.units for m in MODEL_NAME.findall(u) if re.search(r"\d", m) and m.lower() not in mine)
            return counts.most_common(1)[0][0] if counts else None
        return None

    def target(self, texts: list[str]) -> Optional[int]:
        """Which text the first one's link leads to (a multi-hop question's answer document), if it was read."""
        for i, text in enumerate(texts):
            name = self.bridge(text)
            if name:
                hits = [j for j, other in enumerate(texts) if j != i and name.lower() in Doc.of(other).names()]
                if hits:
                    return hits[0]
        return None

    # ---- the answer ------------------------------------------------------------------------------
    def answer(self, texts: list[str]) -> str:
        """The answer from the texts read: for a multi-hop question, from the document the link leads to (none without it)."""
        if self.link is not None:
            j = self.target(texts)
            return self.best([texts[j]]) if j is not None else ""
        return self.best(texts)

    def best(self, texts: list[str]) -> str:
        """A front-matter field whose name answers the question, else the best-matching prose unit."""
        docs = [Doc.of(t) for t in texts]
        fields = [(k, v) for d in docs for k, v in d.fields.items() if v]
        scored = [(len(self.evidence & {stem(w) for w in words(k)}), -i, v) for i, (k, v) in enumerate(fields)]
        if scored and max(scored)[0] > 0:
            return field_value(max(scored)[2])
        return self.sentence([u for d in docs for u in d.units])

    def sentence(self, candidates: list[str]) -> str:
        """The unit that best matches the question's evidence terms; entity names only break ties. Weights are inverse
        unit frequencies within the texts read, so a word on every line counts for little."""
        if not candidates:
            return ""
        stems_per_unit = [{stem(w) for w in words(u)} for u in candidates]
        n = len(candidates)
        idf = {s: math.log((n + 1) / (0.5 + sum(s in su for su in stems_per_unit))) for s in self.evidence | self.entity}

        def score(i: int) -> tuple:
            su = stems_per_unit[i]
            return (round(sum(idf[s] for s in self.evidence if s in su), 9), round(sum(idf[s] for s in self.entity if s in su), 9),
                    -len(candidates[i]), -i)

        return candidates[max(range(n), key=score)][:ANSWER_CHARS]


def best_sentence(question: str, texts: list[str]) -> str:
    """The shared reader's answer (kept as a function: tests and notebooks call it)."""
    return Reader(question).answer(texts)


def rg_escape(term: str) -> str:
    return RX_META.sub(r"\\\1", term)


def _glob_escape(term: str) -> str:
    return re.sub(r"([*?\[\]])", r"[\1]", term)


# ---- tool results, as data --------------------------------------------------------------------
class Results:
    """The newest tool result of a run, read from the data the harness keeps beside it in trace.jsonl."""

    def __init__(self, trace: Optional[Path]):
        self.trace, self.offset, self.last = (Path(trace) if trace else None), 0, None

    def newest(self) -> Optional[dict]:
        """The newest tool message (with its `data`), or None when the run has none."""
        if self.trace is None or not self.trace.is_file():
            return None
        with open(self.trace, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next call
        self.offset += end
        for line in chunk[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            message = event.get("message") if isinstance(event, dict) and event.get("type") == "message" else None
            if isinstance(message, dict) and message.get("role") == "tool":
                self.last = message
        return self.last


def grep_matches(data: Any) -> tuple[list[dict], bool]:
    """The matches a grep's data says the model saw, and whether there were more."""
    if not isinstance(data, dict) or not isinstance(data.get("matches"), list):
        return [], False
    shown = data.get("shown", len(data["matches"]))
    return data["matches"][:shown], bool(data.get("truncated"))


def search_hits(data: Any) -> list[dict]:
    """The results a search's data says the model saw, best first."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return []
    return data["results"][: data.get("shown", len(data["results"]))]


def decode(tool: str, text: str) -> Any:
    """A delivered result's text (what a model reads in the file) as the data the tool gives beside it."""
    if tool == "grep":
        from ..tools.builtins import decode_grep

        return decode_grep(text)
    try:
        return json.loads(text)
    except ValueError:
        return None


# ---- the stand-in client ----------------------------------------------------------------------
@dataclass
class _Plan:
    """What the policy knows so far."""

    greps: list[str] = field(default_factory=list)  # terms still to probe
    df: dict[str, dict[str, int]] = field(default_factory=dict)  # term -> {file: matching lines}
    truncated: set[str] = field(default_factory=set)  # terms whose grep output was cut (very common)
    files: list[str] = field(default_factory=list)  # files still to read (relative to work/)
    read: list[str] = field(default_factory=list)  # files read so far
    texts: list[str] = field(default_factory=list)  # text of the files read
    lines: list[str] = field(default_factory=list)  # the file being read, so far
    offset: int = 1  # where the next page of that file starts
    pages: int = 0
    hopped: bool = False  # a multi-hop question's second document was looked for
    hop: Optional[str] = None  # the name being looked for
    delivered: Optional[tuple[str, dict]] = None  # delivery=file: the call whose output sits in files[0]
    answer: Optional[str] = None
    reason: str = ""
    wrote: bool = False
    done: bool = False


class ControlClient:
    """A ChatClient stand-in that plays one control policy over the harness's own tools."""

    def __init__(self, policy: str, cfg: ModelConfig, question: str, gold_files: list[str], trace: Optional[Path] = None):
        if policy not in POLICIES:
            raise ConfigError(f"model.policy={policy!r}: expected one of {', '.join(POLICIES)}")
        self.policy, self.cfg, self.question = policy, cfg, question
        self.gold_files = list(gold_files or [])
        self.reader = Reader(question)
        self.results = Results(trace)
        self.plan = _Plan()
        self.steps = 0
        self._pending: Optional[tuple[str, dict]] = None  # the call whose result the next request carries
        self._k: dict = {"k": 8}
        self.deadline: Optional[float] = None  # set by run.execute like on ChatClient; nothing here waits

    # ---- the ChatClient surface -----------------------------------------------------------
    def chat(self, payload: dict, timeout_s: float | None = None, deadline: float | None = None, watch: Any = None) -> Response:
        """The next step; a policy computes in microseconds, so timeouts and deadlines never bind, and its reply never
        loops (`watch`, the JSON protocol's loop watcher, has nothing to stop)."""
        start = time.monotonic()
        json_mode = "tools" not in payload and "response_format" in payload
        if self._pending is not None:
            newest = self.results.newest() or {}
            self._absorb(self._pending, newest.get("data"))
            self._pending = None
        self._k = {"k": 8} if _takes(payload, "search_dataroom", "k") else {}  # the model's k where the tool takes one
        call = None if self.plan.done else self._next(_offered(payload))
        if call is None:
            self.plan.done = True
            message, finish = self._final_message(json_mode), "stop"
        else:
            self.steps += 1
            self._pending = call
            name, args = call
            if json_mode:
                message = {"role": "assistant", "content": json.dumps({"tool": name, "arguments": args})}
            else:
                message = {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"control_{self.steps}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        return Response(message=message, usage=Usage(0, 0, 0), latency_s=time.monotonic() - start, finish_reason=finish)

    def get_json(self, path: str) -> None:
        return None

    def get_text(self, path: str) -> None:
        return None

    def context_window(self) -> int:
        return self.cfg.context_window or CONTEXT_WINDOW

    def close(self) -> None:
        """Nothing to release."""

    # ---- the policy -------------------------------------------------------------------------
    def _next(self, offered: set[str]) -> Optional[tuple[str, dict]]:
        """The next tool call, or None when the policy is done (with an answer, or a reason for none)."""
        p = self.plan
        if self.steps == 0:
            first = self._start(offered)
            if first is not None or p.answer is not None:
                return first
        if p.delivered is not None:  # delivery=file: open the delivered result before anything else
            return self._read_call()
        if p.greps and p.hop and p.df.get(p.hop):
            p.greps = []  # a file is named after the hop's name: no need to look further
        if p.greps:
            term = p.greps.pop(0)
            return "grep", {"pattern": rg_escape(term), "path": "dataroom", "ignore_case": True}
        if self.policy == "keyword" and not p.files and p.answer is None and (not p.texts or p.hop):
            best = self._best_grep_file()
            if best is None:
                return self._give_up(f"no file names {p.hop!r}: no answer" if p.hop else "no question term occurs in the dataroom: no answer")
            p.files = [best]
        if p.files:
            return self._read_call()
        if p.answer is None and self.reader.link is not None and self.policy != "oracle" and not p.hopped and p.texts:
            hop = self._hop()  # a multi-hop question: look for the document the first one links to
            if hop is not None:
                return hop
        if p.answer is None:
            if not p.texts:
                return self._give_up(p.reason or "nothing was found to read: no answer")
            p.answer = self.reader.answer(p.texts)
            if not p.answer:
                return self._give_up(p.reason or ("the documents read hold no link to follow: no answer" if self.reader.link
                                                  else "the file read has no text: no answer"))
        if p.answer and "write" in offered and not p.wrote:
            p.wrote = True
            return "write", {"path": "ANSWER.md", "content": p.answer + "\n"}
        return None

    def _start(self, offered: set[str]) -> Optional[tuple[str, dict]]:
        p = self.plan
        missing = missing_tools(self.policy, offered)
        if missing:
            return self._give_up(f"control-{self.policy} needs the {', '.join(missing)} tool(s), which this run's "
                                 f"tool selection does not offer ({', '.join(sorted(offered)) or 'none'}): no answer")
        if self.policy == "dense":
            return "search_dataroom", {"query": self.question, **self._k}
        if self.policy == "keyword":
            p.greps = probe_terms(self.question)
            return None if p.greps else self._give_up("the question has no searchable terms: no answer")
        p.files = [g if g.startswith("dataroom/") else f"dataroom/{g}" for g in self.gold_files]
        return None if p.files else self._give_up("control-oracle has no gold files for this question: no answer")

    def _hop(self) -> Optional[tuple[str, dict]]:
        p = self.plan
        p.hopped = True
        name = self.reader.bridge(p.texts[-1])
        if not name:
            p.reason = "the document read names no document to follow the question's link to: no answer"
            return None
        p.hop = name
        if self.policy == "dense":
            return "search_dataroom", {"query": name, **self._k}
        p.df.clear()
        p.truncated.clear()
        p.greps = [name]  # then over every file, if no file is named after it
        return "grep", {"pattern": rg_escape(name), "path": "dataroom", "glob": f"*{_glob_escape(name)}*", "ignore_case": True}

    def _read_call(self) -> tuple[str, dict]:
        return "read", {"path": self.plan.files[0], "offset": self.plan.offset, "limit": READ_LIMIT}

    def _named(self, paths: list[str]) -> Optional[str]:
        """Among paths, a file named after what is looked for (the hop's name, else a name the question gives), if any."""
        names = {n.lower() for n in ([self.plan.hop] if self.plan.hop else entity_terms(self.question))}
        return next((f for f in paths if PurePosixPath(f).stem.lower() in names), None)

    def _best_grep_file(self) -> Optional[str]:
        """The file the rarest probed terms point to: tf-idf, sum over terms of (1 + ln lines) / files matched; on a hop,
        the file the name is the name of, when one is. A cut grep output means a very common term: its file count is
        taken as ten times what was shown."""
        scores: dict[str, float] = {}
        for term, files in self.plan.df.items():
            df = len(files) * (10 if term in self.plan.truncated else 1)
            for f, lines in files.items():
                if f not in self.plan.read:
                    scores[f] = scores.get(f, 0.0) + (1 + math.log(lines)) / df
        named = self._named(sorted(scores))
        self.plan.hop = None  # looked for: the next file read is the hop's
        return named or (min(scores, key=lambda f: (-scores[f], f)) if scores else None)

    def _give_up(self, reason: str) -> None:
        self.plan.answer, self.plan.reason = "", reason
        return None

    # ---- folding results in ------------------------------------------------------------------
    def _absorb(self, call: tuple[str, dict], data: Any) -> None:
        name, args = call
        p = self.plan
        if isinstance(data, dict) and data.get("delivered") and name != "read":  # delivery=file: the output waits in a file
            p.files.insert(0, data["delivered"])
            p.delivered = call
        elif name == "read":
            self._absorb_read(data)
        elif name == "grep":
            matches, cut = grep_matches(data)
            counts: dict[str, int] = {}
            for m in matches:
                counts[m["path"]] = counts.get(m["path"], 0) + 1
            term = re.sub(r"\\(.)", r"\1", args.get("pattern", ""))
            p.df[term] = counts
            if cut:
                p.truncated.add(term)
        elif name == "search_dataroom":
            paths = [h["path"] for h in search_hits(data) if isinstance(h.get("path"), str)]
            paths = [f if f.startswith("dataroom/") else f"dataroom/{f}" for f in paths]
            fresh = [f for f in paths if f not in p.read]
            pick = self._named(fresh) or (fresh[0] if fresh else None)
            if pick:
                p.files = [pick]
            else:
                p.reason = f"search_dataroom found nothing new for {p.hop!r}: no answer" if p.hop else "search_dataroom returned no results: no answer"
            p.hop = None

    def _absorb_read(self, data: Any) -> None:
        p = self.plan
        if not p.files:
            return
        if not isinstance(data, dict) or not isinstance(data.get("lines"), list):
            self._finish_file(None)  # an error (or a binary file): nothing to read
            return
        shown = data.get("shown", len(data["lines"]))
        p.lines.extend(str(row["text"]) for row in data["lines"][:shown])
        if shown == 0 and data.get("partial") and data["lines"]:
            p.lines.append(str(data["lines"][0]["text"])[: data["partial"]])  # one line longer than the cap: what was shown
        p.pages += 1
        if data.get("next") and p.pages < MAX_PAGES:
            p.offset = data["next"]
            return
        self._finish_file("\n".join(p.lines))

    def _finish_file(self, whole: Optional[str]) -> None:
        p = self.plan
        path = p.files.pop(0)
        p.lines, p.offset, p.pages = [], 1, 0
        if p.delivered is not None:
            call, p.delivered = p.delivered, None
            self._absorb(call, decode(call[0], whole or ""))  # the delivered tool output, now read
        elif whole is not None:
            p.read.append(path)
            p.texts.append(whole)

    def _final_message(self, json_mode: bool) -> dict:
        p = self.plan
        content = p.answer or ""
        message = {"role": "assistant", "content": json.dumps({"answer": content}) if json_mode else content}
        if not content and p.reason:
            # The reason goes where the trace keeps it but the ANSWER.md backstop never reads it.
            message["reasoning_content"] = p.reason
        return message


def _takes(payload: dict, tool: str, arg: str) -> bool:
    """Whether the request offers `tool` with the argument `arg` (search_dataroom has no k under retrieval.search_k)."""
    for t in payload.get("tools") or []:
        fn = t.get("function", t)
        if fn.get("name") == tool:
            return arg in ((fn.get("parameters") or {}).get("properties") or {})
    schema = (((payload.get("response_format") or {}).get("json_schema") or {}).get("schema") or {})
    for v in schema.get("anyOf", []):
        if ((v.get("properties") or {}).get("tool") or {}).get("const") == tool:
            return arg in ((((v.get("properties") or {}).get("arguments") or {}).get("properties")) or {})
    return False


def _offered(payload: dict) -> set[str]:
    """Tool names the request offers: native `tools`, or the constrained-JSON schema's variants."""
    if payload.get("tools"):
        return {t.get("function", t).get("name", "") for t in payload["tools"]}
    schema = (((payload.get("response_format") or {}).get("json_schema") or {}).get("schema") or {})
    return {v["properties"]["tool"]["const"] for v in schema.get("anyOf", []) if "tool" in v.get("properties", {})}


def make_control(policy: str, cfg: ModelConfig, question: str, gold_files: list[str], trace: Optional[Path] = None) -> ControlClient:
    """The stand-in client run.execute uses when cfg.model.policy is set (no server is started); it reads the tools'
    results from the run's trace.jsonl."""
    return ControlClient(policy, cfg, question, gold_files, trace)
