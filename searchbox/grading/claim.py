"""Reading a claim: its clauses, what each negates, hedges, asks or takes back, its bounds and totals, quoted titles, lists.

Used by grading/correct.py (its docstring says what each rule means); nothing here knows the gold's value, only its words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from . import candidates as cand
from .candidates import Candidate
from .normalize import contains, tokens

ITEM_WORDS = 4  # words of a coordinated alternative ("Scott Martens and Han Xiao"); a longer run is prose
_NEGATION = re.compile(r"\b(?:by\s+no\s+means|any(?:one|body|thing)\s+but|not|never|cannot|neither|nor|none|no|nobody|nothing|noone)\b"
                       r"|n['\u2019]t\b|\b(?:rather\s+than|instead\s+of|other\s+than|except|unlike)\b"
                       r"|\b(?:incorrect|wrong|false|untrue|mistaken|(?:wrong|mistaken|false|erroneous|incorrect)ly|ruled\s+out|excluded|eliminated|"
                       r"disproven|disproved|debunked|discredited)\b",
                       re.IGNORECASE)
_PLAIN_NEGATION = re.compile(r"not|never|cannot|neither|nor|none|no|nobody|nothing|noone|n['\u2019]t", re.IGNORECASE)
_EXCEPTION = re.compile(r"\b(?:other\s+than|except(?:\s+for)?|besides|apart\s+from|save\s+for|but)\b", re.IGNORECASE)
_PREDICATE = re.compile(r"not|never|cannot|n['\u2019]t|incorrect|wrong|false|untrue|mistaken|(?:wrong|mistaken|false|erroneous|incorrect)ly"
                        r"|ruled\s+out|excluded|eliminated|disproven|disproved|debunked|discredited|by\s+no\s+means",
                        re.IGNORECASE)  # may deny what precedes
NOT_NEGATION = re.compile(r"\b(?:not\s+only|not\s+just|not\s+until|not\s+least|not\s+to\s+mention|no\s+doubt|nothing\s+but|"
                           r"whether\s+or\s+not|whether\b[^,;.!?]{0,80}?\bor\s+not|"
                           r"without\s+(?:a\s+)?doubt|(?:no|not)\s+(?:later|earlier|more|less|fewer|sooner)\s+than)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|might|(?:may|could)\s+be|unsure|uncertain|unclear|not\s+sure|not\s+certain|guess|"
                    r"doubt|doubtful|unlikely|improbable|allegedly|supposedly|(?:someone|somebody|something)\s+else|"
                    r"or\s+(?:another|other)s?|alternatives?|alternatively|whether|unknown|rumou?red|reportedly|reputedly|"
                    # "possible" hedges as a predicate or beside a candidate ("X is possible", "one possible author"),
                    # never as a plain adjective ("the best possible choice", "as soon as possible")
                    r"possibilit(?:y|ies)|(?:is|are|was|were|be|seems?|it['\u2019]s)\s+(?:\w+\s+)?possible|"
                    r"(?:a|one|another|other|some|several)\s+possible|possible\s+(?:answers|candidates|options|authors|values|choices|matches)|"
                    r"(?:said|thought|believed|reported|rumou?red|claimed|alleged)\s+to\s+(?:be|have)|"
                    r"some\s+(?:say|said|claim|claimed|believe|think|sources))\b", re.IGNORECASE)
_HEDGE_ALONE = re.compile(r"(?:maybe|perhaps|possibly|allegedly|supposedly|unsure|uncertain|unclear|unknown|i\s+guess|"
                          r"(?:i\s+am\s+|i['\u2019]m\s+)?not\s+(?:sure|certain)|i\s+(?:do\s+not|don['\u2019]t)\s+know|(?:i\s+have\s+)?no\s+idea|"
                          r"hard\s+to\s+say|(?:i\s+)?(?:cannot|can['\u2019]t)\s+(?:say|tell))", re.IGNORECASE)
RETRACT_ALONE = re.compile(r"(?:no|nope|nah|not|not it|wrong|incorrect|false|not really|oops|wait|just kidding|kidding|no wait|sorry|"
                           r"actually|actually no|correction|scratch that|strike that|or rather|rather|make that|"
                           r"i\s+was\s+wrong(?:\s+(?:above|earlier|before))?|i\s+retract\s+(?:that|this|it)|i\s+take\s+(?:that|it)\s+back|"
                           r"(?:ignore|disregard)\s+(?:that|this|the\s+above)|"
                           r"(?:that|this|it)(?:['\u2019]s|\s+is|\s+was)\s+(?:wrong|incorrect|false|untrue|inaccurate|"
                           r"not\s+(?:right|correct|true|it|so|accurate)|(?:a\s+)?(?:common\s+|popular\s+)?(?:misconception|myth|mistake|error)))",
                           re.IGNORECASE)
RETRACT_START = re.compile(r"(?:actually|correction|i mean|or rather|no wait|wait|scratch that|strike that|make that|on second thought|"
                           r"on reflection|just kidding|kidding|(?:update|edit)(?=\s*$))\b", re.IGNORECASE)
# Retraction openers that take back only when a replacement follows ("Actually, it is Scott Martens"; "Actually, he also wrote
# the follow-up" says more): on a line after the claim they need a competing value (correct.py); the others need none.
_RETRACT_SOFT = re.compile(r"(?:actually|wait|no\s+wait|correction|sorry|oops|rather|or\s+rather|make\s+that|i\s+mean|on\s+second\s+thought|"
                           r"on\s+reflection|update|edit)", re.IGNORECASE)
_BOUNDARY = re.compile(r"[.!?;:](?=\s|$)|,(?=\s)|[()\[\]{}]|\s[-\u2013\u2014]+(?=\s)"
                       r"|(?<!\banyone)(?<!\banybody)(?<!\banything)\s(?=(?:but|however|whereas|although|though)\b)"
                       r"|\s(?=(?:no\s+wait|i\s+mean|or\s+rather|scratch\s+that)\b)", re.IGNORECASE)
MARKUP = re.compile(r"</?(?!(?:b|strong|i|em|u|mark|code|sup|sub|br|small|s|del|strike)\b)[a-z][a-z0-9]*\b[^>]*>", re.IGNORECASE)
# plain HTML elements without attributes that wrap an answer ("<p>Han Xiao</p>"): text, unless other markup is there too
_BLOCK_WRAPPER = re.compile(r"</?(?:p|div|section|article|blockquote|h[1-6]|li|ul|ol|td|tr|th|table|tbody|thead|answer|center)\s*/?>",
                            re.IGNORECASE)
_INLINE_WRAPPER = re.compile(r"</?(?:span|font)\s*>", re.IGNORECASE)
_MODIFIED = re.compile(r"[^\s\-]+(?:-[^\s\-]+)*-(?:compatible|ish|like|style|based|inspired|derived|esque)\b", re.IGNORECASE)
STRUCK = re.compile(r"~~.+?~~|<(s|del|strike)>.*?</\1>", re.IGNORECASE)
_QUOTED = re.compile(r"\"[^\"\n]{1,300}\"|\u201c[^\u201d\n]{1,300}\u201d|\u201e[^\u201c\u201d\n]{1,300}[\u201c\u201d]")
PUNCT = " \t*_\"'`.,!?;:()[]{}-\u2013\u2014"
LIST_ITEM_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+")
TYPED_ONLY = ("number", "date", "time")  # golds with such a part are asserted by a typed candidate only (units, precision)
NAMES = ("person", "entity")
# bounds: a value after these is a limit, not the value ("before 2024-04-16", "more than 35%"); "up to"/"at most" state a maximum
_BOUND_DATE = re.compile(r"\b(?:before|after|by|until|till|prior\s+to|earlier\s+than|later\s+than|no\s+(?:later|earlier|sooner)\s+than|"
                         r"not\s+(?:before|after)|as\s+(?:early|late)\s+as)\s+(?:(?:the|a|an|its|their)\s+)?$", re.IGNORECASE)
# a comparative adjective ("taller", "heavier", "older"), not a word that only ends like one ("rather", "other": a negation)
_COMPARATIVE = r"(?:more|less|fewer|(?!(?:rather|other|another|either|neither|whether|over|under|after|ever|never|together|however)\b)[a-z]{2,}er)"
_BOUND_NUMBER = re.compile(rf"(?:\b{_COMPARATIVE}\s+than|\b(?:over|above|exceeding|under|below|"
                           r"nearly|almost|at\s+least|upwards\s+of|in\s+excess\s+of|not\s+quite|close\s+to|just\s+(?:over|under|below|above|"
                           r"shy\s+of)|no\s+(?:more|less|fewer)\s+than)|[<>\u2264\u2265]=?)\s*$", re.IGNORECASE)
_NOT_UNTIL = re.compile(r"\bnot\s+until\s*$", re.IGNORECASE)  # "not until 1856": then and not before
_RANGE_FIRST = re.compile(r"\bbetween\s*$", re.IGNORECASE)
_POST_BOUND = re.compile(rf"\s*(?:\+(?!\w)|or\s+(?:{_COMPARATIVE}|above|below|over|under|before|after)\b"
                         r"|and\s+(?:up|above|over|more|later|earlier|beyond)\b"
                         r"|at\s+(?:the\s+)?(?:least|most|latest|earliest)\b)", re.IGNORECASE)
_LOWER_FIRST = re.compile(r"no\s+(?:earlier|sooner|less|fewer)|not\s+before|at\s+least|earliest", re.IGNORECASE)
_UPPER = re.compile(r"less|fewer|lower|smaller|shorter|younger|lighter|narrower|shallower|cheaper|colder|cooler|weaker|thinner|"
                    r"under|below|nearly|almost|quite|close|shy|no\s+more|no\s+later|[<\u2264]|before|\bby\b|"
                    r"until|till|prior|earlier|not\s+after|latest|most", re.IGNORECASE)
_FROM = re.compile(r"\bfrom\s*$", re.IGNORECASE)
_TO = re.compile(r"\s*(?:to|until|till|through|-|\u2013)\s", re.IGNORECASE)
_RANGE_SECOND = re.compile(r"\b(?:between|from)\s+\S[^;:!?]{0,60}?\s*(?:and|to|until|till|-|\u2013)\s*$", re.IGNORECASE)
_DENOMINATOR = re.compile(r"(?:\bout\s+of|\bof\s+(?:the|all|its|their|a\s+total\s+of)|\(\s*of|\bof)\s*$", re.IGNORECASE)
_JOIN = re.compile(r"\s*,?\s*(?:and/or|and|or|&|plus|as\s+well\s+as|along\s+with|together\s+with)\s+|\s*[/&+]\s*", re.IGNORECASE)
_COMMA = re.compile(r"\s*,\s*")
CAP_ITEM = re.compile(r"[A-Z][\w'\u2019.-]*(?:\s+(?:(?:van|von|de|der|den|da|di|du|le|la|bin|al)\s+)*[A-Z][\w'\u2019.-]*){0,3}")
ANY_ITEM = re.compile(r"[^\W_][\w'\u2019.-]*(?:\s+[^\W_][\w'\u2019.-]*){0,3}")
_ITEM_END = re.compile(r"\s*(?:$|[.,;:!?)\]*_]|(?:and/or|and|or|&|plus)\b|[/&+])", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r";\s+")  # the claim joins list items (and a lead-in with its line) with "; "
MORE_AUTHORS = re.compile(r"\s*,?\s*(?:et\s+al\b\.?|and\s+(?:others|colleagues|co-?authors|(?:his|her|their)\s+team|team))", re.IGNORECASE)
_NOT_NAMES = frozenset("nobody noone none nothing else others other alone too also more less later earlier".split())
YES = frozenset("yes yeah yep yup correct true indeed affirmative".split())
NO = frozenset("no nope nah false incorrect negative".split())


@dataclass
class Clause:
    start: int
    end: int
    question: bool = False
    hedged: bool = False
    retracted: bool = False
    colon: bool = False  # ends in a colon: a lead-in to what follows


def modified(line: str, found: list[Candidate]) -> list[tuple[int, int]]:
    """Values with an adjective glued on, which name something else ("Apache-2.0-compatible", "Apache 2.0-ish",
    "granite-like"): each such word, grown to the candidates it overlaps (denied, as a negation's range is)."""
    out = []
    for m in _MODIFIED.finditer(line):
        s, e = m.start(), m.end()
        for c in found:
            if c.start < e and s < c.end:
                s, e = min(s, c.start), max(e, c.end)
        out.append((s, e))
    return out


def unwrap(text: str) -> str:
    """Text with plain HTML wrappers (no attributes) taken off: a block element parts items ("; "), an inline one nothing;
    unchanged when any other markup (attributes, images, links) is there: then it is a copied document (MARKUP)."""
    if not (_BLOCK_WRAPPER.search(text) or _INLINE_WRAPPER.search(text)):
        return text
    bare = _INLINE_WRAPPER.sub("", _BLOCK_WRAPPER.sub("; ", text))
    if MARKUP.search(STRUCK.sub("", bare)):
        return text
    return re.sub(r"(?:\s*;\s*)+(?=;)", "", re.sub(r"^(?:\s*;\s*)+|(?:\s*;\s*)+$", "", bare, flags=re.M))


def bare_items(line: str, found: list[Candidate]) -> list[Candidate]:
    """The candidates that are a whole item of the claim's list ("Han Xiao; Engineering Group"), markup and punctuation aside."""
    cuts = [m.start() for m in _ITEM_SPLIT.finditer(line)]
    if not cuts:
        return []
    out, start = [], 0
    for end in cuts + [len(line)]:
        a, b = start, end
        while a < b and (line[a] in PUNCT + "#>" or line[a].isspace()):
            a += 1
        while b > a and (line[b - 1] in PUNCT or line[b - 1].isspace()):
            b -= 1
        inside = [c for c in found if a <= c.start < b]
        if len(inside) == 1 and (inside[0].start, inside[0].end) == (a, b):
            out.append(inside[0])
        start = end + 1
    return out


def titles(line: str, question: str) -> list[tuple[int, int]]:
    """The quotations that are titles: quoted in the question too, or three words or more opening with a capital (scare quotes
    around a word or two, '"not" Apache-2.0', are no title)."""
    q = tokens(question)
    out = []
    for m in _QUOTED.finditer(line):
        inner = m[0][1:-1].strip()
        t = tokens(inner)
        echoed = bool(t) and any(q[i : i + len(t)] == t for i in range(len(q) - len(t) + 1))
        if echoed or (len(inner.split()) >= 3 and inner[:1].isupper()):
            out.append((m.start(), m.end()))
    return out


def mask_quotes(line: str, question: str = "") -> str:
    """The line with the inside of each quoted title blanked: a title ("DSPy: Not Your Average Prompt Engineering",
    "Is Romance Generative AI's Killer App? We Hope Not") negates, hedges, asks and ends nothing."""
    out = list(line)
    for a, b in titles(line, question):
        out[a + 1:b - 1] = " " * (b - a - 2)
    return "".join(out)


def retraction(text: str) -> Optional[str]:
    """How a line opens when it takes back what came before: "hard" ("No.", "Wrong", "That's not correct", "Scratch that"),
    "soft" ("Actually, ...", "Correction: ...", "Wait, ...", "Update: ...": a replacement may follow), or None."""
    text = re.sub(r"[*_`]", "", text).strip(PUNCT + "#>")
    first = next((m.start() for m in _BOUNDARY.finditer(text)), len(text))
    head = text[:first].strip(PUNCT)
    if RETRACT_ALONE.fullmatch(head) and not _RETRACT_SOFT.fullmatch(head):
        return "hard"
    if RETRACT_START.match(head) or RETRACT_ALONE.fullmatch(head):
        return "soft"
    return None


def hedged(text: str) -> bool:
    """The text hedges ("Alternatives", "Other possible authors", "Possibly also")."""
    return bool(_HEDGE.search(NOT_NEGATION.sub(" ", text)))


def cue_free(text: str) -> bool:
    text = NOT_NEGATION.sub(" ", text)
    return not (_NEGATION.search(text) or _HEDGE.search(text) or RETRACT_START.search(text)
                or RETRACT_ALONE.fullmatch(text.strip(PUNCT)))


def clauses(line: str, masked: str, found: list[Candidate]) -> list[Clause]:
    inside = bytearray(len(line))  # a comma in "April 16, 2024" or a colon in a quoted title cuts nothing
    for c in found:
        inside[c.start:c.end] = b"\x01" * (c.end - c.start)
    for a, b in ((m.start(), m.end()) for m in _QUOTED.finditer(line) if masked[m.start() + 1:m.end() - 1].isspace()):
        inside[a + 1:b - 1] = b"\x01" * (b - a - 2)
    out, start = [], 0
    for m in _BOUNDARY.finditer(line):
        if inside[m.start()]:
            continue
        out.append(Clause(start, m.start(), question=m[0] == "?", colon=m[0] == ":"))
        start = m.end() if m[0].strip() else m.start()
    out.append(Clause(start, len(line)))
    out = [c for c in out if line[c.start:c.end].strip(PUNCT)] or [Clause(0, len(line))]
    for k, c in enumerate(out):
        text = masked[c.start:c.end].strip(PUNCT)
        c.hedged = bool(_HEDGE.search(NOT_NEGATION.sub(" ", text)))
        if _HEDGE_ALONE.fullmatch(text) and k:  # "Scott Martens (not sure)": the hedge is about the clause before
            out[k - 1].hedged = True
        if RETRACT_ALONE.fullmatch(text) or RETRACT_START.match(text):
            for earlier in out[:k]:
                earlier.retracted = True
    for k, c in enumerate(out):
        if c.colon and c.hedged:  # "Possibly: Scott Martens": a hedged lead-in hedges what it introduces
            for later in out[k + 1:]:
                later.hedged = True
    return out


def negations(line: str, masked: str, clauses: list[Clause], found: list[Candidate], golds: list[str]) -> list[tuple[int, int]]:
    denied = []
    for cl in clauses:
        text = NOT_NEGATION.sub(lambda m: " " * len(m[0]), masked[cl.start:cl.end])
        lead = len(text) - len(text.lstrip(PUNCT))
        if opener := RETRACT_START.match(text, lead):  # "no wait Scott Martens": the retraction denies what came before, not this
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


def clause_of(pos: int, clauses: list[Clause]) -> Optional[Clause]:
    return next((c for c in clauses if c.start <= pos < max(c.end, c.start + 1)), None)


def status(c: Candidate, line: str, masked: str, clauses: list[Clause], denied: list[tuple[int, int]], found: list[Candidate]) -> str:
    cl = clause_of(c.start, clauses)
    if cl is None or cl.retracted or any(s <= c.start < e for s, e in denied):
        return "denied"
    if context(c, masked, found):
        return "context"
    return "offered" if cl.question or cl.hedged else "asserted"


def context(c: Candidate, masked: str, found: list[Candidate]) -> Optional[str]:
    """How a bound or a total states no value: "min" ("more than 35%", "after 2024-04-16", the low end of "between 12 and 15"),
    "max" ("before 2024-04-16", "35% or less", the high end of a range, "12 of the 40": a total), or None (a value)."""
    before, after = masked[max(0, c.start - 80):c.start], masked[c.end:c.end + 20]
    if c.kind not in ("number", "date", "time"):
        return None
    if _FROM.search(before) and _TO.match(after):
        return "min"  # "from 2024-04-16 to 2024-04-18", "from 12 to 15": a range
    if (post := _POST_BOUND.match(after)):
        return side(post[0])  # "35% or more", "2024-04-16 at the latest"
    if _RANGE_FIRST.search(before):
        return "min"
    if _RANGE_SECOND.search(before):
        return "max"
    if c.kind in ("date", "time"):
        if not _NOT_UNTIL.search(before) and (m := _BOUND_DATE.search(before)):
            strict = re.match(r"\s*(?:before|after|earlier\s+than|later\s+than)", m[0], re.IGNORECASE)
            return side(m[0]) + ("<" if strict else "")
        return None
    if (m := _BOUND_NUMBER.search(before)):
        return side(m[0])
    prev = [d for d in found if d.kind == "number" and d.end <= c.start and c.start - d.end <= 12]
    return "max" if prev and _DENOMINATOR.search(masked[prev[-1].end:c.start]) else None


def side(bound: str) -> str:
    return "min" if _LOWER_FIRST.search(bound) or not _UPPER.search(bound) else "max"


def asserted_mask(line: str, clauses: list[Clause], denied: list[tuple[int, int]]) -> str:
    """The line with every character that is not asserted (questions, hedges, retractions, denied ranges) blanked out."""
    keep = bytearray(b"\x01" * len(line))
    for cl in clauses:
        if cl.question or cl.hedged or cl.retracted:
            keep[cl.start:cl.end] = b"\x00" * (cl.end - cl.start)
    for s, e in denied:
        keep[s:e] = b"\x00" * (e - s)
    return "".join(ch if k else "\x00" for ch, k in zip(line, keep))


def widen(a: int, b: int, found: list[Candidate]) -> tuple[int, int]:
    """A span grown to the name it is part of ("Stanford" in "Stanford University")."""
    for c in found:
        if c.kind in NAMES and c.start <= a and b <= c.end:
            return c.start, c.end
    return a, b


def textual(line: str, gold: str, free: str, found: list[Candidate]) -> list[tuple[int, int]]:
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
                    while b > a and line[b - 1] in PUNCT:
                        b -= 1
                    while a < b and line[a] in PUNCT:
                        a += 1
                    out.append(widen(a, b, found))
                    break
    return [o for o in out if not any(p != o and o[0] <= p[0] and p[1] <= o[1] for p in out)]


def chain(line: str, s: int, e: int, item_re: re.Pattern, commas: bool) -> list[tuple[int, int, str]]:
    """The items of a list the span [s, e) is in: walked forwards and backwards over joins (and commas)."""
    items, joined, pos = [], False, e
    while True:  # forwards
        j = _JOIN.match(line, pos) or (_COMMA.match(line, pos) if True else None)
        if not j:
            break
        m = item_re.match(line, j.end())
        if not m:
            break
        text = trim(m[0], first=True)
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
        text = trim(m[0], first=False)
        if not text:
            break
        start = j.start() - len(text)
        joined |= _JOIN.fullmatch(j[0]) is not None
        items.append((start, j.start(), text))
        pos = start
    return items if joined or (commas and len(items) >= 1) else []


def lower_name(text: str) -> bool:
    words = text.split()
    return 2 <= len(words) <= 3 and all(w.isalpha() and w.islower() and w not in cand.STOP and w not in _NOT_NAMES for w in words)


def trim(item: str, first: bool) -> str:
    """An item's words up to the first stop word (forwards) or after the last one (backwards); "" when there is none."""
    words = item.split()
    keep: list[str] = []
    for w in (words if first else reversed(words)):
        if w.lower().strip(".,") in cand.STOP or w in cand.STOP_CAPITALS:
            break
        keep.append(w)
    keep = keep if first else keep[::-1]
    return " ".join(keep) if len(keep) <= ITEM_WORDS else ""


# what may stand before a clause's yes or no and leave it that answer: joins, hedges ("probably not", "it might be yes") and
# copulas ("the answer is no", "it's a no", "I'd say no")
_SAID_LEAD = re.compile(r"(?:or|and|but|maybe|perhaps|possibly|probably|likely|then|also|so|though|although|"
                        r"it\s+(?:might|may|could)\s+(?:also\s+)?be|the\s+answer\s+is|it['\u2019]?s\s+a|it\s+is\s+a|"
                        r"i\s+(?:think|guess|would\s+say)|i['\u2019]d\s+say)\s+")


def said(text: str) -> Optional[str]:
    """"yes"/"no" when a clause says only that ("or no", "maybe not"), else None."""
    t = text.strip(PUNCT).lower()
    while (m := _SAID_LEAD.match(t)):
        t = t[m.end():]
    return "yes" if t in YES else "no" if t in NO or t == "not" else None
