"""What `correct` reads from the question's shape (issue 29): comparisons that name their options, whole names, explanations.

- A *comparison* question names its options after a comma or colon, joined by "or", before its question mark
  ("Which is higher, Wellington Tower or Gannet Rock?"). When the gold is one of them, the answer must choose it:
  the other option named first (as the winner: "Wellington Tower is higher than Gannet Rock") is wrong, and so are
  both named with no word of comparison or contrast between them ("Gannet Rock and Wellington Tower are both tall").
  The gold first, then the other after "than", "before", "after", "not", "over", "rather", "unlike", "instead", is right.
  Where the answer compares on the scale the question asks (COMPARATIVES: height and size, time, speed, heat), its
  comparative's direction decides instead: "Gannet Rock is lower than Wellington Tower" makes Wellington Tower the higher,
  and so do "not higher than", "less high than" and "outranked by"; the subject is the option named last before the
  comparative in its sentence (a denied one aside: "X, not Y, was born first"), else the option after it.
- *Whole names*: a one-word gold found only right after a capitalised word of the same name ("New York", "North York" for
  "York") is not asserted; a function word before it ("in York", "The York") joins no name.
- An *explanation*: when the gold is asserted in the claim's first clause, a name in another clause that says something
  of it (more than the name itself: "Phil Spector wrote it; the Teddy Bears recorded it first."), or after the gold in
  its own clause with words between them, explains the answer rather than offering another, unless its clause (or the words between) offers an alternative,
  a contrast or a co-credit ("or", "maybe", "also", "but", "actually", "credited", "with help", "and"). Names joined to the gold by "and"/"or"
  or listed with it still compete (correct.py).
"""

from __future__ import annotations

import re
from typing import Optional

from .normalize import tokens

_OPTIONS = re.compile(r"[,:]\s*([^,:?]{1,120}?)\s+or\s+([^,:?]{1,120}?)\s*\?\s*$", re.IGNORECASE)
_CHOOSES = re.compile(r"\b(?:than|before|after|not|over|rather|unlike|instead|ahead\s+of|beats?|exceeds?|outranks?|whereas|while)\b", re.I)
_DENIED_BEFORE = re.compile(r"\b(?:not|rather\s+than|unlike|instead\s+of|other\s+than)\s*$", re.I)
_FUNCTION = frozenset("a an the in of at on to from by with for as and or is was are were it its this that de la le".split())
_ALTERNATIVE = frozenset(("or maybe perhaps possibly probably either nor also plus et al alternatively but however actually really though "
                          "although whereas instead credited with help together alongside and co jointly").split())
# Comparatives by the scale they compare on and their direction (+1: more of it, earlier; -1: less of it, later); verbs turn round in
# the passive ("outranked by"). Data: the words a comparison question and its answer use.
_SCALE_WORDS = {
    "size": ("higher highest taller tallest bigger biggest larger largest greater greatest longer longest heavier heaviest wider widest "
             "deeper deepest loftier more most above exceeds exceeded surpasses surpassed outranks outranked tops topped beats beat beaten "
             "outnumbers outnumbered outweighs outweighed dwarfs dwarfed",
             "lower lowest shorter shortest smaller smallest lesser less least fewer fewest lighter lightest narrower narrowest shallower "
             "shallowest below trails trailed"),
    "time": ("earlier earliest first before sooner soonest older oldest elder eldest predates predated precedes preceded",
             "later latest last after younger youngest newer newest second follows followed postdates postdated"),
    "speed": ("faster fastest quicker quickest", "slower slowest"),
    "heat": ("hotter hottest warmer warmest", "colder coldest cooler coolest"),
}
COMPARATIVES = {w: (scale, d) for scale, sides in _SCALE_WORDS.items() for d, words in zip((1, -1), sides) for w in words.split()}
_VERBS = frozenset("exceeds exceeded surpasses surpassed outranks outranked tops topped beats beat beaten outnumbers outnumbered outweighs "
                   "outweighed dwarfs dwarfed trails trailed predates predated precedes preceded follows followed postdates postdated".split())
_LIST_JOIN = re.compile(r"\s(?:and|&|plus)\s|;", re.I)
_LIST_COMMA = re.compile(r",\s")
_LIST_SPLIT = re.compile(r"\s*(?:,\s*(?:and\s+|&\s*)?|;\s*|\s(?:and|&|plus)\s)\s*", re.I)
_OR = re.compile(r"\s*,?\s*(?:or|and/or)\s+|\s*/\s*", re.I)
_GENERIC = frozenset("more most less least fewer fewest".split())
_PASSIVE = re.compile(r"\s+by\b", re.I)
_WORDS = re.compile(r"[^\W\d_]+(?:['\u2019][a-z]+)?")
_NEGATED = re.compile(r"\b(?:not|never|no)\b|n['\u2019]t\b", re.I)
_WORD_BEFORE = re.compile(r"([^\W\d_][\w'\u2019-]*)[ \t]+$")


