"""Typed candidates in a piece of answer text: the dates, numbers, licenses, model ids and names it states, with their spans.

Kinds, found in this order (a later kind never overlaps an earlier one):
- license: an SPDX identifier or a named license, in any spelling grading/licenses.py knows;
- date: ISO dates and timestamps, dates in words (weekday, ordinal), month and year (normalize.find_dates);
- model: an id of letters and digits joined by hyphens, underscores or dots ("jina-embeddings-v3",
  "reader-lm-1.5b", "GPT-4"); its digits are no number;
- number: digits with separators, decimals and a sign, or a number word (two..twenty), with a scale
  ("1.54B", "570 million"), and then a unit (m, ft, %, GB, a currency...) or the noun it counts
  ("768 dimensions", "8,192 tokens"). A bare four-digit 1800..2099 with neither is a year (a date).
  Not numbers: ordinals ("1st"), versions ("3.1.2"), labels ("Part 3", "v2", "[1]", "#4", "top 10"),
  digits glued to letters ("3D", "4o");
- person: two to four capitalised words, initials or hyphenated initials ("Scott A. Martens", "Alex C-G"),
  with no organisation or product word, no acronym and no version after them;
- entity: any other run of two or more capitalised words ("Jina AI", "Engineering Group", "Jina Reranker v3").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Optional

from . import licenses
from .normalize import CURRENCY, NUMBER_WORDS, SCALES, UNIT_PAIRS, UNITS, find_dates

KINDS = ("license", "date", "model", "number", "person", "entity")


@dataclass(frozen=True)
class Quantity:
    readings: tuple[Decimal, ...]  # the value as written (a power-of-two "nK" also reads as n x 1024); the exponent is its precision
    unit: Optional[str] = None  # canonical unit: m, ft, %, gb, usd ...
    noun: Optional[str] = None  # the stem of the noun it counts: "dimension", "token"


@dataclass(frozen=True)
class Candidate:
    kind: str
    value: object  # license/model: str; date: (y, m, d); number: Quantity; person/entity: tuple of words
    start: int
    end: int
    text: str


# ---- numbers ------------------------------------------------------------------------------------
_NUM = re.compile(r"(?<![\w.$£€¥])(?P<sign>[-\u2212](?=\d))?(?P<cur>[$£€¥]\s?)?"
                  r"(?P<int>\d{1,3}(?:[,\u00a0\u202f\u2009]\d{3})+(?![\d])|\d+)(?P<frac>\.\d+)?(?P<more>\.\d+)?"
                  rf"|\b(?P<word>{'|'.join(NUMBER_WORDS)})\b", re.IGNORECASE)
_SUFFIX = re.compile(r"[^\W\d_]+|%|°[CFcf]?")
_NEXT_WORD = re.compile(r"(?:\s*-\s*|\s+)(?P<w>[^\W\d_][\w'\u2019]*|%|°[CFcf]?)")
_SCALE_SUFFIX = {"k": 3, "m": 6, "b": 9, "t": 12, "bn": 9, "mn": 6, "tn": 12}
_COUNTED = re.compile(r"\s+[^\W\d_]+s\b|-[^\W\d_]")
_CODE_BEFORE = re.compile(r"\b(usd|gbp|eur|jpy)\s*$", re.IGNORECASE)
_LABEL_BEFORE = re.compile(r"(?:\b(?:part|chapter|section|step|no|number|version|v|table|figure|fig|page|pp?|top|rank|ranked|layer|"
                           r"level|phase|round|stage|episode|issue|item|question|q|id|rev|release|vol|volume)\.?|#|§)\s*$", re.IGNORECASE)
STOP = frozenset("""a an the and or of on in at to for by with from as than then is was are were be been being it its this that these those
which who whom whose what when where why how via per vs versus about around approx approximately roughly nearly almost over under up
down into onto out off not no nor but so if while each every all any some more less most least only just also too very has have had
do does did will would can could should may might must shall times x""".split())
DIMENSIONS = {"m": ("length", 1), "km": ("length", 1000), "cm": ("length", Decimal("0.01")), "mm": ("length", Decimal("0.001")),
              "ft": ("length", Decimal("0.3048")), "inch": ("length", Decimal("0.0254")), "mi": ("length", Decimal("1609.344")),
              "kg": ("mass", 1), "g": ("mass", Decimal("0.001")), "t": ("mass", 1000), "s": ("time", 1), "ms": ("time", Decimal("0.001")),
              "min": ("time", 60), "h": ("time", 3600), "day": ("time", 86400), "week": ("time", 604800),
              "kb": ("data", 1000), "mb": ("data", 10**6), "gb": ("data", 10**9), "tb": ("data", 10**12)}


def dimension(unit: Optional[str]) -> Optional[str]:
    """What a unit measures (length, mass, time, data; any other unit, each currency too, is its own dimension:
    "412,000 pounds (about $520,000)" states no second amount in pounds)."""
    return DIMENSIONS[unit][0] if unit in DIMENSIONS else unit


def convert(value: Decimal, unit: str, to: str) -> Optional[Decimal]:
    """value in unit expressed in `to`, when both measure the same thing; None otherwise."""
    if unit == to:
        return value
    if unit in DIMENSIONS and to in DIMENSIONS and DIMENSIONS[unit][0] == DIMENSIONS[to][0]:
        return value * Decimal(DIMENSIONS[unit][1]) / Decimal(DIMENSIONS[to][1])
    return None


def _stem(word: str) -> str:
    """A noun's stem, enough to tell "dimensions" from "tokens": plural and adjective endings off."""
    w = word.casefold().replace("\u2019", "'").split("'")[0]
    if w.endswith(("ses", "xes", "ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    return w[:-2] if w.endswith("al") and len(w) > 6 else w


def _unit_at(text: str, pos: int) -> tuple[Optional[str], Optional[str], int]:
    """(unit, noun, end) of the words after a number at pos (a scale already read)."""
    m = _NEXT_WORD.match(text, pos)
    if not m:
        return None, None, pos
    w = m["w"].casefold()
    n2 = _NEXT_WORD.match(text, m.end())
    if n2 and (w, n2["w"].casefold()) in UNIT_PAIRS:
        return UNIT_PAIRS[(w, n2["w"].casefold())], None, n2.end()
    if w in UNITS or w in CURRENCY:
        return UNITS.get(w) or CURRENCY[w], None, m.end()
    if w not in STOP and m["w"][0].islower():
        return None, _stem(m["w"]), m.end()
    return None, None, pos


def _numbers(text: str, taken: list[tuple[int, int]]) -> list[Candidate]:
    out = []
    for m in _NUM.finditer(text):
        start, pos = m.start(), m.end()
        if _overlaps(taken, start, pos) or m["more"] or _LABEL_BEFORE.search(text[:start]):
            continue
        if text[start - 1 : start] == "[" and text[pos : pos + 1] == "]":
            continue  # a citation marker
        if m["word"]:
            value = Decimal(NUMBER_WORDS[m["word"].lower()])
        else:
            value = Decimal(re.sub(r"[,\u00a0\u202f\u2009]", "", m["int"]) + (m["frac"] or ""))
            value = -value if m["sign"] else value
        unit = CURRENCY[m["cur"].strip()] if m["cur"] else None
        if unit is None and (code := _CODE_BEFORE.search(text[:start])):
            unit = CURRENCY[code[1].lower()]
        scale, binary = 0, False
        suffix = _SUFFIX.match(text, pos) if not m["word"] else None
        if suffix:
            s = suffix[0]
            if s.lower() in ("st", "nd", "rd", "th"):
                continue  # an ordinal
            if s.lower() in ("bn", "mn", "tn") or s in ("K", "k", "M", "B", "b", "T"):
                scale, binary = _SCALE_SUFFIX[s.lower()], s in ("K", "k")
            elif s.casefold() in UNITS:
                unit = UNITS[s.casefold()]
            else:
                continue  # glued to letters: "3D", "4o", "2x"
            pos = suffix.end()
        if not scale:
            w = _NEXT_WORD.match(text, pos)
            if w and w["w"].casefold() in SCALES:
                scale, pos = SCALES[w["w"].casefold()], w.end()
            elif w and w["w"] in ("K", "M", "B", "T") and text[pos:w.start("w")].isspace():  # "597 M parameters"
                scale, binary, pos = _SCALE_SUFFIX[w["w"].lower()], w["w"] == "K", w.end()
        noun = None
        if unit is None:
            unit, noun, pos = _unit_at(text, pos)
        readings = [value.scaleb(scale)]
        if binary and value == value.to_integral_value() and int(value) > 0 and int(value) & (int(value) - 1) == 0:
            readings.append(Decimal(int(value) * 1024))
        plain = m["int"] and not m["frac"] and not m["sign"] and not m["cur"] and len(m["int"]) == 4 and not scale
        counts = _COUNTED.match(text, m.end())  # "2048 dimensions", "2048-dimensional": a count, not a year
        if plain and unit is None and not counts and 1800 <= int(m["int"]) <= 2099:
            out.append(Candidate("date", (int(m["int"]), None, None), start, m.end(), text[start : m.end()]))
            continue
        out.append(Candidate("number", Quantity(tuple(readings), unit, noun), start, pos, text[start:pos]))
    return _distribute(text, out)


_LIST_JOIN = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s(?:and|or|to|and/or)\s|\s*[-\u2013/]\s*)", re.IGNORECASE)


def _distribute(text: str, numbers: list[Candidate]) -> list[Candidate]:
    """A unit or noun after a list of numbers applies to each ("137M or 161M parameters", "64, 128 and 768 dimensions")."""
    out = list(numbers)
    for i in range(len(out) - 2, -1, -1):
        a, b = out[i], out[i + 1]
        if a.kind == b.kind == "number" and not (a.value.unit or a.value.noun) and (b.value.unit or b.value.noun) \
                and _LIST_JOIN.fullmatch(text[a.end:b.start]):
            out[i] = Candidate("number", Quantity(a.value.readings, b.value.unit, b.value.noun), a.start, a.end, a.text)
    return out


# ---- model ids ----------------------------------------------------------------------------------
_MODEL = re.compile(r"(?<![\w.\-/])[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)+(?![\w\-])")
_YEAR_SUFFIX = re.compile(r"[A-Za-z]+-(?:1[89]|20)\d\d")


def _models(text: str, taken: list[tuple[int, int]]) -> list[Candidate]:
    out = []
    for m in _MODEL.finditer(text):
        tok = m[0]
        if not (re.search(r"\d", tok) and re.search(r"[A-Za-z]", tok)) or _YEAR_SUFFIX.fullmatch(tok) or "-" not in tok.replace("_", "-"):
            continue
        if not _overlaps(taken, m.start(), m.end()):
            out.append(Candidate("model", model_id(tok), m.start(), m.end(), tok))
    return out


def model_id(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().casefold())


# ---- names --------------------------------------------------------------------------------------
_WORD = (r"(?:[A-Z][a-z\u00df-\u024f'\u2019]+(?:[A-Z][a-z\u00df-\u024f]+)*(?:-[A-Z]?[a-z\u00df-\u024f]+)*"
         r"|[A-Z](?:-[A-Z])+(?![\w-])|[A-Z]\.|[A-Z]{2,}(?:-[A-Z]{2,})*(?![\w-]))")
_PARTICLE = r"(?:van|von|de|der|den|da|di|del|della|du|le|la|bin|ibn|al|el|dos|das|ter|ten)"
_RUN = re.compile(rf"(?<![\w'\u2019-]){_WORD}(?:\s(?:{_PARTICLE}\s)*{_WORD})+")
STOP_CAPITALS = frozenset("""The A An It Its This That These Those He She They We I You In On At By For From To Of And Or But Not No Yes Both
According Author Authors Answer Written Published Released Posted License Licence Date Model Article Post Blog Dr Mr Mrs Ms Mx Prof
Professor Sir Madam Also Then So If As With Who What When Where Which Why How Is Was Are Were Source Sources Note Final Short Name
Title Here There One Sure Okay OK Based Per Either Neither Nor Maybe Perhaps Possibly Probably Likely Actually Only However""".split())
TITLES = frozenset("dr mr mrs ms mx prof professor sir".split())
ORG_WORDS = frozenset("""ai inc ltd llc gmbh ag corp corporation company co labs lab university institute foundation team group blog news research
cloud hub api platform model models embeddings embedding reranker reader search engine project library framework dataset benchmark
license licence agreement network networks systems technologies software studio press journal conference""".split())


def _names(text: str, taken: list[tuple[int, int]]) -> list[Candidate]:
    shouted = sum(c.isupper() for c in text) >= sum(c.islower() for c in text)
    out = []
    for m in _RUN.finditer(text):
        words = [(w.start() + m.start(), w.end() + m.start(), w[0]) for w in re.finditer(r"\S+", m[0])]
        run: list[tuple[int, int, str]] = []
        for w in [*words, None]:  # split at stop capitals ("Scott Martens And Han Xiao")
            if w is None or w[2] in STOP_CAPITALS:
                _name(text, run, taken, shouted, out)
                run = []
            else:
                run.append(w)
    return out


def _name(text: str, run: list[tuple[int, int, str]], taken: list, shouted: bool, out: list[Candidate]) -> None:
    while run and run[0][2].rstrip(".").lower() in TITLES:
        run = run[1:]
    if len([w for w in run if not re.fullmatch(_PARTICLE, w[2])]) < 2:
        return
    start, end = run[0][0], run[-1][1]
    if _overlaps(taken, start, end):
        return
    raw = [w[2] for w in run]
    words = tuple(re.sub(r"['\u2019]s$", "", w.casefold()) for w in raw if not re.fullmatch(r"[A-Z]\.", w))
    acronym = any(re.fullmatch(r"[A-Z]{2,}(?:-[A-Z]{2,})*", w) for w in raw) and not shouted
    product = re.match(r"\s+(?:v\d|\d)", text[end:])
    kind = "entity" if acronym or product or any(w.strip(".") in ORG_WORDS for w in words) else "person"
    out.append(Candidate(kind, words, start, end, text[start:end]))


# ---- all of them ----------------------------------------------------------------------------------
def _overlaps(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and end > s for s, e in taken)


def find(text: str) -> list[Candidate]:
    """Every candidate in text, in order of position (see the module docstring)."""
    text = text or ""
    found = [Candidate("license", form.casefold(), s, e, text[s:e]) for s, e, form in licenses.find(text)]
    taken = [(c.start, c.end) for c in found]
    found += [Candidate("date", value, s, e, text[s:e]) for s, e, value in find_dates(text) if not _overlaps(taken, s, e)]
    for finder in (_models, _numbers, _names):
        taken = [(c.start, c.end) for c in found]
        found += finder(text, taken)
    return sorted(found, key=lambda c: (c.start, c.end))
