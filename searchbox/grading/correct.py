"""The primary grade `correct`: the answer line asserts the gold (or an alias) and nothing contradicting it.

What it reads is the *claim* (grading/answer.py): the answer part's first line, joined with what it
introduces when it ends in a colon and with the rest of its list when it is a list item (its first
CLAIM_CHARS characters), and, after it, the values standing alone on lines of their own (an answer
that lists alternatives line by line offers them all), listed after a hedging label ("Alternatives: 41 m") or on a line
that opens with "or" or a hedge ("(or 41 m)", "Alternatively, Han Xiao."). A later
line that takes the claim back is read as its next sentence ("Han Xiao\n\nCorrection: Scott Martens"; one that opens
softly, "Actually"/"Wait"/"Update:", only when it names a value of the gold's kinds: `_corrections`). A first line that states nothing (no candidate of
the gold's kinds, no gold, no negation, hedge or retraction: "Based on the documents, I found the
following", or a heading that restates the question) introduces the next line, up to PREAMBLE_LINES. Then:
1. A claim that is raw document markup (HTML tags other than inline emphasis) asserts nothing; plain elements without
   attributes that only wrap it ("<p>Han Xiao</p>", "<li>") are taken off first (claim.unwrap), a block one parting items.
2. Typed candidates are found in it (grading/candidates.py): licenses, dates (and periods: "Q3 2024",
   "FY2023"), times of day, model ids, numbers with their scale and unit or counted noun, people and other
   named entities. The gold and each alias are read the same way: their candidates are the gold's *parts*
   ("Little Vell, 1856": a name and a year). A gold with an umlaut also stands for it written out.
3. The claim is cut into clauses at sentence ends, semicolons, colons, commas, brackets, spaced dashes
   and before "but"/"however"/"whereas"/"although"; never inside a candidate or a quotation (a quoted
   title, "DSPy: Not Your Average Prompt Engineering", negates, hedges, asks and ends nothing). Each
   candidate is then
   - *denied* when a negation covers it: "not", "n't", "never", "no", "nobody", "nothing", "neither",
     "nor", "none", "by no means", "anyone/anything but", "rather than", "instead of", "other than", "except",
     "unlike", "wrongly", "mistakenly", "ruled out", "excluded", "debunked" deny what follows them in their clause ("It is not
     Apache-2.0"); "not"/"never"/"wrong"/"incorrect"/"false"/"untrue"/"mistakenly"/"ruled out"/"excluded" with nothing after
     them deny what precedes them ("Apache-2.0 is not right", "Han Xiao is mistakenly credited"). A negation
     with an exception asserts the exception ("no author other than Scott Martens", "none other than", "nobody
     except"). "not only", "no doubt", "nothing but", "whether or not" and the like are no negations. A clause
     that retracts (a lone "no", "wrong", "wait", "that's not correct", "I retract that", "that's a common
     misconception", or one that opens with "actually", "correction", "I mean", "or rather", "scratch that", "on
     reflection", "Update:") denies everything before it; struck-through text (~~X~~, <del>) is denied, and so is a
     value with an adjective glued on ("Apache-2.0-compatible", "granite-like": claim.modified);
   - *context* when it is a bound or a total: a date after "before", "after", "by", "until", "no later
     than"; a number after "more than" or any comparative and "than" ("taller than", "older than"), "over",
     "under", "at least", "nearly", "almost"; either followed by "or more", "or taller", "+", "at the latest"; both ends of "between X and Y" and "from X to Y"; a number after
     another one and "of"/"out of" ("12 of the 40"). Context neither asserts nor competes. Approximations
     ("about", "around", "circa", "~") and maxima ("up to", "at most") state the value;
   - *offered* when its clause is a question (ends in "?") or hedged ("maybe", "perhaps", "possibly",
     "might", "may be", "not sure", "unsure", "uncertain", "unclear", "guess", "doubt", "unlikely",
     "someone else", "a possibility", "whether", "unknown", "reportedly", "rumoured", "is said to be", "some
     say"), is followed by a clause that only hedges ("Scott Martens (not sure)", "Han Xiao; I don't know"), or
     follows a hedged lead-in ("Possibly: Scott Martens"): it asserts nothing but still competes ("Scott
     Martens, or maybe Han Xiao" offers two authors);
   - *asserted* otherwise.
4. The gold is asserted when an asserted candidate matches each of its parts, in any format the
   candidates read (timestamps, dates in words, SPDX long names, middle initials, "1.04 billion",
   a more precise number that rounds to the gold, "8,192" for "8K", the same measure in another unit to
   as many significant digits: "126 feet" for 38.4 metres, "53.6 °F" for 12 °C), or when its tokens
   (normalize.py) occur in the asserted text of the claim. A gold that is a list (shape.list_items: "red, green,
   blue", "Scott Martens and Han Xiao") is asserted when each item is, in any order; its items joined by "or" are
   alternatives, and any other item of the claim's list contradicts it.
5. Nothing may contradict it: every asserted or offered candidate of a kind the golds have (a bare
   value on a later line is offered) must agree with some gold part. Agreeing means: the same license,
   model id, time or date (a coarser date that fits: "April 2024"; a day inside a gold period); the same
   person (middle initials, "Jr." and order aside) or a part of the name; a number that the gold rounds
   to ("0.6B" beside "597M"; a "K" gold is exact: 512 is not "1K") or the same quantity in another unit
   of the same dimension ("126 feet" beside "38.4 metres"). Numbers compete when they are bare or count
   the noun the gold's number counts; a number of another unit or noun ("8,192 tokens" beside a parameter
   count) is about something else, and so is one dated otherwise than the question, by the date right
   after it or else by its clause's ("in 2023?" - "41,200, up from 36,900 in 2022"; "$1.2 billion in 2023 and $1.5
   billion in 2024"). A bare year-like number is also a count when it stands
   alone or is listed with numbers ("768 or 2048"). People compete with people, other entities with
   entities; any name competes with a name gold when it is a whole item of a list ("- Han Xiao\n-
   Engineering Group") or joined to the gold by "and", "or", "&", "/", "plus" ("Engineering Group and
   Scott Martens", "Berlin or Munich"; "et al.", "and others" too); a gold without typed parts ("granite",
   "v3") competes with short alternatives joined to it the same way ("granite and sandstone"); a name the
   answer writes in lower case competes with what is joined to it, commas included; a version joined to a model id
   gold is another model ("jina-embeddings-v3 or v4"). A candidate whose words
   repeat the question's is no claim ("the model jina-clip-v2 ..."). A yes/no gold wants the claim to open
   with that word (or say only it in a clause: "the answer is no", "it's a no"), unhedged, and never the other (a clause
   "probably not" or "it might be yes" says the other).
A wrong unit ("38.4 feet" for "38.4 metres") asserts nothing and contradicts the gold; a gold that counts
things ("12 lighthouses") is not asserted by a measure ("12 km"), nor a measure (or its bare alias "38.4") by a number that
counts things in the plural ("38.4 storeys").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Optional

from . import candidates as cand
from . import claim as cl
from . import values
from .answer import ANSWER_CAP, claim_of
from .candidates import Candidate
from . import shape
from .normalize import contains, currency_names, fold, tokens, umlaut_forms

CORRECT_VERSION = "correct-4"  # correct-4: comparisons read in their direction, more negations, hedges, retractions (round four)
CLAIM_CHARS = ANSWER_CAP  # of the claim read: all that graders read (padding cut nothing off it: "X" + 2,000 spaces + "or Y")
BARE_LINES = 200  # lines after the claim searched for bare values
BARE_CHARS = 120  # a longer line is prose, not a bare value
_OFFERS = re.compile(r"(?:or|alternatively|otherwise|maybe|perhaps|possibly)\b", re.IGNORECASE)  # a later line that offers
_OWN_DATE = re.compile(r"\s*(?:\(\s*|,?\s*(?:in|for|during|as\s+of|at\s+the\s+end\s+of)\s+(?:the\s+)?(?:year\s+)?)", re.IGNORECASE)
_VERSION_JOINED = re.compile(r"\s*(?:,?\s*(?:or|and|and/or|&|plus)\s+|/\s*)(v?\d+(?:\.\d+)*)\b(?!\s*(?:%|[^\W\d_]))", re.IGNORECASE)
PREAMBLE_LINES = 3  # lines before the answer that state nothing ("Based on the documents, I found the following")

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
    punctuation aside, is one candidate and nothing else; what a line whose label hedges lists ("Alternatives: 41 m",
    "Other possible authors: Han Xiao, Bo Wang"); and what a line that opens with "or" or a hedge names ("(or 41 m)",
    "Alternatively, Han Xiao.")."""
    out = []
    for ln in fold(after or "").splitlines()[:BARE_LINES]:
        text = cl.LIST_ITEM_MARK.sub("", ln).strip(cl.PUNCT + "#>")
        label, colon, rest = re.sub(r"[*_`]", "", text).partition(":")
        if colon and 0 < len(label) <= BARE_CHARS and cl.hedged(label):
            out += cand.find(rest[:CLAIM_CHARS])
            continue
        if _OFFERS.match(text):  # "or Han Xiao", "Alternatively, 41 m", "Maybe Han Xiao."
            out += cand.find(text[:CLAIM_CHARS])
            continue
        found = cand.find(text) if 0 < len(text) <= BARE_CHARS else []
        if len(found) == 1 and found[0].start == 0 and found[0].end == len(text):
            out.append(found[0])
    return out