def _find(line: str, phrase: str) -> Optional[re.Match]:
    return re.search(rf"(?<!\w){re.escape(phrase.strip())}(?!\w)", line, re.IGNORECASE) if phrase.strip() else None


def comparison_options(question: str) -> Optional[tuple[str, str]]:
    m = _OPTIONS.search(question or "")
    if not m:
        return None
    a, b = (re.sub(r"^(?:the|a|an)\s+", "", x.strip(" '\"“”"), flags=re.I) for x in (m[1], m[2]))
    return (a, b) if a and b and tokens(a) != tokens(b) else None


def list_items(gold: str) -> list[str]:
    """The items of a gold that is a list ("red, green, blue", "Scott Martens and Han Xiao", "768 and 1024"): split at "and",
    "&", ";" or commas, when it has such a join or two commas or more; each item a short phrase. [] for any other gold (one
    comma is an apposition: "Washington, D.C.", "Little Vell, 1856"; "41,200" is a number)."""
    text = (gold or "").strip()
    if not (_LIST_JOIN.search(text) or len(_LIST_COMMA.findall(text)) >= 2):
        return []
    from .candidates import find

    values = [(c.start, c.end) for c in find(text)]
    if any(a < m.start() < b or a < m.end() < b for m in _LIST_SPLIT.finditer(text) for a, b in values):
        return []  # the comma or "and" belongs to one value ("Tuesday, April 16, 2024", "two thousand and five")
    items = [i.strip(" .") for i in _LIST_SPLIT.split(text)]
    if len(items) < 2 or any(not i or len(i.split()) > 4 for i in items):
        return []
    return items


def as_alternatives(line: str, starts: list[tuple[int, int]]) -> bool:
    """The list's items (their first spans, in order) are joined as alternatives: "X or Y", "X and/or Y", "X/Y", "either X..."."""
    if starts and re.search(r"\beither\s*$", line[: starts[0][0]], re.I):
        return True
    return any(_OR.fullmatch(line[a[1]:b[0]]) for a, b in zip(starts, starts[1:]) if a[1] <= b[0])


def extra_items(line: str, golds: list[str]) -> list[str]:
    """The short items of the claim's own list (what grading/answer.py joined with "; ") that are no item of a gold."""
    parts = [p.strip(" .*_-") for p in line.split("; ")]
    if len(parts) < 2:
        return []
    allowed = [set(tokens(i)) for g in golds for i in (list_items(g) or [g])]
    return [p for p in parts if p and len(p.split()) <= 4 and tokens(p) and not any(set(tokens(p)) <= a for a in allowed)]


def comparative(text: str, start: int = 0, generic: bool = True) -> Optional[tuple[str, int, int, int]]:
    """The first comparative word of a scale COMPARATIVES knows in text[start:]: (scale, direction, start, end); "less"/"more"
    before an adjective take its scale ("less high": height, downwards), and stand alone only when `generic` ("more parameters");
    "not"/"n't" before it in its clause and a verb's passive ("outranked by", "preceded by") turn it round."""
    for m in _WORDS.finditer(text, start):
        w = m[0].lower()
        if w in _GENERIC and not generic and not (_WORDS.match(text, m.end() + 1) and _base(_WORDS.match(text, m.end() + 1)[0].lower())):
            continue  # "more famous" compares on no scale that "higher" asks about
        if w in _GENERIC and (nxt := _WORDS.match(text, m.end() + 1)) and _base(nxt[0].lower()):
            scale, d = _base(nxt[0].lower())
            d = -d if w in ("less", "fewer", "least") else d
            end = nxt.end()
        elif w in COMPARATIVES:
            (scale, d), end = COMPARATIVES[w], m.end()
            if w in _VERBS and _PASSIVE.match(text, end):
                d = -d
        else:
            continue
        clause_start = max(text.rfind(ch, 0, m.start()) for ch in ".;:!?,")
        if len(_NEGATED.findall(text[clause_start + 1:m.start()])) % 2:
            d = -d
        return scale, d, m.start(), end
    return None


