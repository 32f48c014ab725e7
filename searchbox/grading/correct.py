"""The primary grade `correct`: the answer line asserts the gold (or an alias) and nothing contradicting it.

What it reads is the *claim* (grading/answer.py): the answer part's first line, joined with what it
introduces when it ends in a colon and with the rest of its list when it is a list item (its first
CLAIM_CHARS characters), and, after it, the values standing alone on lines of their own (an answer
that lists alternatives line by line offers them all). Then:
1. A claim that is raw document markup (HTML tags other than inline emphasis) asserts nothing.
2. Typed candidates are found in it (grading/candidates.py): licenses, dates, model ids, numbers with
   their scale and unit or counted noun, people and other named entities. The gold and each alias are
   read the same way: their candidates are the gold's *parts* ("Little Vell, 1856": a name and a year).
3. The claim is cut into clauses at sentence ends, semicolons, colons, commas, brackets, spaced dashes
   and before "but"/"however"/"whereas"/"although". Each candidate is then
   - *denied* when a negation covers it: "not", "n't", "never", "no", "neither", "nor", "none",
     "rather than", "instead of", "other than", "except", "unlike" deny what follows them in their
     clause ("It is not Apache-2.0"); "not"/"never"/"wrong"/"incorrect"/"false" with nothing after them
     deny what precedes them ("Apache-2.0 is not right"). "not only", "no later than", "no more than"
     and the like are no negations. A clause that retracts (a lone "no", "wrong", "wait", or one that
     opens with "actually", "correction", "I mean", "or rather", "scratch that") denies everything before it;
   - *offered* when its clause is a question (ends in "?") or hedged ("maybe", "perhaps", "possibly",
     "might", "may be", "not sure", "unsure", "uncertain", "unclear", "guess"): it asserts nothing but
     still competes ("Scott Martens, or maybe Han Xiao" offers two authors);
   - *asserted* otherwise.
4. The gold is asserted when an asserted candidate matches each of its parts, in any format the
   candidates read (timestamps, dates in words, SPDX long names, middle initials, "1.04 billion",
   a more precise number that rounds to the gold, "8,192" for "8K"), or when its tokens (normalize.py)
   occur in an asserted stretch of the claim.
5. Nothing may contradict it: every asserted or offered candidate of a kind the golds have (a bare
   value on a later line is offered) must agree with some gold part. Agreeing means: the same license, model id or date (a coarser date that fits:
   "April 2024"); the same person (middle initials and order aside) or a part of the name; a number
   that the gold rounds to ("0.6B" beside "597M") or the same quantity in another unit of the same
   dimension ("126 feet" beside "38.4 metres"). Numbers compete when they are bare or count the noun
   the gold's number counts; a number of another unit or noun ("8,192 tokens" beside a parameter
   count) is about something else, and so is one in a clause dated otherwise than the question ("in
   2023?" - "41,200, up from 36,900 in 2022"). People compete with people, other entities with
   entities. A candidate whose words repeat the question's is no claim ("the model jina-clip-v2 ...").
A wrong unit ("38.4 feet" for "38.4 metres") asserts nothing and contradicts the gold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Optional

from . import candidates as cand
from .candidates import Candidate, Quantity
from .normalize import contains, fold, tokens

CORRECT_VERSION = "correct-1"
CLAIM_CHARS = 2000  # of the claim read: an answer line is a sentence or a list, not a document
BARE_LINES = 200  # lines after the claim searched for bare values
BARE_CHARS = 120  # a longer line is prose, not a bare value

_NEGATION = re.compile(r"\b(?:not|never|cannot|neither|nor|none|no)\b|n['\u2019]t\b|\b(?:rather\s+than|instead\s+of|other\s+than|except|unlike)\b"
                       r"|\b(?:incorrect|wrong|false|mistaken)\b", re.IGNORECASE)
_PREDICATE = re.compile(r"not|never|cannot|n['\u2019]t|incorrect|wrong|false|mistaken", re.IGNORECASE)  # may deny what precedes
_NOT_NEGATION = re.compile(r"\b(?:not\s+only|not\s+just|not\s+until|not\s+least|not\s+to\s+mention|no\s+doubt|nothing\s+but|"
                           r"(?:no|not)\s+(?:later|earlier|more|less|fewer|sooner)\s+than)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|might|(?:may|could)\s+be|unsure|uncertain|unclear|not\s+sure|not\s+certain|guess)\b",
                    re.IGNORECASE)
_HEDGE_ALONE = re.compile(r"(?:maybe|perhaps|possibly|unsure|uncertain|unclear|i\s+guess|(?:i\s+am\s+|i'm\s+)?not\s+(?:sure|certain))",
                          re.IGNORECASE)
_RETRACT_ALONE = re.compile(r"(?:no|nope|nah|wrong|incorrect|false|not really|oops|wait|no wait|sorry|actually|actually no|correction|"
                            r"scratch that|strike that|or rather|rather|make that|i was wrong|that is wrong|that's wrong|that is incorrect|"
                            r"that's incorrect)", re.IGNORECASE)
_RETRACT_START = re.compile(r"(?:actually|correction|i mean|or rather|no wait|wait|scratch that|strike that|make that|on second thought)\b",
                            re.IGNORECASE)
_BOUNDARY = re.compile(r"[.!?;:](?=\s|$)|,(?=\s)|[()\[\]{}]|\s[-\u2013\u2014]+(?=\s)|\s(?=(?:but|however|whereas|although|though)\b)"
                       r"|\s(?=(?:no\s+wait|i\s+mean|or\s+rather|scratch\s+that)\b)", re.IGNORECASE)
_MARKUP = re.compile(r"</?(?!(?:b|strong|i|em|u|mark|code|sup|sub|br|small|s)\b)[a-z][a-z0-9]*\b[^>]*>", re.IGNORECASE)
_PUNCT = " \t*_\"'`.,!?;:()[]{}-\u2013\u2014"
_LIST_ITEM_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+")
_TYPED_ONLY = ("number", "date")  # golds with such a part are asserted by a typed candidate only (units, precision)


@dataclass
class Clause:
    start: int
    end: int
    question: bool = False
    hedged: bool = False
    retracted: bool = False


@dataclass
class Verdict:
    """What `correct` found in a claim, and why it says what it says."""

    value: float
    reason: str
    asserted: list[str] = field(default_factory=list)  # the candidates the claim asserts
    offered: list[str] = field(default_factory=list)  # offered only (questions, hedges)
    denied: list[str] = field(default_factory=list)  # negated or retracted
    contradicting: list[str] = field(default_factory=list)  # candidates that agree with no gold

    def as_dict(self) -> dict:
        return {"correct": None if math.isnan(self.value) else self.value, "reason": self.reason, "asserted": self.asserted,
                "offered": self.offered, "denied": self.denied, "contradicting": self.contradicting}


def correct(claim: str, golds: list[str], question: str = "", after: str = "") -> float:
    """1 when the claim asserts a gold and nothing contradicting it, else 0; NaN without gold (see the module docstring)."""
    return verdict(claim, golds, question, after).value


def bare_values(after: str) -> list[Candidate]:
    """Values on lines of their own after the claim ("Han Xiao" alone on a line): each line that, markup and
    punctuation aside, is one candidate and nothing else."""
    out = []
    for ln in fold(after or "").splitlines()[:BARE_LINES]:
        text = _LIST_ITEM_MARK.sub("", ln).strip(_PUNCT + "#>")
        found = cand.find(text) if 0 < len(text) <= BARE_CHARS else []
        if len(found) == 1 and found[0].start == 0 and found[0].end == len(text):
            out.append(found[0])
    return out


def verdict(claim: str, golds: list[str], question: str = "", after: str = "") -> Verdict:
    """`correct` with its reasons; `after`: the answer part's lines after the claim, whose bare values compete."""
    golds = [g for g in golds if g and g.strip()]
    if not golds:
        return Verdict(math.nan, "no gold answer")
    line = fold(claim or "").strip()[:CLAIM_CHARS]
    if not line:
        return Verdict(0.0, "no answer")
    if _MARKUP.search(line):
        return Verdict(0.0, "the answer line is document markup, not a claim")
    found = cand.find(line)
    clauses = _clauses(line, found)
    denied = _negations(line, clauses, found, golds)
    status = {id(c): _status(c, clauses, denied) for c in found}
    asserted = [c for c in found if status[id(c)] == "asserted"]
    stretches = _stretches(line, clauses, denied)
    parts = {g: cand.find(fold(g)) for g in golds}
    units = {p.value.unit for ps in parts.values() for p in ps if p.kind == "number" and p.value.unit}
    matched: list[Candidate] = []
    gold_hit = None
    for g, ps in parts.items():
        hits = [next((c for c in asserted if _asserts(c, p, units)), None) for p in ps]
        textual = not any(p.kind in _TYPED_ONLY for p in ps)  # names and model ids may match as words too ("scott martens")
        if (ps and all(hits)) or (textual and any(contains(s, [g]) for s in stretches)):
            gold_hit = gold_hit or g
            matched += [h for h in hits if h is not None]
    v = Verdict(0.0, "", [c.text for c in asserted], [c.text for c in found if status[id(c)] == "offered"],
                [c.text for c in found if status[id(c)] == "denied"])
    all_parts = [p for ps in parts.values() for p in ps]
    nouns = {p.value.noun for p in [*all_parts, *matched] if p.kind == "number" and p.value.noun}
    q_tokens = tokens(question)
    other_date = _about_another_date(found, clauses, question)
    v.contradicting = [c.text for c in found if status[id(c)] != "denied" and _competes(c, all_parts, units, nouns)
                       and not any(_agrees(c, p, units) for p in all_parts if p.kind == c.kind) and not _echo(c, q_tokens)
                       and not other_date(c)]
    for c in bare_values(after):  # a value alone on a later line is offered beside the answer
        v.offered.append(c.text)
        if _competes(c, all_parts, units, nouns) and not any(_agrees(c, p, units) for p in all_parts if p.kind == c.kind) \
                and not _echo(c, q_tokens):
            v.contradicting.append(c.text)
    if gold_hit is None:
        v.reason = "the gold is not asserted" + (" (it is only offered or denied)" if any(contains(line, [g]) for g in golds) else "")
    elif v.contradicting:
        v.reason = "the gold is asserted beside other candidates: " + "; ".join(v.contradicting)
    else:
        v.value, v.reason = 1.0, f"asserts {gold_hit!r} and nothing contradicting it"
    return v