def _corrections(line: str, after: str, gold: "Gold") -> tuple[str, str]:
    """The claim with the later lines that take it back ("Han Xiao\n\nCorrection: Scott Martens"), read as its next sentences;
    a line that opens softly ("Actually, ...", "Wait, ...", "Update: ...") only when it holds a value of the gold's kinds, a
    replacement ("Actually, he also wrote the follow-up" says more, and stays apart)."""
    kept, taken = [], []
    for k, ln in enumerate(after.splitlines()):
        how = cl.retraction(cl.LIST_ITEM_MARK.sub("", ln)) if k < BARE_LINES else None
        if how == "soft" and not gold.untyped and not any(gold.competes(c) for c in cand.find(ln)) and not contains(ln, gold.golds):
            how = None
        (taken if how else kept).append(re.sub(r"[*_`]", "", cl.LIST_ITEM_MARK.sub("", ln)).strip(" #>") if how else ln)
    if not taken:
        return line, after
    return f"{line.rstrip(' .')}. " + ". ".join(t.rstrip(" .") for t in taken), "\n".join(kept)


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
        if names and c.kind in cl.NAMES and any(p.kind in cl.NAMES for p in views):
            return True
        return any(values.competes(x, views, self.units, self.nouns | (nouns or set())) for x in c.views())

    def agrees(self, c: Candidate) -> bool:
        views = self.views
        if c.kind in cl.NAMES:
            return any(values.agrees(c, Candidate(c.kind, p.value, 0, 0, ""), self.units) for p in views if p.kind in cl.NAMES)
        return any(values.agrees(x, p, self.units) for x in c.views() for p in views if p.kind == x.kind)

    @property
    def views(self) -> list[Candidate]:
        return [v for p in self.all_parts for v in p.views()]

    @property
    def names(self) -> bool:
        return any(p.kind in cl.NAMES for p in self.all_parts)

    @property
    def untyped(self) -> bool:
        return any(not ps for ps in self.parts.values())


