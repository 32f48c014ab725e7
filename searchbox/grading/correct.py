"""The primary grade `correct`: the answer line asserts the gold (or an alias) and nothing contradicting it.

What it reads is the *claim* (grading/answer.py): the answer part's first line, joined with what it
introduces when it ends in a colon and with the rest of its list when it is a list item (its first
CLAIM_CHARS characters), and, after it, the values standing alone on lines of their own (an answer
that lists alternatives line by line offers them all). A first line that states nothing (no candidate of
the gold's kinds, no gold, no negation, hedge or retraction: "Based on the documents, I found the
following", or a heading that restates the question) introduces the next line, up to PREAMBLE_LINES. Then:
1. A claim that is raw document markup (HTML tags other than inline emphasis) asserts nothing.
2. Typed candidates are found in it (grading/candidates.py): licenses, dates (and periods: "Q3 2024",
   "FY2023"), times of day, model ids, numbers with their scale and unit or counted noun, people and other
   named entities. The gold and each alias are read the same way: their candidates are the gold's *parts*
   ("Little Vell, 1856": a name and a year). A gold with an umlaut also stands for it written out.
3. The claim is cut into clauses at sentence ends, semicolons, colons, commas, brackets, spaced dashes
   and before "but"/"however"/"whereas"/"although"; never inside a candidate or a quotation (a quoted
   title, "DSPy: Not Your Average Prompt Engineering", negates, hedges, asks and ends nothing). Each
   candidate is then
   - *denied* when a negation covers it: "not", "n't", "never", "no", "nobody", "nothing", "neither",
     "nor", "none", "rather than", "instead of", "other than", "except", "unlike" deny what follows them in
     their clause ("It is not Apache-2.0"); "not"/"never"/"wrong"/"incorrect"/"false" with nothing after them
     deny what precedes them ("Apache-2.0 is not right"). A negation with an exception asserts the exception
     ("no author other than Scott Martens", "none other than", "nobody except"). "not only", "no doubt"
     and the like are no negations. A clause that retracts (a lone "no", "wrong", "wait", or one that
     opens with "actually", "correction", "I mean", "or rather", "scratch that") denies everything before
     it; struck-through text (~~X~~, <del>) is denied;
   - *context* when it is a bound or a total: a date after "before", "after", "by", "until", "no later
     than"; a number after "more than", "over", "under", "at least", "nearly", "almost"; either followed by
     "or more", "+", "at the latest"; both ends of "between X and Y" and "from X to Y"; a number after
     another one and "of"/"out of" ("12 of the 40"). Context neither asserts nor competes. Approximations
     ("about", "around", "circa", "~") and maxima ("up to", "at most") state the value;
   - *offered* when its clause is a question (ends in "?") or hedged ("maybe", "perhaps", "possibly",
     "might", "may be", "not sure", "unsure", "uncertain", "unclear", "guess", "doubt", "unlikely",
     "someone else"), or follows a hedged lead-in ("Possibly: Scott Martens"): it asserts nothing but still
     competes ("Scott Martens, or maybe Han Xiao" offers two authors);
   - *asserted* otherwise.
4. The gold is asserted when an asserted candidate matches each of its parts, in any format the
   candidates read (timestamps, dates in words, SPDX long names, middle initials, "1.04 billion",
   a more precise number that rounds to the gold, "8,192" for "8K", the same measure in another unit to
   as many significant digits: "126 feet" for 38.4 metres, "53.6 °F" for 12 °C), or when its tokens
   (normalize.py) occur in the asserted text of the claim.
5. Nothing may contradict it: every asserted or offered candidate of a kind the golds have (a bare
   value on a later line is offered) must agree with some gold part. Agreeing means: the same license,
   model id, time or date (a coarser date that fits: "April 2024"; a day inside a gold period); the same
   person (middle initials, "Jr." and order aside) or a part of the name; a number that the gold rounds
   to ("0.6B" beside "597M"; a "K" gold is exact: 512 is not "1K") or the same quantity in another unit
   of the same dimension ("126 feet" beside "38.4 metres"). Numbers compete when they are bare or count
   the noun the gold's number counts; a number of another unit or noun ("8,192 tokens" beside a parameter
   count) is about something else, and so is one in a clause dated otherwise than the question ("in
   2023?" - "41,200, up from 36,900 in 2022"). A bare year-like number is also a count when it stands
   alone or is listed with numbers ("768 or 2048"). People compete with people, other entities with
   entities; any name competes with a name gold when it is a whole item of a list ("- Han Xiao\n-
   Engineering Group") or joined to the gold by "and", "or", "&", "/", "plus" ("Engineering Group and
   Scott Martens", "Berlin or Munich"; "et al.", "and others" too); a gold without typed parts ("granite",
   "v3") competes with short alternatives joined to it the same way ("granite and sandstone"); a name the
   answer writes in lower case competes with what is joined to it, commas included. A candidate whose words
   repeat the question's is no claim ("the model jina-clip-v2 ..."). A yes/no gold wants the claim to open
   with that word (or say only it in a clause), unhedged, and never the other.
A wrong unit ("38.4 feet" for "38.4 metres") asserts nothing and contradicts the gold; a gold that counts
things ("12 lighthouses") is not asserted by a measure ("12 km").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Optional

from . import candidates as cand
from .answer import claim_of
from .candidates import Candidate, Quantity
from .normalize import PERIODS, contains, fold, tokens, umlaut_forms

CORRECT_VERSION = "correct-2"
CLAIM_CHARS = 2000  # of the claim read: an answer line is a sentence or a list, not a document
BARE_LINES = 200  # lines after the claim searched for bare values
BARE_CHARS = 120  # a longer line is prose, not a bare value
PREAMBLE_LINES = 3  # lines before the answer that state nothing ("Based on the documents, I found the following")
ITEM_WORDS = 4  # words of a coordinated alternative ("Scott Martens and Han Xiao"); a longer run is prose

_NEGATION = re.compile(r"\b(?:not|never|cannot|neither|nor|none|no|nobody|nothing|noone)\b|n['\u2019]t\b"
                       r"|\b(?:rather\s+than|instead\s+of|other\s+than|except|unlike)\b"
                       r"|\b(?:incorrect|wrong|false|mistaken)\b", re.IGNORECASE)
_PLAIN_NEGATION = re.compile(r"not|never|cannot|neither|nor|none|no|nobody|nothing|noone|n['\u2019]t", re.IGNORECASE)
_EXCEPTION = re.compile(r"\b(?:other\s+than|except(?:\s+for)?|besides|apart\s+from|save\s+for|but)\b", re.IGNORECASE)
_PREDICATE = re.compile(r"not|never|cannot|n['\u2019]t|incorrect|wrong|false|mistaken", re.IGNORECASE)  # may deny what precedes
_NOT_NEGATION = re.compile(r"\b(?:not\s+only|not\s+just|not\s+until|not\s+least|not\s+to\s+mention|no\s+doubt|nothing\s+but|"
                           r"without\s+(?:a\s+)?doubt|(?:no|not)\s+(?:later|earlier|more|less|fewer|sooner)\s+than)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|might|(?:may|could)\s+be|unsure|uncertain|unclear|not\s+sure|not\s+certain|guess|"
                    r"doubt|doubtful|unlikely|improbable|(?:someone|somebody|something)\s+else|or\s+(?:another|other)s?)\b",
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
_MARKUP = re.compile(r"</?(?!(?:b|strong|i|em|u|mark|code|sup|sub|br|small|s|del|strike)\b)[a-z][a-z0-9]*\b[^>]*>", re.IGNORECASE)
_STRUCK = re.compile(r"~~.+?~~|<(s|del|strike)>.*?</\1>", re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"\n]{1,300}\"|\u201c[^\u201d\n]{1,300}\u201d|\u201e[^\u201c\u201d\n]{1,300}[\u201c\u201d]")
_PUNCT = " \t*_\"'`.,!?;:()[]{}-\u2013\u2014"
_LIST_ITEM_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+")
_TYPED_ONLY = ("number", "date", "time")  # golds with such a part are asserted by a typed candidate only (units, precision)
_NAMES = ("person", "entity")
# bounds: a value after these is a limit, not the value ("before 2024-04-16", "more than 35%"); "up to"/"at most" state a maximum
_BOUND_DATE = re.compile(r"\b(?:before|after|by|until|till|prior\s+to|earlier\s+than|later\s+than|no\s+(?:later|earlier|sooner)\s+than|"
                         r"not\s+(?:before|after)|as\s+(?:early|late)\s+as)\s+(?:(?:the|a|an|its|their)\s+)?$", re.IGNORECASE)
_BOUND_NUMBER = re.compile(r"(?:\b(?:more|greater|higher|larger|less|fewer|lower|smaller)\s+than|\b(?:over|above|exceeding|under|below|"
                           r"nearly|almost|at\s+least|upwards\s+of|in\s+excess\s+of|not\s+quite|close\s+to|just\s+(?:over|under|below|above|"
                           r"shy\s+of)|no\s+(?:more|less|fewer)\s+than)|[<>\u2264\u2265]=?)\s*$", re.IGNORECASE)
_NOT_UNTIL = re.compile(r"\bnot\s+until\s*$", re.IGNORECASE)  # "not until 1856": then and not before
_RANGE_FIRST = re.compile(r"\bbetween\s*$", re.IGNORECASE)
_POST_BOUND = re.compile(r"\s*(?:\+(?!\w)|or\s+(?:more|less|fewer|higher|lower|greater|later|earlier|above|below|over|under|before|after)\b"
                         r"|and\s+(?:up|above|over|more|later|earlier|beyond)\b|at\s+(?:the\s+)?(?:least|most|latest|earliest)\b)", re.IGNORECASE)
_LOWER_FIRST = re.compile(r"no\s+(?:earlier|sooner|less|fewer)|not\s+before|at\s+least|earliest", re.IGNORECASE)
_UPPER = re.compile(r"less|fewer|lower|smaller|under|below|nearly|almost|quite|close|shy|no\s+more|no\s+later|[<\u2264]|before|\bby\b|"
                    r"until|till|prior|earlier|not\s+after|latest|most", re.IGNORECASE)
_FROM = re.compile(r"\bfrom\s*$", re.IGNORECASE)
_TO = re.compile(r"\s*(?:to|until|till|through|-|\u2013)\s", re.IGNORECASE)
_RANGE_SECOND = re.compile(r"\b(?:between|from)\s+\S[^;:!?]{0,60}?\s*(?:and|to|until|till|-|\u2013)\s*$", re.IGNORECASE)
_DENOMINATOR = re.compile(r"(?:\bout\s+of|\bof\s+(?:the|all|its|their|a\s+total\s+of)|\(\s*of|\bof)\s*$", re.IGNORECASE)
_JOIN = re.compile(r"\s*,?\s*(?:and/or|and|or|&|plus|as\s+well\s+as|along\s+with|together\s+with)\s+|\s*[/&+]\s*", re.IGNORECASE)
_COMMA = re.compile(r"\s*,\s*")
_CAP_ITEM = re.compile(r"[A-Z][\w'\u2019.-]*(?:\s+(?:(?:van|von|de|der|den|da|di|du|le|la|bin|al)\s+)*[A-Z][\w'\u2019.-]*){0,3}")
_ANY_ITEM = re.compile(r"[^\W_][\w'\u2019.-]*(?:\s+[^\W_][\w'\u2019.-]*){0,3}")
_ITEM_END = re.compile(r"\s*(?:$|[.,;:!?)\]*_]|(?:and/or|and|or|&|plus)\b|[/&+])", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r";\s+")  # the claim joins list items (and a lead-in with its line) with "; "
_MORE_AUTHORS = re.compile(r"\s*,?\s*(?:et\s+al\b\.?|and\s+(?:others|colleagues|co-?authors|(?:his|her|their)\s+team|team))", re.IGNORECASE)
_YES = frozenset("yes yeah yep yup correct true indeed affirmative".split())
_NO = frozenset("no nope nah false incorrect negative".split())


@dataclass
class Clause:
    start: int
    end: int
    question: bool = False
    hedged: bool = False
    retracted: bool = False
    colon: bool = False  # ends in a colon: a lead-in to what follows


@dataclass
class Verdict:
    """What `correct` found in a claim, and why it says what it says."""

    value: float
    reason: str
    asserted: list[str] = field(default_factory=list)  # the candidates the claim asserts
    offered: list[str] = field(default_factory=list)  # offered only (questions, hedges)
    denied: list[str] = field(default_factory=list)  # negated or retracted
    contradicting: list[str] = field(default_factory=list)  # candidates that agree with no gold
    context: list[str] = field(default_factory=list)  # bounds and totals: neither asserted nor competing
    claim: str = ""  # what was read (the claim, past any preamble)

    def as_dict(self) -> dict:
        return {"correct": None if math.isnan(self.value) else self.value, "reason": self.reason, "asserted": self.asserted,
                "offered": self.offered, "denied": self.denied, "contradicting": self.contradicting, "context": self.context}


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


@dataclass
class Gold:
    """The golds as `correct` compares them: each gold's typed parts, their units and counted nouns."""

    golds: list[str]
    parts: dict[str, list[Candidate]]
    units: set[str]
    nouns: set[str]

    @classmethod
    def of(cls, golds: list[str]) -> "Gold":
        golds = list(dict.fromkeys([*golds, *(u for g in golds for u in umlaut_forms(g))]))
        parts = {g: cand.find(fold(g)) for g in golds}
        flat = [p for ps in parts.values() for p in ps]
        units = {p.value.unit for p in flat if p.kind == "number" and p.value.unit}
        nouns = {p.value.noun for p in flat if p.kind == "number" and p.value.noun}
        return cls(golds, parts, units, nouns)

    @property
    def all_parts(self) -> list[Candidate]:
        return [p for ps in self.parts.values() for p in ps]

    def competes(self, c: Candidate, nouns: Optional[set[str]] = None, names: bool = False) -> bool:
        """c is a candidate of the gold's type (names: a person and an entity compete too, as items of one list)."""
        views = self.views
        if names and c.kind in _NAMES and any(p.kind in _NAMES for p in views):
            return True
        return any(_competes(x, views, self.units, self.nouns | (nouns or set())) for x in c.views())

    def agrees(self, c: Candidate) -> bool:
        views = self.views
        if c.kind in _NAMES:
            return any(_agrees(c, Candidate(c.kind, p.value, 0, 0, ""), self.units) for p in views if p.kind in _NAMES)
        return any(_agrees(x, p, self.units) for x in c.views() for p in views if p.kind == x.kind)

    @property
    def views(self) -> list[Candidate]:
        return [v for p in self.all_parts for v in p.views()]

    @property
    def names(self) -> bool:
        return any(p.kind in _NAMES for p in self.all_parts)

    @property
    def untyped(self) -> bool:
        return any(not ps for ps in self.parts.values())