def _base(word: str) -> Optional[tuple[str, int]]:
    """The scale and direction of an adjective's comparative ("high": "higher")."""
    forms = (word + "er", word + "r", word[:-1] + "ier", word + word[-1:] + "er")
    return next((COMPARATIVES[f] for f in forms if f in COMPARATIVES and f not in _VERBS), None)


def _direction_choice(line: str, question: str, mine: str, other: str) -> Optional[str]:
    """The option the answer's comparison makes the winner in the question's sense ("Gannet Rock is lower than Wellington
    Tower" answers "Which is higher?" with Wellington Tower), or None when the answer compares on no scale the question asks."""
    asked = comparative(question)
    if asked is None:
        return None
    generic = question[asked[2]:asked[3]].lower() in _GENERIC
    at = 0
    while (said := comparative(line, at, generic)) is not None:
        at = said[3]
        if said[0] == asked[0] and not any(m.start() <= said[2] < m.end() for o in (mine, other) for m in _find_all(line, o)):
            break
    else:
        return None
    scale, d, s, e = said
    d *= asked[1]
    sentence = max(line.rfind(ch, 0, s) for ch in ".;!?") + 1
    before = [(m.start(), o) for o in (mine, other) for m in _find_all(line, o) if sentence <= m.start() < s
              and not _DENIED_BEFORE.search(line[:m.start()])]
    if before:
        subject = max(before)[1]
        return subject if d > 0 else (other if subject is mine else mine)
    after = sorted((m.start(), o) for o in (mine, other) for m in _find_all(line, o) if m.start() >= e)
    if not after:
        return None
    first = after[0][1]
    is_object = bool(re.search(r"\bthan\b", line[e:after[0][0]], re.I))
    return first if (d > 0) != is_object else (other if first is mine else mine)


def _find_all(line: str, phrase: str) -> list[re.Match]:
    return list(re.finditer(rf"(?<!\w){re.escape(phrase.strip())}(?!\w)", line, re.IGNORECASE)) if phrase.strip() else []


def wrong_choice(line: str, question: str, golds: list[str]) -> Optional[str]:
    """Why the answer does not choose the gold among the question's options, or None (no options, or it chooses)."""
    options = comparison_options(question)
    if not options:
        return None
    gold_tokens = [tokens(g) for g in golds]
    picked = [o for o in options if tokens(o) in gold_tokens]
    if len(picked) != 1:
        return None
    mine, other = picked[0], next(o for o in options if o is not picked[0])
    if (winner := _direction_choice(line, question, mine, other)) is not None:
        return None if winner is mine else f"makes the other option {other!r} the winner of the comparison"
    o, g = _find(line, other), _find(line, mine)
    if o is None or _DENIED_BEFORE.search(line[: o.start()]):
        return None
    if g is None or o.start() < g.start():
        return f"names the other option {other!r} as its choice"
    if not _CHOOSES.search(line[g.end(): o.start()]):
        return f"names both options ({mine!r}, {other!r}) without choosing"
    return None


def inside_longer_name(line: str, golds: list[str]) -> bool:
    """True when every occurrence of every gold that the line holds follows a capitalised word of the same name."""
    seen = False
    for g in golds:
        if not g.strip() or not g.strip()[0].isupper() or len(g.split()) != 1:
            continue  # a gold of several words names enough ("The Jina AI Engineering Group" for "Engineering Group" is right)
        for m in re.finditer(rf"(?<!\w){re.escape(g.strip())}(?!\w)", line):
            seen = True
            w = _WORD_BEFORE.search(line[: m.start()])
            if not (w and w[1][0].isupper() and w[1].lower() not in _FUNCTION):
                return False
    return seen


def explains(line: str, start: int, end: int, clauses, gold_spans: list[tuple[int, int]]) -> bool:
    """A name at [start, end) that explains the gold: in another clause than the gold's (asserted in the first) or after
    it in its own, saying more and offering no alternative, contrast or co-credit."""
    if not gold_spans or not clauses:
        return False
    first = clauses[0]
    if not any(first.start <= a and b <= first.end for a, b in gold_spans):
        return False
    mine = next((c for c in clauses if c.start <= start and end <= c.end), None)
    if mine is None or mine.question:
        return False
    if mine is first:  # the gold's own clause: a name it says something about after the gold ("kept the light on Gannet Rock")
        between = max((b for a, b in gold_spans if b <= start), default=None)
        if between is None:
            return False
        words = tokens(line[between:start])
        return not (_ALTERNATIVE & set(words)) and any(t not in _FUNCTION for t in words)
    rest = tokens(line[mine.start:start] + " " + line[end:mine.end])
    return not (_ALTERNATIVE & set(rest)) and any(t not in _FUNCTION for t in rest)
