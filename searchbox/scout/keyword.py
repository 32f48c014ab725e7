"""The non-neural keyword control: grep rare query terms, read around the best hit, finish on its enclosing block.

It speaks the same protocol as a model (at most three actions per round, decided before their
results come back) and drives the same executor, so its rounds, refusals and references are
comparable with any model's; it spends no tokens.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from .executor import Match, Result

STOP = set("""
a about above after all also an and any are as at be been being by can could do does doing done each else for from get gets
given has have here how if in into is it its itself let lets make makes may might more most must not of on once one or other
our out over own should so some such than that the their them then there these they this those through to too under until
up use used uses using via was we were what when where which while who whom why will with within would you your
code codes implement implements implemented implementation implementations function functions method methods class classes
defined define defines definition module modules file files find located location repository repo logic handle handles
handled handling happen happens thing things part place way ways value values return returns returned
""".split())
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
DEF_LINE = re.compile(r"^(\s*)(?:@\w|(?:async\s+)?def\s|class\s|(?:export\s+)?(?:async\s+)?function\s|func\s|fn\s|pub\s|impl\s|struct\s|interface\s)")
HEAD = re.compile(r"^(\s*)(?:(?:async\s+)?def|class)\s+(\w+)")
SUFFIXES = ("ations", "ation", "ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "s")


@dataclass
class Term:
    text: str  # what the query said
    pattern: str  # the regex grepped
    stem: str  # lower-case form matched against lines and paths
    identifier: bool


def stem(word: str) -> str:
    low = word.lower()
    if low.endswith(("ied", "ies")) and len(low) > 5:
        return low[:-3] + "y"  # multiplied -> multiply, entries -> entry
    for suffix in SUFFIXES:
        if low.endswith(suffix) and len(low) - len(suffix) >= 4:
            return low[: -len(suffix)]
    return low


def terms(query: str) -> list[Term]:
    """Query terms, most specific first: quoted or code-like identifiers, then long rare-looking words."""
    out: dict[str, Term] = {}
    quoted = re.findall(r"[`'\"]([^`'\"]{2,60})[`'\"]", query)
    for token in quoted + IDENT.findall(query):
        last = token.split(".")[-1]
        code_like = token in quoted or "_" in last or "." in token or bool(re.search(r"[a-z][A-Z]", last)) or last.isupper() and len(last) > 1
        low = last.lower()
        if not last or low in out or (not code_like and (low in STOP or len(low) < 4)):
            continue
        if code_like:
            out[low] = Term(last, rf"\b{re.escape(last)}\b", low, True)
        else:
            s = stem(last)
            out[low] = Term(last, re.escape(s), s, False)
    ranked = sorted(out.values(), key=lambda t: (not t.identifier, -len(t.stem)))
    return ranked


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def enclosing_block(lines: dict[int, str], hit: int) -> tuple[int, int]:
    """The innermost def/class around line `hit` among the lines read ({number: text}); its header to its last body line."""
    start = None
    hit_indent = _indent(lines[hit]) if lines[hit].strip() else 10**6
    for n in range(hit, min(lines) - 1, -1):
        text = lines.get(n, "")
        m = HEAD.match(text)
        if m and (n == hit or _indent(text) < hit_indent):
            start = n
            break
    if start is None:
        return max(min(lines), hit - 3), min(max(lines), hit + 3)
    base = _indent(lines[start])
    if "{" in lines[start] and not lines[start].rstrip().endswith(":"):
        depth, end = 0, start
        for n in range(start, max(lines) + 1):
            depth += lines[n].count("{") - lines[n].count("}")
            end = n
            if depth <= 0 and n > start:
                break
        return start, end
    end = start
    in_header = True
    for n in range(start + 1, max(lines) + 1):
        text = lines[n]
        if not text.strip():
            continue
        if in_header and (text.strip()[0] in ")]" or _indent(text) > base):
            end = n
            if text.rstrip().endswith(":"):
                in_header = False
            continue
        in_header = False
        if _indent(text) <= base:
            break
        end = n
    return start, end


@dataclass
class KeywordPolicy:
    """Chooses actions from the query and the structured results of earlier rounds."""

    query: str
    max_actions: int = 3
    read_lines: int = 120
    queue: list[Term] = field(default_factory=list)
    matches: list[tuple[Optional[Term], Match]] = field(default_factory=list)
    searched_definitions: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    target: Optional[Match] = None
    window: Optional[dict[int, str]] = None
    window_path: str = ""

    def __post_init__(self) -> None:
        self.queue = terms(self.query)
        self.all_terms = list(self.queue)

    name = "keyword"

    def propose(self, rounds_left: int) -> list[dict]:
        """The next response: a list of actions {"action": name, ...arguments}."""
        if self.window is not None:
            lines = self.window
            hit = self.target.line if self.target and self.target.line in lines else min(lines)
            start, end = enclosing_block(lines, hit)
            return [{"action": "finish", "path": self.window_path, "start": start, "end": end}]
        if self.matches:
            self.target = self._best()
            read = self._read_action(self.target)
            if rounds_left > 1:
                return [read]
            # last round: read and cite in one response, without seeing the lines (the executor checks the range)
            return [read, {"action": "finish", "path": self.target.path, "start": self.target.line,
                           "end": min(read["end"], self.target.line + 10)}]
        if not self.queue or rounds_left <= 1:
            return [{"action": "not_found"}]
        actions = []
        if not self.searched_definitions:
            # definitions whose names contain a query term are the likeliest answers; one grep finds them all
            self.searched_definitions = True
            names = "|".join(re.escape(t.stem) if not t.identifier else re.escape(t.text) for t in self.queue[:6])
            actions.append({"action": "grep", "pattern": rf"\b(?:def|class|function|func|fn|struct|interface)\s+\w*(?:{names})"})
        batch, self.queue = self.queue[: self.max_actions - len(actions)], self.queue[self.max_actions - len(actions):]
        return actions + [{"action": "grep", "pattern": t.pattern} for t in batch]

    def observe(self, actions: list[dict], results: list[Result]) -> None:
        for act, res in zip(actions, results):
            if act["action"] == "grep" and res.ok:
                term = next((t for t in self.all_terms if t.pattern == act["pattern"]), None)
                found = res.data or []
                if term is not None:
                    self.counts[term.stem] = len({m.path for m in found})
                self.matches += [(term, m) for m in found]
            elif act["action"] == "read" and res.ok:
                path, first, last, lines = res.data
                self.window_path = path
                self.window = {n: text for n, text in enumerate(lines, first)}

    def _score(self, match: Match) -> float:
        low, path = match.text.lower(), match.path.lower()
        score = 0.0
        for t in self.all_terms:
            if t.stem in low:
                # rarer terms weigh more: fewer files matched means more specific
                score += 1.0 + 2.0 / math.log2(2 + self.counts.get(t.stem, 8))
            if t.stem in path:
                score += 0.5
        head = HEAD.match(match.text)
        if DEF_LINE.match(match.text):
            score += 1.0
        if head and any(t.stem in head.group(2).lower() for t in self.all_terms):
            score += 2.5
        if re.search(r"(^|/)(tests?|testing|docs?|examples?)(/|_)|test_|\.(rst|md|txt)$", path):
            score -= 2.0
        return score

    def _best(self) -> Match:
        return max((m for _, m in self.matches), key=lambda m: (self._score(m), -len(m.path), -m.line))

    def _read_action(self, match: Match) -> dict:
        before = 2 if DEF_LINE.match(match.text) else 40
        start = max(1, match.line - before)
        return {"action": "read", "path": match.path, "start": start, "end": start + self.read_lines - 1}