def verdict(claim: str, golds: list[str], question: str = "", after: str = "") -> Verdict:
    """`correct` with its reasons; `after`: the answer part's lines after the claim, whose bare values compete."""
    golds = [g for g in golds if g and g.strip()]
    if not golds:
        return Verdict(math.nan, "no gold answer")
    gold = Gold.of(golds)
    line = fold(claim or "").strip()[:CLAIM_CHARS]
    line, after = _past_preamble(line, fold(after or ""), gold, question)
    if not line:
        return Verdict(0.0, "no answer")
    if _MARKUP.search(_STRUCK.sub("", line)):
        return Verdict(0.0, "the answer line is document markup, not a claim", claim=line)
    masked = _mask_quotes(line)
    found = cand.find(line)
    clauses = _clauses(line, masked, found)
    if (polar := _polarity(gold.golds)) is not None:
        return _polar_verdict(line, masked, clauses, polar, after)
    denied = _negations(line, masked, clauses, found, gold.golds) + [(m.start(), m.end()) for m in _STRUCK.finditer(line)]
    status = {id(c): _status(c, line, masked, clauses, denied, found) for c in found}
    asserted = [c for c in found if status[id(c)] == "asserted"]
    free = _asserted_mask(line, clauses, denied)
    q_tokens = tokens(question)
    matched: list[Candidate] = []
    spans: list[tuple[int, int]] = []  # where the gold is asserted in the line
    gold_hit, textual_only = None, True
    for g, ps in gold.parts.items():
        hits = [next((c for c in asserted if any(_asserts(x, y, gold.units) for x in c.views() for y in p.views())), None) for p in ps]
        textual = not any(p.kind in _TYPED_ONLY for p in ps)  # names and model ids may match as words too ("scott martens")
        if ps and all(hits):
            gold_hit, textual_only = gold_hit or g, False
            matched += hits
            spans += [(h.start, h.end) for h in hits]
        elif textual and (where := _textual(line, g, free, found)):
            gold_hit = gold_hit or g
            spans += where
    v = Verdict(0.0, "", [c.text for c in asserted], [c.text for c in found if status[id(c)] == "offered"],
                [c.text for c in found if status[id(c)] == "denied"], context=[c.text for c in found if status[id(c)] == "context"],
                claim=line)
    nouns = {p.value.noun for p in matched if p.kind == "number" and p.value.noun}
    other_date = _about_another_date(found, clauses, question)
    v.contradicting = [c.text for c in found if status[id(c)] in ("asserted", "offered") and gold.competes(c, nouns)
                       and not gold.agrees(c) and not _echo(c, q_tokens) and not other_date(c)]
    for c in found:  # a bound or total the gold breaks is another answer ("35%, or more than 40%")
        if status[id(c)] == "context" and gold.competes(c, nouns) and not _within(c, _context(c, masked, found), gold):
            v.contradicting.append(c.text)
    if gold_hit is not None and (gold.names or gold.untyped):  # alternatives joined to the gold ("Berlin or Munich")
        v.contradicting += [t for t in _coordinated(line, spans, found, status, gold, lowercase=textual_only, q_tokens=q_tokens)
                            if t not in v.contradicting]
    for c in _bare_items(line, found):  # a list's items are alternatives: a person and an entity compete ("- Han Xiao\n- Engineering Group")
        if status[id(c)] in ("asserted", "offered") and gold.competes(c, nouns, names=True) and not gold.agrees(c) \
                and not _echo(c, q_tokens) and c.text not in v.contradicting:
            v.contradicting.append(c.text)
    for c in bare_values(after):  # a value alone on a later line is offered beside the answer
        v.offered.append(c.text)
        if gold.competes(c, nouns, names=True) and not gold.agrees(c) and not _echo(c, q_tokens):
            v.contradicting.append(c.text)
    if gold_hit is None:
        v.reason = "the gold is not asserted" + (" (it is only offered, denied or a bound)" if any(contains(line, [g]) for g in golds) else "")
    elif v.contradicting:
        v.reason = "the gold is asserted beside other candidates: " + "; ".join(v.contradicting)
    else:
        v.value, v.reason = 1.0, f"asserts {gold_hit!r} and nothing contradicting it"
    return v