# ---- reading the claim ----------------------------------------------------------------------------
def _clauses(line: str, found: list[Candidate]) -> list[Clause]:
    inside = lambda pos: any(c.start <= pos < c.end for c in found)  # a comma in "April 16, 2024" cuts nothing
    out, start = [], 0
    for m in _BOUNDARY.finditer(line):
        if inside(m.start()):
            continue
        out.append(Clause(start, m.start(), question=m[0] == "?"))
        start = m.end() if m[0].strip() else m.start()
    out.append(Clause(start, len(line)))
    out = [c for c in out if line[c.start:c.end].strip(_PUNCT)] or [Clause(0, len(line))]
    for k, c in enumerate(out):
        text = line[c.start:c.end].strip(_PUNCT)
        c.hedged = bool(_HEDGE.search(text))
        if _HEDGE_ALONE.fullmatch(text) and k:  # "Scott Martens (not sure)": the hedge is about the clause before
            out[k - 1].hedged = True
        if _RETRACT_ALONE.fullmatch(text) or _RETRACT_START.match(text):
            for earlier in out[:k]:
                earlier.retracted = True
    return out


def _negations(line: str, clauses: list[Clause], found: list[Candidate], golds: list[str]) -> list[tuple[int, int]]:
    denied = []
    for cl in clauses:
        text = _NOT_NEGATION.sub(lambda m: " " * len(m[0]), line[cl.start:cl.end])
        lead = len(text) - len(text.lstrip(_PUNCT))
        if opener := _RETRACT_START.match(text, lead):  # "no wait Scott Martens": the retraction denies what came before, not this
            text = text[:lead] + " " * len(opener[0]) + text[opener.end():]
        for cue in _NEGATION.finditer(text):
            a, b = cl.start + cue.start(), cl.start + cue.end()
            after = any(b <= c.start < cl.end for c in found) or any(contains(line[b:cl.end], [g]) for g in golds)
            if after:
                denied.append((b, cl.end))
            elif _PREDICATE.fullmatch(cue[0]):
                denied.append((cl.start, a))
    return denied