def verdict(claim: str, golds: list[str], question: str = "", after: str = "") -> Verdict:
    """`correct` with its reasons; `after`: the answer part's lines after the claim, whose bare values compete."""
    golds = [currency_names(g) for g in golds if g and g.strip()]  # "US dollars", "USD" and "$" are one unit
    if not golds:
        return Verdict(math.nan, "no gold answer")
    gold = Gold.of(golds)
    line = cl.unwrap(currency_names(fold(claim or "").strip()[:CLAIM_CHARS]))
    line, after = _past_preamble(line, cl.unwrap(currency_names(fold(after or ""))), gold, question)
    line, after = _corrections(line, after, gold)
    if not line:
        return Verdict(0.0, "no answer")
    if cl.MARKUP.search(cl.STRUCK.sub("", line)):
        return Verdict(0.0, "the answer line is document markup, not a claim", claim=line)
    masked = cl.mask_quotes(line, question)
    found = cand.find(line)
    clauses = cl.clauses(line, masked, found)
    if (polar := _polarity(gold.golds)) is not None:
        return _polar_verdict(line, masked, clauses, polar, after)
    denied = cl.negations(line, masked, clauses, found, [*gold.golds, *(i for g in gold.golds for i in shape.list_items(g))]) \
        + cl.modified(line, found) + [(m.start(), m.end()) for m in cl.STRUCK.finditer(line)]
    status = {id(c): cl.status(c, line, masked, clauses, denied, found) for c in found}
    asserted = [c for c in found if status[id(c)] == "asserted"]
    free = cl.asserted_mask(line, clauses, denied)
    q_tokens = tokens(question)
    matched: list[Candidate] = []
    spans: list[tuple[int, int]] = []  # where the gold is asserted in the line
    gold_hit, textual_only, listed, alternatives = None, True, False, None
    for g, ps in gold.parts.items():
        if items := shape.list_items(g):  # a gold that is a list: each item asserted, in any order
            where = [_item(item, asserted, line, free, found, gold) for item in items]
            if all(where):
                gold_hit, listed = gold_hit or g, True
                textual_only = textual_only and not all(cand.find(fold(item)) for item in items)
                spans += [s for w in where for s in w]
                if shape.as_alternatives(line, sorted(w[0] for w in where)):
                    alternatives = f"offers the items of {g!r} as alternatives"
            continue
        hits = [next((c for c in asserted if any(values.asserts(x, y, gold.units) for x in c.views() for y in p.views())), None) for p in ps]
        textual = not any(p.kind in cl.TYPED_ONLY for p in ps)  # names and model ids may match as words too ("scott martens")
        if ps and all(hits):
            gold_hit, textual_only = gold_hit or g, False
            matched += hits
            spans += [(h.start, h.end) for h in hits]
        elif textual and (where := cl.textual(line, g, free, found)):
            gold_hit = gold_hit or g
            spans += where
    v = Verdict(0.0, "", [c.text for c in asserted], [c.text for c in found if status[id(c)] == "offered"],
                [c.text for c in found if status[id(c)] == "denied"], context=[c.text for c in found if status[id(c)] == "context"],
                claim=line)
    nouns = {p.value.noun for p in matched if p.kind == "number" and p.value.noun}
    other_date = _about_another_date(line, found, clauses, question)
    v.contradicting = [c.text for c in found if status[id(c)] in ("asserted", "offered") and gold.competes(c, nouns)
                       and not gold.agrees(c) and not _echo(c, q_tokens) and not other_date(c)
                       and not (c.kind in cl.NAMES and shape.explains(line, c.start, c.end, clauses, spans))]
    for c in found:  # a bound or total the gold breaks is another answer ("35%, or more than 40%")
        if status[id(c)] == "context" and gold.competes(c, nouns) and not _within(c, cl.context(c, masked, found), gold):
            v.contradicting.append(c.text)
    if gold_hit is not None and (gold.names or gold.untyped or listed):  # alternatives joined to the gold ("Berlin or Munich")
        v.contradicting += [t for t in _coordinated(line, spans, found, status, gold, lowercase=textual_only, q_tokens=q_tokens,
                                                    listed=listed) if t not in v.contradicting]
    if gold_hit is not None and any(p.kind == "model" for p in gold.all_parts):  # "jina-embeddings-v3 or v4": another version
        v.contradicting += [m[1] for s, e in spans if (m := _VERSION_JOINED.match(line, e)) and m[1] not in v.contradicting]
    if listed:  # a list gold: an item of the claim's own list that is no gold item is one too many ("- red\n- green\n- yellow")
        v.contradicting += [t for t in shape.extra_items(line, gold.golds) if t not in v.contradicting]
    if alternatives:
        v.contradicting.append(alternatives)
    for c in cl.bare_items(line, found):  # a list's items are alternatives: a person and an entity compete ("- Han Xiao\n- Engineering Group")
        if status[id(c)] in ("asserted", "offered") and gold.competes(c, nouns, names=True) and not gold.agrees(c) \
                and not _echo(c, q_tokens) and c.text not in v.contradicting:
            v.contradicting.append(c.text)
    for c in bare_values(after):  # a value alone on a later line is offered beside the answer
        v.offered.append(c.text)
        if gold.competes(c, nouns, names=True) and not gold.agrees(c) and not _echo(c, q_tokens):
            v.contradicting.append(c.text)
    if gold_hit is not None and shape.inside_longer_name(line, golds) and not matched:
        gold_hit, v.reason = None, "the gold is only part of a longer name"
    if gold_hit is not None and (choice := shape.wrong_choice(line, question, golds)):
        v.contradicting.append(choice)
    if gold_hit is None:
        v.reason = v.reason or "the gold is not asserted" + (" (it is only offered, denied or a bound)" if any(contains(line, [g]) for g in golds) else "")
    elif v.contradicting:
        v.reason = "the gold is asserted beside other candidates: " + "; ".join(v.contradicting)
    else:
        v.value, v.reason = 1.0, f"asserts {gold_hit!r} and nothing contradicting it"
    return v