# ---- reading the claim ----------------------------------------------------------------------------
def _bare_items(line: str, found: list[Candidate]) -> list[Candidate]:
    """The candidates that are a whole item of the claim's list ("Han Xiao; Engineering Group"), markup and punctuation aside."""
    cuts = [m.start() for m in _ITEM_SPLIT.finditer(line)]
    if not cuts:
        return []
    out, start = [], 0
    for end in cuts + [len(line)]:
        a, b = start, end
        while a < b and (line[a] in _PUNCT + "#>" or line[a].isspace()):
            a += 1
        while b > a and (line[b - 1] in _PUNCT or line[b - 1].isspace()):
            b -= 1
        inside = [c for c in found if a <= c.start < b]
        if len(inside) == 1 and (inside[0].start, inside[0].end) == (a, b):
            out.append(inside[0])
        start = end + 1
    return out


def _mask_quotes(line: str) -> str:
    """The line with the inside of each quotation blanked: a quoted title ("DSPy: Not Your Average Prompt Engineering",
    "Is Romance Generative AI's Killer App? We Hope Not") negates, hedges, asks and ends nothing."""
    return _QUOTED.sub(lambda m: m[0][0] + " " * (len(m[0]) - 2) + m[0][-1], line)


def _cue_free(text: str) -> bool:
    text = _NOT_NEGATION.sub(" ", text)
    return not (_NEGATION.search(text) or _HEDGE.search(text) or _RETRACT_START.search(text)
                or _RETRACT_ALONE.fullmatch(text.strip(_PUNCT)))


