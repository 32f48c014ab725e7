"""What `correct` reads from the question's shape (issue 29): comparisons that name their options, whole names, explanations.

- A *comparison* question names its options after a comma or colon, joined by "or", before its question mark
  ("Which is higher, Wellington Tower or Gannet Rock?"). When the gold is one of them, the answer must choose it:
  the other option named first (as the winner: "Wellington Tower is higher than Gannet Rock") is wrong, and so are
  both named with no word of comparison or contrast between them ("Gannet Rock and Wellington Tower are both tall").
  The gold first, then the other after "than", "before", "after", "not", "over", "rather", "unlike", "instead", is right.
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
_WORD_BEFORE = re.compile(r"([^\W\d_][\w'\u2019-]*)[ \t]+$")


def _find(line: str, phrase: str) -> Optional[re.Match]:
    return re.search(rf"(?<!\w){re.escape(phrase.strip())}(?!\w)", line, re.IGNORECASE) if phrase.strip() else None


def comparison_options(question: str) -> Optional[tuple[str, str]]:
    m = _OPTIONS.search(question or "")
    if not m:
        return None
    a, b = (re.sub(r"^(?:the|a|an)\s+", "", x.strip(" '\"“”"), flags=re.I) for x in (m[1], m[2]))
    return (a, b) if a and b and tokens(a) != tokens(b) else None


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