def _clause_of(pos: int, clauses: list[Clause]) -> Optional[Clause]:
    return next((c for c in clauses if c.start <= pos < max(c.end, c.start + 1)), None)


def _status(c: Candidate, clauses: list[Clause], denied: list[tuple[int, int]]) -> str:
    cl = _clause_of(c.start, clauses)
    if cl is None or cl.retracted or any(s <= c.start < e for s, e in denied):
        return "denied"
    return "offered" if cl.question or cl.hedged else "asserted"


def _stretches(line: str, clauses: list[Clause], denied: list[tuple[int, int]]) -> list[str]:
    """The asserted text: clauses that are no question, hedge or retraction, less their denied ranges."""
    out = []
    for cl in clauses:
        if cl.question or cl.hedged or cl.retracted:
            continue
        pos = cl.start
        for s, e in sorted((max(s, cl.start), min(e, cl.end)) for s, e in denied if s < cl.end and e > cl.start):
            out.append(line[pos:s])
            pos = max(pos, e)
        out.append(line[pos:cl.end])
    return [s for s in out if s.strip()]


def _about_another_date(found: list[Candidate], clauses: list[Clause], question: str):
    """A test: is candidate c in a clause dated otherwise than the question ("How many visitors in 2023?" -
    "41,200, up from 36,900 in 2022": 36,900 is about 2022, not a second answer)? Never for dates themselves."""
    asked = [c for c in cand.find(fold(question)) if c.kind == "date"]

    def test(c: Candidate) -> bool:
        if not asked or c.kind == "date":
            return False
        cl = _clause_of(c.start, clauses)
        dates = [d for d in found if d.kind == "date" and cl is not None and cl.start <= d.start < cl.end]
        return bool(dates) and all(not _agrees(d, q, set()) for d in dates for q in asked)

    return test