def _past_preamble(line: str, after: str, gold: Gold, question: str) -> tuple[str, str]:
    """The claim past lines that state nothing: a first line with no candidate of the gold's kinds, no gold, and neither a
    negation, hedge, question nor retraction (or one that only restates the question) introduces the next line."""
    q_tokens = tokens(question)
    q = set(q_tokens)
    for _ in range(PREAMBLE_LINES):
        if not after.strip() or not line or _MARKUP.search(line) or any(contains(line, [g]) for g in gold.golds):
            break
        if any(gold.competes(c) and not _echo(c, q_tokens) for c in cand.find(line)):
            break
        masked = _mask_quotes(line)
        words = [t for t in tokens(masked) if not t.isdigit()]
        restates = bool(q) and bool(words) and all(t in q for t in words)
        if not (_cue_free(masked) or restates):
            break
        nxt, after = claim_of(after)
        if not nxt:
            break
        line = f"{line.rstrip(' .!?:;,')}; {nxt}"[:CLAIM_CHARS]
    return line, after


def _clauses(line: str, masked: str, found: list[Candidate]) -> list[Clause]:
    inside = bytearray(len(line))  # a comma in "April 16, 2024" or a colon in a quoted title cuts nothing
    for c in found:
        inside[c.start:c.end] = b"\x01" * (c.end - c.start)
    for m in _QUOTED.finditer(line):
        inside[m.start() + 1:m.end() - 1] = b"\x01" * (m.end() - m.start() - 2)
    out, start = [], 0
    for m in _BOUNDARY.finditer(line):
        if inside[m.start()]:
            continue
        out.append(Clause(start, m.start(), question=m[0] == "?", colon=m[0] == ":"))
        start = m.end() if m[0].strip() else m.start()
    out.append(Clause(start, len(line)))
    out = [c for c in out if line[c.start:c.end].strip(_PUNCT)] or [Clause(0, len(line))]
    for k, c in enumerate(out):
        text = masked[c.start:c.end].strip(_PUNCT)
        c.hedged = bool(_HEDGE.search(_NOT_NEGATION.sub(" ", text)))
        if _HEDGE_ALONE.fullmatch(text) and k:  # "Scott Martens (not sure)": the hedge is about the clause before
            out[k - 1].hedged = True
        if _RETRACT_ALONE.fullmatch(text) or _RETRACT_START.match(text):
            for earlier in out[:k]:
                earlier.retracted = True
    for k, c in enumerate(out):
        if c.colon and c.hedged:  # "Possibly: Scott Martens": a hedged lead-in hedges what it introduces
            for later in out[k + 1:]:
                later.hedged = True
    return out


