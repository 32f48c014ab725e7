"""Non-neural control policies that stand in for the chat model: control-keyword, control-dense, control-oracle.

Each drives the same harness, tools, logs and grading as a model does, with no LLM: it is an in-process
stand-in for searchbox.llm.ChatClient whose `chat()` reads the previous tool results from the messages
and answers with the next native tool call, one per step, until it writes ANSWER.md and ends with a
plain message. Usage is zero tokens. What each does:

- keyword: grep the question's rarest terms (document frequency measured with grep itself), read the
  file that the rarest terms point to, answer with its best-matching sentence.
- dense:   the same, but one search_dataroom(question) call picks the file (its top hit).
- oracle:  read the gold files and answer with their best-matching sentence: the reader's upper bound.

The reader is shared: the question's entity terms (quoted titles, identifiers such as `jina-clip-v1`)
locate documents but are not evidence for the sentence, so sentences are scored by the remaining
terms, weighted by how rare they are among the file's own sentences. A front-matter line answers with
its value. A policy whose tool is not selected answers nothing and says why (in its final message's
reasoning), rather than crash.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Optional

from .config import ModelConfig
from .errors import ConfigError
from .llm import Response, Usage

POLICIES = ("keyword", "dense", "oracle")
NEEDS = {"keyword": ("grep", "read"), "dense": ("search_dataroom", "read"), "oracle": ("read",)}
MAX_GREPS = 4  # rarest-term probes per question
MAX_PAGES = 12  # read calls per file (each page is one tool output, capped by the harness)
ANSWER_CHARS = 300
CONTEXT_WINDOW = 1 << 20  # controls have no context limit; a large window keeps compaction out of their way

STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not of off on once only or other our out over
own same she should so some such than that the their them then there these they this those through to too under until
up very was we were what when where which while who whom why will with would you your give name tell does did""".split())
DOC_NOUNS = frozenset("article articles post posts blog document documents file files model models paper page".split())  # name the kind of document, not evidence in it
SYNONYMS = {"wrote": ("author",), "written": ("author",), "writer": ("author",), "authored": ("author",), "when": ("date",)}
QUOTED = re.compile(r'"([^"]{3,})"|“([^”]{3,})”|(?<!\w)\'([^\']{3,})\'(?!\w)')
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]|[A-Za-z0-9]")
POINTER = re.compile(r'read\(path="([^"]+)"\)')
READ_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
MORE_LINES = re.compile(r"\[(\d+) more lines; read with offset=(\d+)\]")
GREP_FILE = re.compile(r"^(dataroom/.+?):\d+:")
FRONT_LINE = re.compile(r"^([A-Za-z_][\w-]*):\s*(.+)$")
ISO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})T\d{2}:\d{2}")
RX_META = re.compile(r"([\\.^$*+?()\[\]{}|])")


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
    """Terms to grep, most likely rare first: entity names, then longer content words."""
    content = sorted(content_terms(question), key=lambda t: (-len(t), t.lower()))
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