def _echo(c: Candidate, q_tokens: list[str]) -> bool:
    t = tokens(c.text)
    return bool(t) and any(q_tokens[i : i + len(t)] == t for i in range(len(q_tokens) - len(t) + 1))


# ---- comparing typed values --------------------------------------------------------------------------
def _half_ulp(d: Decimal) -> Decimal:
    return Decimal(5).scaleb(d.as_tuple().exponent - 1)


def _asserts(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c states gold part g (in some format, at least as precisely)."""
    if c.kind != g.kind:
        return False
    if c.kind == "number":
        q, gq = c.value, g.value
        if gq.unit and q.unit != gq.unit:
            return False
        if not gq.unit and q.unit and units and q.unit not in units:
            return False  # a bare alias ("38.4") takes the gold's unit: "38.4 feet" is not it
        return any(cr.normalize() == gr.normalize() or (cr.as_tuple().exponent <= gr.as_tuple().exponent and abs(cr - gr) <= _half_ulp(gr))
                   for cr in q.readings for gr in gq.readings)
    if c.kind == "date":
        return all(gv is None or cv == gv for cv, gv in zip(c.value, g.value))
    if c.kind == "person":
        return set(c.value) == set(g.value)
    return c.value == g.value


def _agrees(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c does not contradict gold part g of its kind (it may be coarser, finer or a part of it)."""
    if c.kind == "number":
        q, gq = c.value, g.value
        unit = gq.unit or (next(iter(units)) if len(units) == 1 else None)
        for cr in q.readings:
            for gr in gq.readings:
                if q.unit and unit and q.unit != unit:
                    gr = cand.convert(gr, unit, q.unit)
                    if gr is None:
                        continue
                if abs(cr - gr) <= max(_half_ulp(cr), _half_ulp(gr)):  # one rounds to the other
                    return True
        return False
    if c.kind == "date":
        return all(cv is None or gv is None or cv == gv for cv, gv in zip(c.value, g.value))
    if c.kind in ("person", "entity"):
        return set(c.value) <= set(g.value) or set(g.value) <= set(c.value)
    return c.value == g.value


def _competes(c: Candidate, parts: list[Candidate], units: set[str], nouns: set[str]) -> bool:
    """c is a candidate of the gold's type: its kind is a gold part's, and a number is bare or about the same thing."""
    if not any(p.kind == c.kind for p in parts):
        return False
    if c.kind != "number":
        return True
    q: Quantity = c.value
    if q.unit:
        return any(cand.dimension(q.unit) == cand.dimension(u) for u in units)
    return q.noun is None or q.noun in nouns