def _negations(line: str, masked: str, clauses: list[Clause], found: list[Candidate], golds: list[str]) -> list[tuple[int, int]]:
    denied = []
    for cl in clauses:
        text = _NOT_NEGATION.sub(lambda m: " " * len(m[0]), masked[cl.start:cl.end])
        lead = len(text) - len(text.lstrip(_PUNCT))
        if opener := _RETRACT_START.match(text, lead):  # "no wait Scott Martens": the retraction denies what came before, not this
            text = text[:lead] + " " * len(opener[0]) + text[opener.end():]
        skip = -1
        for cue in _NEGATION.finditer(text):
            if cue.start() < skip:
                continue  # the exception of a negation before ("no author other than Scott Martens")
            a, b = cl.start + cue.start(), cl.start + cue.end()
            if _PLAIN_NEGATION.fullmatch(cue[0]) and (exc := _EXCEPTION.search(text, cue.end())):
                denied.append((b, cl.start + exc.start()))  # a negation with an exception asserts the exception
                skip = exc.end()
                continue
            after = any(b <= c.start < cl.end for c in found) or any(contains(line[b:cl.end], [g]) for g in golds)
            if after:
                denied.append((b, cl.end))
            elif _PREDICATE.fullmatch(cue[0]):
                denied.append((cl.start, a))
    return denied


def _clause_of(pos: int, clauses: list[Clause]) -> Optional[Clause]:
    return next((c for c in clauses if c.start <= pos < max(c.end, c.start + 1)), None)


def _status(c: Candidate, line: str, masked: str, clauses: list[Clause], denied: list[tuple[int, int]], found: list[Candidate]) -> str:
    cl = _clause_of(c.start, clauses)
    if cl is None or cl.retracted or any(s <= c.start < e for s, e in denied):
        return "denied"
    if _context(c, masked, found):
        return "context"
    return "offered" if cl.question or cl.hedged else "asserted"