# ---- reading the claim ----------------------------------------------------------------------------
def _past_preamble(line: str, after: str, gold: Gold, question: str) -> tuple[str, str]:
    """The claim past lines that state nothing: a first line with no candidate of the gold's kinds, no gold, and neither a
    negation, hedge, question nor retraction (or one that only restates the question) introduces the next line."""
    q_tokens = tokens(question)
    q = set(q_tokens)
    for _ in range(PREAMBLE_LINES):
        if not after.strip() or not line or cl.MARKUP.search(line) or any(contains(line, [g]) for g in gold.golds):
            break
        if any(gold.competes(c) and not _echo(c, q_tokens) for c in cand.find(line)):
            break
        masked = cl.mask_quotes(line, question)
        words = [t for t in tokens(masked) if not t.isdigit()]
        restates = bool(q) and bool(words) and all(t in q for t in words)
        if not (cl.cue_free(masked) or restates):
            break
        nxt, after = claim_of(after)
        if not nxt:
            break
        line = f"{line.rstrip(' .!?:;,')}; {nxt}"[:CLAIM_CHARS]
    return line, after


def _item(item: str, asserted: list[Candidate], line: str, free: str, found: list[Candidate], gold: Gold) -> list[tuple[int, int]]:
    """Where one item of a list gold is asserted: by its typed parts (each asserted by a candidate) or, when it has no number,
    date or time, by its words in the asserted text; [] when it is not."""
    parts = cand.find(fold(item))
    hits = [next((c for c in asserted if any(values.asserts(x, y, gold.units) for x in c.views() for y in p.views())), None) for p in parts]
    if parts and all(hits):
        return sorted((h.start, h.end) for h in hits)
    if any(p.kind in cl.TYPED_ONLY for p in parts):
        return []
    return sorted(cl.textual(line, item, free, found))


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
                tol = values.half_ulp(cr) * abs(cand.scale_of(q.unit, unit) or 1) if q.unit and unit and q.unit != unit else values.half_ulp(cr)
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