def units(text: str) -> list[str]:
    """Candidate answers of a document: front-matter lines, list and table rows, and prose sentences.

    Prose paragraphs are joined across line wraps before splitting into sentences; headings are left out
    (a title restates the question, it does not answer it).
    """
    body, out = text, []
    front = re.match(r"\A---\r?\n(.*?)\r?\n---\r?\n", text, re.DOTALL)
    if front:
        out += [ln.strip() for ln in front.group(1).splitlines() if ln.strip()]
        body = text[front.end():]
    for para in re.split(r"\n\s*\n", body):
        lines = [ln.strip() for ln in para.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            continue
        if any(re.match(r"([-*+|>]|\d+[.)]\s|\S+,\S+,)", ln) for ln in lines):
            out += lines  # lists, tables and CSV rows stay one unit per line
            continue
        joined = " ".join(lines)
        out += [u.strip() for u in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", joined) if u.strip()]
    return out


def best_sentence(question: str, texts: list[str]) -> str:
    """The unit of the texts that best matches the question's evidence terms; entity names only break ties.

    Weights are inverse unit frequencies within the texts read, so a word on every line counts for little.
    """
    candidates = [u for t in texts for u in units(t)]
    if not candidates:
        return ""
    stems_per_unit = [{stem(w) for w in words(u)} for u in candidates]
    evidence = scoring_stems(question)
    entity = {stem(w) for t in entity_terms(question) for w in words(t)} - evidence
    n = len(candidates)
    idf = {s: math.log((n + 1) / (0.5 + sum(s in su for su in stems_per_unit))) for s in evidence | entity}

    def score(i: int) -> tuple:
        su = stems_per_unit[i]
        return (round(sum(idf[s] for s in evidence if s in su), 9), round(sum(idf[s] for s in entity if s in su), 9),
                -len(candidates[i]), -i)

    return as_answer(candidates[max(range(n), key=score)])


def as_answer(unit: str) -> str:
    """A front-matter `key: value` line answers with its value (a timestamp as its date); prose as itself."""
    match = FRONT_LINE.match(unit)
    if match and not unit.endswith(":"):
        value = match.group(2).strip().strip("\"'")
        iso = ISO_TIME.match(value)
        return iso.group(1) if iso else value
    return unit[:ANSWER_CHARS]


# ---- reading tool results ---------------------------------------------------------------------
def numbered_text(read_output: str) -> tuple[list[tuple[int, str]], Optional[int]]:
    """(line number, text) pairs of a read() output, and the offset to continue from (None when done)."""
    lines = [(int(m.group(1)), m.group(2)) for m in map(READ_LINE.match, read_output.splitlines()) if m]
    if "[output truncated:" in read_output and lines:
        last = lines.pop()  # the cap may have cut the last line: read it again from its start
        return lines, last[0]
    more = MORE_LINES.search(read_output)
    return lines, int(more.group(2)) if more else None


def grep_files(output: str) -> tuple[dict[str, int], bool]:
    """Matching lines per file of a grep output (paths relative to work/), and whether the output was cut."""
    counts: dict[str, int] = {}
    for m in map(GREP_FILE.match, output.splitlines()):
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts, "[output truncated:" in output


def rg_escape(term: str) -> str:
    return RX_META.sub(r"\\\1", term)


# ---- the stand-in client ----------------------------------------------------------------------
@dataclass
class _Plan:
    """What the policy knows so far."""

    greps: list[str] = field(default_factory=list)  # terms still to probe
    df: dict[str, dict[str, int]] = field(default_factory=dict)  # term -> {file: matching lines}
    truncated: set[str] = field(default_factory=set)  # terms whose grep output was cut (very common)
    files: list[str] = field(default_factory=list)  # files still to read (relative to work/)
    texts: list[str] = field(default_factory=list)  # text of the files read
    lines: list[str] = field(default_factory=list)  # the file being read, so far
    offset: int = 1  # where the next page of that file starts
    pages: int = 0
    delivered: Optional[tuple[str, dict]] = None  # delivery=file: the call whose output sits in files[0]
    answer: Optional[str] = None
    reason: str = ""
    wrote: bool = False
    done: bool = False


class ControlClient:
    """A ChatClient stand-in that plays one control policy over the harness's own tools."""

    def __init__(self, policy: str, cfg: ModelConfig, question: str, gold_files: list[str]):
        if policy not in POLICIES:
            raise ConfigError(f"model.policy={policy!r}: expected one of {', '.join(POLICIES)}")
        self.policy, self.cfg, self.question = policy, cfg, question
        self.gold_files = list(gold_files or [])
        self.plan = _Plan()
        self.steps = 0
        self._pending: Optional[tuple[str, dict]] = None  # the call whose result the next request carries
        self.deadline: Optional[float] = None  # set by run.execute like on ChatClient; nothing here waits

    # ---- the ChatClient surface -----------------------------------------------------------
    def chat(self, payload: dict, timeout_s: float | None = None, deadline: float | None = None) -> Response:
        """The next step; a policy computes in microseconds, so timeouts and deadlines never bind."""
        start = time.monotonic()
        json_mode = "tools" not in payload and "response_format" in payload
        if self._pending is not None:
            self._absorb(self._pending, _last_result(payload.get("messages") or []) or "")
            self._pending = None
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
        if p.greps:
            term = p.greps.pop(0)
            return "grep", {"pattern": rg_escape(term), "path": "dataroom", "ignore_case": True}
        if self.policy == "keyword" and not p.files and not p.texts and p.answer is None:
            best = self._best_grep_file()
            if best is None:
                return self._give_up("no question term occurs in the dataroom: no answer")
            p.files = [best]
        if p.files:
            return self._read_call()
        if p.answer is None:
            if not p.texts:
                return self._give_up(p.reason or "nothing was found to read: no answer")
            p.answer = best_sentence(self.question, p.texts)
            if not p.answer:
                return self._give_up("the file read has no text: no answer")
        if p.answer and "write" in offered and not p.wrote:
            p.wrote = True
            return "write", {"path": "ANSWER.md", "content": p.answer + "\n"}
        return None

    def _start(self, offered: set[str]) -> Optional[tuple[str, dict]]:
        p = self.plan
        missing = [t for t in NEEDS[self.policy] if t not in offered]
        if missing:
            return self._give_up(f"control-{self.policy} needs the {', '.join(missing)} tool(s), which this run's "
                                 f"tool selection does not offer ({', '.join(sorted(offered)) or 'none'}): no answer")
        if self.policy == "dense":
            return "search_dataroom", {"query": self.question, "k": 8}
        if self.policy == "keyword":
            p.greps = probe_terms(self.question)
            return None if p.greps else self._give_up("the question has no searchable terms: no answer")
        p.files = [g if g.startswith("dataroom/") else f"dataroom/{g}" for g in self.gold_files]
        return None if p.files else self._give_up("control-oracle has no gold files for this question: no answer")

    def _read_call(self) -> tuple[str, dict]:
        return "read", {"path": self.plan.files[0], "offset": self.plan.offset, "limit": 2000}

    def _best_grep_file(self) -> Optional[str]:
        """The file the rarest probed terms point to: tf-idf, sum over terms of (1 + ln lines) / files matched.

        A cut grep output means a very common term: its file count is taken as ten times what was shown.
        """
        scores: dict[str, float] = {}
        for term, files in self.plan.df.items():
            df = len(files) * (10 if term in self.plan.truncated else 1)
            for f, lines in files.items():
                scores[f] = scores.get(f, 0.0) + (1 + math.log(lines)) / df
        return min(scores, key=lambda f: (-scores[f], f)) if scores else None

    def _give_up(self, reason: str) -> None:
        self.plan.answer, self.plan.reason = "", reason
        return None

    # ---- folding results in ------------------------------------------------------------------
    def _absorb(self, call: tuple[str, dict], text: str) -> None:
        name, args = call
        p = self.plan
        pointer = POINTER.search(text) if text.startswith("Result written to") else None
        if pointer and name != "read":  # delivery=file: the output waits in a file
            p.files.insert(0, pointer.group(1))
            p.delivered = call
        elif name == "read":
            self._absorb_read(text)
        elif name == "grep":
            files, cut = grep_files(text) if not text.startswith("Error") else ({}, False)
            term = re.sub(r"\\(.)", r"\1", args.get("pattern", ""))
            p.df[term] = files
            if cut:
                p.truncated.add(term)
        elif name == "search_dataroom":
            self._absorb_search(text)

    def _absorb_read(self, text: str) -> None:
        p = self.plan
        if not p.files:
            return
        if text.startswith("Error"):
            self._finish_file(None)
            return
        lines, resume = numbered_text(text)
        if resume is not None and resume == p.offset and not lines:
            # one line longer than the output cap: keep what was shown and move past it
            lines, resume = [(p.offset, text.split("\t", 1)[-1])], p.offset + 1
        p.lines.extend(t for _, t in lines)
        p.pages += 1
        if resume is not None and p.pages < MAX_PAGES:
            p.offset = resume
            return
        self._finish_file("\n".join(p.lines))

    def _finish_file(self, whole: Optional[str]) -> None:
        p = self.plan
        p.files.pop(0)
        p.lines, p.offset, p.pages = [], 1, 0
        if p.delivered is not None:
            call, p.delivered = p.delivered, None
            self._absorb(call, whole or "")  # the delivered tool output, now read
        elif whole is not None:
            p.texts.append(whole)

    def _absorb_search(self, text: str) -> None:
        match = re.search(r'"path":\s*"((?:[^"\\]|\\.)*)"', text)
        if match:
            path = json.loads(f'"{match.group(1)}"')
            self.plan.files = [path if path.startswith("dataroom/") else f"dataroom/{path}"]
        else:
            self.plan.reason = "search_dataroom returned no results: no answer"

    def _final_message(self, json_mode: bool) -> dict:
        p = self.plan
        content = p.answer or ""
        message = {"role": "assistant", "content": json.dumps({"answer": content}) if json_mode else content}
        if not content and p.reason:
            # The reason goes where the trace keeps it but the ANSWER.md backstop never reads it.
            message["reasoning_content"] = p.reason
        return message


def _offered(payload: dict) -> set[str]:
    """Tool names the request offers: native `tools`, or the constrained-JSON schema's variants."""
    if payload.get("tools"):
        return {t.get("function", t).get("name", "") for t in payload["tools"]}
    schema = (((payload.get("response_format") or {}).get("json_schema") or {}).get("schema") or {})
    return {v["properties"]["tool"]["const"] for v in schema.get("anyOf", []) if "tool" in v.get("properties", {})}


def _last_result(messages: list[dict]) -> Optional[str]:
    """The newest tool result: a `tool` message (native) or a `Result of ...` user message (constrained JSON)."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            return m.get("content") or ""
        if m.get("role") == "user" and str(m.get("content", "")).startswith("Result of "):
            return str(m["content"]).split("\n", 1)[1] if "\n" in m["content"] else ""
        if m.get("role") == "assistant":
            return None
    return None


def make_control(policy: str, cfg: ModelConfig, question: str, gold_files: list[str]) -> ControlClient:
    """The stand-in client run.execute uses when cfg.model.policy is set (no server is started)."""
    return ControlClient(policy, cfg, question, gold_files)