def _context(c: Candidate, masked: str, found: list[Candidate]) -> Optional[str]:
    """How a bound or a total states no value: "min" ("more than 35%", "after 2024-04-16", the low end of "between 12 and 15"),
    "max" ("before 2024-04-16", "35% or less", the high end of a range, "12 of the 40": a total), or None (a value)."""
    before, after = masked[max(0, c.start - 80):c.start], masked[c.end:c.end + 20]
    if c.kind not in ("number", "date", "time"):
        return None
    if _FROM.search(before) and _TO.match(after):
        return "min"  # "from 2024-04-16 to 2024-04-18", "from 12 to 15": a range
    if (post := _POST_BOUND.match(after)):
        return _side(post[0])  # "35% or more", "2024-04-16 at the latest"
    if _RANGE_FIRST.search(before):
        return "min"
    if _RANGE_SECOND.search(before):
        return "max"
    if c.kind in ("date", "time"):
        if not _NOT_UNTIL.search(before) and (m := _BOUND_DATE.search(before)):
            strict = re.match(r"\s*(?:before|after|earlier\s+than|later\s+than)", m[0], re.IGNORECASE)
            return _side(m[0]) + ("<" if strict else "")
        return None
    if (m := _BOUND_NUMBER.search(before)):
        return _side(m[0])
    prev = [d for d in found if d.kind == "number" and d.end <= c.start and c.start - d.end <= 12]
    return "max" if prev and _DENOMINATOR.search(masked[prev[-1].end:c.start]) else None


def _side(bound: str) -> str:
    return "min" if _LOWER_FIRST.search(bound) or not _UPPER.search(bound) else "max"


def _within(c: Candidate, side: str, gold: "Gold") -> bool:
    """A bound the gold satisfies ("more than 30%" beside 35%); one it breaks ("more than 40%") contradicts it."""
    for p in gold.views:
        if p.kind != c.kind:
            continue
        if c.kind == "number":
            q, gq = c.value, p.value
            unit = gq.unit or (next(iter(gold.units)) if len(gold.units) == 1 else None)
            for cr in q.readings:
                b = cand.convert(cr, q.unit, unit) if q.unit and unit and q.unit != unit else cr
                if b is None:
                    return True  # another dimension: no bound of the gold
                tol = _half_ulp(cr) * abs(cand.scale_of(q.unit, unit) or 1) if q.unit and unit and q.unit != unit else _half_ulp(cr)
                if any((gr >= b - tol) if side.startswith("min") else (gr <= b + tol) for gr in gq.readings):
                    return True
            return False
        if c.kind == "date":
            pairs = [(cv, gv) for cv, gv in zip(c.value, p.value) if isinstance(cv, int) and isinstance(gv, int)]
            n = next((i for i, (cv, gv) in enumerate(zip(c.value, p.value)) if not (isinstance(cv, int) and isinstance(gv, int))), 3)
            b, g = tuple(x for x, _ in pairs[:n]), tuple(y for _, y in pairs[:n])
            if side.endswith("<"):  # "before 2024": 2023 at the latest
                return (g > b) if side.startswith("min") else (g < b)
            return (g >= b) if side == "min" else (g <= b)
        return True
    return True


def _asserted_mask(line: str, clauses: list[Clause], denied: list[tuple[int, int]]) -> str:
    """The line with every character that is not asserted (questions, hedges, retractions, denied ranges) blanked out."""
    keep = bytearray(b"\x01" * len(line))
    for cl in clauses:
        if cl.question or cl.hedged or cl.retracted:
            keep[cl.start:cl.end] = b"\x00" * (cl.end - cl.start)
    for s, e in denied:
        keep[s:e] = b"\x00" * (e - s)
    return "".join(ch if k else "\x00" for ch, k in zip(line, keep))


def _widen(a: int, b: int, found: list[Candidate]) -> tuple[int, int]:
    """A span grown to the name it is part of ("Stanford" in "Stanford University")."""
    for c in found:
        if c.kind in _NAMES and c.start <= a and b <= c.end:
            return c.start, c.end
    return a, b