def _coordinated(line: str, spans: list[tuple[int, int]], found: list[Candidate], status: dict, gold: Gold, lowercase: bool,
                 q_tokens: list[str], listed: bool = False) -> list[str]:
    """Alternatives joined to the gold by "and", "or", "&", "/" ("Berlin or Munich", "Jina AI and Elastic", "granite and
    sandstone"), or by commas in a list that has such a join (or any comma, when the gold is itself a list); for a name
    written in capitals, capitalised items only."""
    capitals = gold.names and not (lowercase and not gold.untyped)
    item_re = cl.CAP_ITEM if capitals and not lowercase else cl.ANY_ITEM
    out: list[str] = []
    for s, e in spans:
        items = cl.chain(line, s, e, item_re, commas=(lowercase and gold.names) or listed)
        if item_re is cl.CAP_ITEM:  # a name written in lower case beside a capitalised gold ("Scott Martens and han xiao")
            items += [i for i in cl.chain(line, s, e, cl.ANY_ITEM, commas=False) if cl.lower_name(i[2]) and i not in items]
        if gold.names and (more := cl.MORE_AUTHORS.match(line, e)):
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


def _polarity(golds: list[str]) -> Optional[str]:
    """"yes" or "no" when every gold is that one word; else None."""
    words = {tuple(tokens(g)) for g in golds}
    if all(len(w) == 1 and w[0] in cl.YES for w in words):
        return "yes"
    if all(len(w) == 1 and w[0] in cl.NO for w in words):
        return "no"
    return None