def _textual(line: str, gold: str, free: str, found: list[Candidate]) -> list[tuple[int, int]]:
    """Where the gold's tokens occur in the asserted text of the line (a run of words none of which is blanked)."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"[^\x00]+", free)]
    if not any(contains(free[s:e], [gold]) for s, e in runs):
        return []
    width = len(tokens(gold)) + 3
    out = []
    for s, e in runs:
        words = [(m.start() + s, m.end() + s) for m in re.finditer(r"\S+", free[s:e])]
        for i in range(len(words)):
            for j in range(i, min(len(words), i + width)):
                if contains(line[words[i][0]:words[j][1]], [gold]):
                    a, b = words[i][0], words[j][1]
                    while b > a and line[b - 1] in _PUNCT:
                        b -= 1
                    while a < b and line[a] in _PUNCT:
                        a += 1
                    out.append(_widen(a, b, found))
                    break
    return [o for o in out if not any(p != o and o[0] <= p[0] and p[1] <= o[1] for p in out)]


def _coordinated(line: str, spans: list[tuple[int, int]], found: list[Candidate], status: dict, gold: Gold, lowercase: bool,
                 q_tokens: list[str]) -> list[str]:
    """Alternatives joined to the gold by "and", "or", "&", "/" ("Berlin or Munich", "Jina AI and Elastic", "granite and
    sandstone"), or by commas in a list that has such a join; for a name written in capitals, capitalised items only."""
    capitals = gold.names and not (lowercase and not gold.untyped)
    item_re = _CAP_ITEM if capitals and not lowercase else _ANY_ITEM
    out: list[str] = []
    for s, e in spans:
        items = _chain(line, s, e, item_re, commas=lowercase and gold.names)
        if gold.names and (more := _MORE_AUTHORS.match(line, e)):
            items.append((more.start(), more.end(), more[0].strip(" ,")))
        for a, b, text in items:
            cs = [c for c in found if a <= c.start < b]
            if any(status[id(c)] in ("denied", "context") for c in cs) or _echo_text(text, q_tokens):
                continue
            if any(c.kind not in ("person", "entity") for c in cs) and not gold.untyped:
                continue  # a typed value joined to a name ("Scott Martens and 2024") competes by its own kind, or not at all
            words = set(tokens(text))
            if any(words <= set(tokens(g)) or set(tokens(g)) <= words for g in gold.golds):
                continue
            out.append(text)
    return out


def _chain(line: str, s: int, e: int, item_re: re.Pattern, commas: bool) -> list[tuple[int, int, str]]:
    """The items of a list the span [s, e) is in: walked forwards and backwards over joins (and commas)."""
    items, joined, pos = [], False, e
    while True:  # forwards
        j = _JOIN.match(line, pos) or (_COMMA.match(line, pos) if True else None)
        if not j:
            break
        m = item_re.match(line, j.end())
        if not m:
            break
        text = _trim(m[0], first=True)
        if not text or not _ITEM_END.match(line, j.end() + len(text)):
            break
        joined |= _JOIN.fullmatch(j[0]) is not None
        items.append((j.end(), j.end() + len(text), text))
        pos = j.end() + len(text)
    pos = s
    while True:  # backwards
        prefix = line[:pos]
        j = re.search(rf"(?:{_JOIN.pattern}|{_COMMA.pattern})\Z", prefix, re.IGNORECASE)
        if not j:
            break
        m = re.search(rf"(?:{item_re.pattern})\Z", prefix[:j.start()])
        if not m:
            break
        text = _trim(m[0], first=False)
        if not text:
            break
        start = j.start() - len(text)
        joined |= _JOIN.fullmatch(j[0]) is not None
        items.append((start, j.start(), text))
        pos = start
    return items if joined or (commas and len(items) >= 1) else []


def _trim(item: str, first: bool) -> str:
    """An item's words up to the first stop word (forwards) or after the last one (backwards); "" when there is none."""
    words = item.split()
    keep: list[str] = []
    for w in (words if first else reversed(words)):
        if w.lower().strip(".,") in cand.STOP or w in cand.STOP_CAPITALS:
            break
        keep.append(w)
    keep = keep if first else keep[::-1]
    return " ".join(keep) if len(keep) <= ITEM_WORDS else ""


def _polarity(golds: list[str]) -> Optional[str]:
    """"yes" or "no" when every gold is that one word; else None."""
    words = {tuple(tokens(g)) for g in golds}
    if all(len(w) == 1 and w[0] in _YES for w in words):
        return "yes"
    if all(len(w) == 1 and w[0] in _NO for w in words):
        return "no"
    return None


def _said(text: str) -> Optional[str]:
    """"yes"/"no" when a clause says only that ("or no", "maybe not"), else None."""
    t = text.strip(_PUNCT).lower()
    while (m := re.match(r"(?:or|and|but|maybe|perhaps|possibly|then|also|so)\s+", t)):
        t = t[m.end():]
    return "yes" if t in _YES else "no" if t in _NO or t == "not" else None


def _polar_verdict(line: str, masked: str, clauses: list[Clause], polar: str, after: str = "") -> Verdict:
    """A yes/no gold: the claim opens with that answer (or says it alone in a clause: "Not really, no."), committed, and never
    answers the other way or takes it back."""
    said = lambda c: _said(masked[c.start:c.end])
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", masked)]
    first = "yes" if words and words[0] in _YES else "no" if words and words[0] in _NO else None
    k = 0
    if first is None:
        alone = [(i, said(c)) for i, c in enumerate(clauses) if said(c)]
        if len({p for _, p in alone}) == 1:
            k, first = alone[0]
    opposite = "no" if polar == "yes" else "yes"
    both = re.search(r"\b(?:yes|no)\s*(?:and|or|/)\s*(?:yes|no)\b", masked, re.IGNORECASE)
    later = clauses[k + 1:]
    taken_back = any(said(c) == opposite or (said(c) is None and (_RETRACT_ALONE.fullmatch(masked[c.start:c.end].strip(_PUNCT))
                                                                 or _RETRACT_START.match(masked[c.start:c.end].strip(_PUNCT))))
                     for c in later)
    taken_back |= any(_said(_LIST_ITEM_MARK.sub("", ln)) == opposite for ln in after.splitlines()[:BARE_LINES])
    v = Verdict(0.0, "", claim=line)
    if first is None:
        v.reason = f"the answer does not say yes or no (the gold is {polar!r})"
    elif first != polar:
        v.reason, v.contradicting = f"the answer says {first!r}", [first]
    elif clauses[k].question or clauses[k].hedged or both or taken_back:
        v.reason = f"{polar!r} is hedged, asked, taken back or answered both ways"
    else:
        v.value, v.reason, v.asserted = 1.0, f"asserts {polar!r} and nothing contradicting it", [polar]
    return v


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
    return _echo_text(c.text, q_tokens)


def _echo_text(text: str, q_tokens: list[str]) -> bool:
    t = tokens(text)
    return bool(t) and any(q_tokens[i : i + len(t)] == t for i in range(len(q_tokens) - len(t) + 1))


# ---- comparing typed values --------------------------------------------------------------------------
def _half_ulp(d: Decimal) -> Decimal:
    return Decimal(5).scaleb(d.as_tuple().exponent - 1)


def _digits(d: Decimal) -> int:
    """Significant digits as written ("126" 3, "0.0384" 3, "38.40" 4)."""
    t = d.as_tuple()
    digits = list(t.digits)
    while t.exponent >= 0 and len(digits) > 1 and digits[-1] == 0:
        digits.pop()  # "1000 kg": the zeros of a whole number hold its place, not its precision
    return max(1, len(digits) - next((i for i, x in enumerate(digits) if x), len(digits) - 1))


def _trailing_zero(d: Decimal) -> bool:
    t = d.as_tuple()
    return t.exponent < 0 and t.digits[-1] == 0


def _asserts(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c states gold part g (in some format, at least as precisely)."""
    if c.kind != g.kind:
        return False
    if c.kind == "number":
        return _states_number(c.value, g.value, units)
    if c.kind == "date":
        return all(gv is None or cv == gv or (isinstance(gv, str) and cv in PERIODS.get(gv, ())) for cv, gv in zip(c.value, g.value))
    if c.kind == "time":
        return c.value[:2] == g.value[:2] and (g.value[2] is None or c.value[2] == g.value[2])
    if c.kind == "person":
        return set(c.value) - {"jr"} == set(g.value) - {"jr"}
    return c.value == g.value


def _states_number(q: Quantity, gq: Quantity, units: set[str]) -> bool:
    unit = gq.unit or (next(iter(units)) if len(units) == 1 else None)  # a bare alias ("38.4") takes the gold's unit
    if gq.noun and q.unit:
        return False  # the gold counts things ("12 lighthouses"); a measure in a unit is something else
    if q.unit != unit and not (unit is None and q.unit is None):
        if q.unit is None and gq.unit is None:
            pass  # a bare number for a bare alias of a gold with a unit: read in that unit
        elif q.unit is None or unit is None:
            return q.unit is None and gq.unit is None
    exact = len(gq.readings) > 1  # "8K" stands for exactly 8,000 or 8,192: a finer number must round from one of them
    for gr in gq.readings:
        for cr in q.readings:
            if q.unit and unit and q.unit != unit:
                conv = cand.convert(cr, q.unit, unit)
                if conv is None:
                    return False
                if _digits(cr) >= _digits(gr) and abs(conv - gr) <= _half_ulp(gr):  # "126 feet" for 38.4 metres
                    return True
                continue
            if cr.normalize() == gr.normalize() and not (not gq.unit and not gq.noun and _trailing_zero(gr)
                                                         and cr.as_tuple().exponent > gr.as_tuple().exponent):
                return True  # the same number ("3.1" is not a gold written "3.10")
            if cr.as_tuple().exponent <= gr.as_tuple().exponent and abs(cr - gr) <= _half_ulp(gr):
                if not exact or any(abs(cr - r) <= _half_ulp(cr) for r in gq.readings):
                    return True  # more precise, and rounds to the gold ("1,543,714,304" for "1.54B")
    return False


def _agrees(c: Candidate, g: Candidate, units: set[str]) -> bool:
    """c does not contradict gold part g of its kind (it may be coarser, finer or a part of it)."""
    if c.kind == "number":
        q, gq = c.value, g.value
        unit = gq.unit or (next(iter(units)) if len(units) == 1 else None)
        for cr in q.readings:
            for gr in gq.readings:
                slack = _half_ulp(gr) if len(gq.readings) == 1 else Decimal(0)  # "1K" is exactly 1,000 or 1,024: 512 is neither
                if q.unit and unit and q.unit != unit:
                    factor = cand.scale_of(unit, q.unit)
                    gr = cand.convert(gr, unit, q.unit)
                    if gr is None:
                        continue
                    slack *= abs(factor)
                if abs(cr - gr) <= max(_half_ulp(cr), slack):  # one rounds to the other
                    return True
        return False
    if c.kind == "date":
        return all(_date_part_agrees(cv, gv) for cv, gv in zip(c.value, g.value))
    if c.kind == "time":
        return c.value[:2] == g.value[:2] and (c.value[2] is None or g.value[2] is None or c.value[2] == g.value[2])
    if c.kind in ("person", "entity"):
        a, b = set(c.value) - {"jr"}, set(g.value) - {"jr"}
        return a <= b or b <= a
    return c.value == g.value


def _date_part_agrees(cv, gv) -> bool:
    if cv is None or gv is None or cv == gv:
        return True
    months = lambda v: set(PERIODS.get(v, ())) if isinstance(v, str) else {v}
    return bool(months(cv) & months(gv))


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