def _polar_verdict(line: str, masked: str, clauses: list[cl.Clause], polar: str, after: str = "") -> Verdict:
    """A yes/no gold: the claim opens with that answer (or says it alone in a clause: "Not really, no."), committed, and never
    answers the other way or takes it back."""
    said = lambda c: cl.said(masked[c.start:c.end])
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", cl.NOT_NEGATION.sub(" ", masked))]  # "No doubt, yes." opens with yes
    first = "yes" if words and words[0] in cl.YES else "no" if words and words[0] in cl.NO else None
    k = 0
    if first is None:
        alone = [(i, said(c)) for i, c in enumerate(clauses) if said(c)]
        if len({p for _, p in alone}) == 1:
            k, first = alone[0]
    opposite = "no" if polar == "yes" else "yes"
    both = re.search(r"\b(?:yes|no)\s*(?:and|or|/)\s*(?:yes|no)\b", masked, re.IGNORECASE)
    later = clauses[k + 1:]
    taken_back = any(said(c) == opposite or (said(c) is None and (cl.RETRACT_ALONE.fullmatch(masked[c.start:c.end].strip(cl.PUNCT))
                                                                 or cl.RETRACT_START.match(masked[c.start:c.end].strip(cl.PUNCT))))
                     for c in later)
    taken_back |= any(cl.said(cl.LIST_ITEM_MARK.sub("", ln)) == opposite for ln in after.splitlines()[:BARE_LINES])
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


def _about_another_date(line: str, found: list[Candidate], clauses: list[cl.Clause], question: str):
    """A test: is candidate c dated otherwise than the question ("How many visitors in 2023?" - "41,200, up from 36,900 in
    2022": 36,900 is about 2022, not a second answer)? By the date right after it ("$1.5 billion in 2024", "$1.5 billion
    (2024)"), else by the dates of its clause. Never for dates themselves."""
    asked = [c for c in cand.find(fold(question)) if c.kind == "date"]

    def test(c: Candidate) -> bool:
        if not asked or c.kind == "date":
            return False
        own = next((d for d in found if d.kind == "date" and d.start >= c.end and _OWN_DATE.fullmatch(line[c.end:d.start])), None)
        if own is not None:
            return not any(values.agrees(own, q, set()) for q in asked)
        where = cl.clause_of(c.start, clauses)
        dates = [d for d in found if d.kind == "date" and where is not None and where.start <= d.start < where.end]
        return bool(dates) and all(not values.agrees(d, q, set()) for d in dates for q in asked)

    return test


def _echo(c: Candidate, q_tokens: list[str]) -> bool:
    return _echo_text(c.text, q_tokens)


def _echo_text(text: str, q_tokens: list[str]) -> bool:
    t = tokens(text)
    return bool(t) and any(q_tokens[i : i + len(t)] == t for i in range(len(q_tokens) - len(t) + 1))
