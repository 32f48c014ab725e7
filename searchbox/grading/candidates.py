"""Typed candidates in a piece of answer text: the dates, numbers, licenses, model ids and names it states, with their spans.

Kinds, found in this order (a later kind never overlaps an earlier one):
- license: an SPDX identifier or a named license, in any spelling grading/licenses.py knows;
- date: ISO dates and timestamps, dates in words (weekday, ordinal), month and year, periods of a year
  ("Q3 2024", "FY2023", "mid-2024": normalize.find_dates);
- time: a time of day ("16:19", "4:19 pm": normalize.find_times);
- model: an id of letters and digits joined by hyphens, underscores or dots ("jina-embeddings-v3",
  "reader-lm-1.5b", "GPT-4"); its digits are no number;
- number: digits with separators, decimals and a sign ("minus 12"), scientific notation ("6.02e23", "10^6"),
  or number words ("twenty-one", "a million"; "one" only where it counts something or stands alone), with a
  scale ("1.54B", "570 million", "€1,2 Mio.", "$1.2m") and then a unit (m, ft, %, GB, m², km/h, °C, a
  currency, its symbol after the amount too: "5 €"; a "$" amount followed by a dollar's code is in that dollar: "$5
  AUD") or the noun it counts ("768 dimensions", "8,192 tokens"); a decimal comma where money, a scale or a unit
  follows ("38,4 m"), thousands grouped by commas, thin spaces or apostrophes ("1'234'567"). A bare four-digit 1800..2099 with
  neither is a year (a date), and may also be a count unless a date word comes before it ("in 2023");
  Not numbers: ordinals ("1st"), versions ("3.1.2"), labels ("Part 3", "v2", "[1]", "#4", "top 10", "No. 5"; a "No." that
  opens a sentence is an answer: "41 m? No. 38.4 m"),
  digits glued to letters ("3D", "4o");
- person: two to four capitalised words, initials or hyphenated initials ("Scott A. Martens", "Alex C-G",
  "Henry VIII": a regnal number is no acronym), with no organisation or product word, no acronym and no
  version after them; its words are compared split at hyphens ("Jean-Paul" = "Jean Paul");
- entity: any other run of two or more capitalised words ("Jina AI", "Engineering Group", "Jina Reranker v3").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Optional

from . import licenses
from .normalize import CURRENCY, SCALES, SCIENTIFIC, UNIT_PAIRS, UNITS, find_dates, find_times, number_words, scientific_value

KINDS = ("license", "date", "time", "model", "number", "person", "entity")


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
    also: Optional[object] = None  # a bare four-digit year that may be a count ("768 or 2048"): its reading as a number

    def views(self) -> list["Candidate"]:
        """The candidate, and its reading as a number when it is a year that may be one."""
        return [self] if self.also is None else [self, Candidate("number", self.also, self.start, self.end, self.text)]


# ---- numbers ------------------------------------------------------------------------------------
_NUM = re.compile(r"(?<![\w.$£€¥₹])(?P<sign>[-\u2212](?=\d)|\bminus\s+(?=\d))?(?P<cur>(?:US|AU|A|CA|C|NZ|HK|S)?[$£€¥₹]\s?)?"
                  r"(?P<int>\d{1,3}(?:[,\u00a0\u202f\u2009'\u2019]\d{3})+(?![\d])|\d+)(?P<frac>\.\d+)?(?P<more>\.\d+)?")
_DECIMAL_COMMA = re.compile(r",(\d{1,2})(?![\d,])")
# a decimal comma says so by what follows it: money, a scale or a unit ("€1,2 Mio.", "3,5 %", "38,4 m")
_DECIMAL_COMMA_SAYS = re.compile(r"\s?(?:%|°|[$£€¥₹]|(?:mio|mrd|tsd|million|billion|thousand|"
                                 + "|".join(re.escape(u) for u in sorted({*UNITS, *CURRENCY} - {"%", "°"}, key=len, reverse=True)
                                            if u[0].isalpha()) + r")(?![\w]))", re.IGNORECASE)
_SUFFIX = re.compile(r"(?:[kcm]?m|ft|mi)[23](?![\w])|[^\W\d_]+|%|°[CFcf]?|[$£€¥₹](?!\s?\d)")
_NEXT_WORD = re.compile(r"(?:\s*-\s*|\s+)(?P<w>(?:[kcm]?m|ft|mi)[23](?![\w])|[^\W\d_][\w'\u2019]*|%|°[CFcf]?|[$£€¥₹](?!\s?\d))")
_DOLLAR_CODE = re.compile(r"\s*(usd|aud|cad|nzd|hkd|sgd)\b", re.IGNORECASE)  # "$5 AUD": the code names the dollar
_PER = re.compile(r"(?:\s*/\s*|\s+per\s+)(?P<w>[^\W\d_]+)\b")
_SCALE_SUFFIX = {"k": 3, "m": 6, "b": 9, "t": 12, "bn": 9, "mn": 6, "tn": 12}
_YEAR_BEFORE = re.compile(r"\b(?:in|since|during|by|from|until|till|of|before|after|circa|c\.|ca\.|early|mid|late|year|spring|summer|"
                          r"autumn|fall|winter|fy|fiscal)[\s-]*$", re.IGNORECASE)
_COUNTED = re.compile(r"\s+[^\W\d_]+s\b|-[^\W\d_]")
_CODE_BEFORE = re.compile(r"\b(usd|gbp|eur|jpy|chf|inr|aud|cad|nzd|hkd|sgd)\s*$", re.IGNORECASE)
_LABEL_BEFORE = re.compile(r"(?:\b(?:part|chapter|section|step|no|number|version|v|table|figure|fig|page|pp?|top|rank|ranked|layer|"
                           r"level|phase|round|stage|episode|issue|item|question|q|id|rev|release|vol|volume)\.?|#|§)\s*$", re.IGNORECASE)
_ANSWER_NO = re.compile(r"no\.?\s*$", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?:^|[.!?;:)\]\n])[\s*_]*$")
_ALONE_BEFORE = re.compile(r"(?:^|[.,;:!?()\[\]\n*_>#-])\s*(?:(?:only|just|exactly)\s+)?$", re.IGNORECASE)
_ALONE_AFTER = re.compile(r"\s*(?:$|[.,;:!?()\[\]\n*_])")
STOP = frozenset("""a an the and or of on in at to for by with from as than then is was are were be been being it its this that these those
which who whom whose what when where why how via per vs versus about around approx approximately roughly nearly almost over under up
down into onto out off not no nor but so if while each every all any some more less most least only just also too very has have had
do does did will would can could should may might must shall times x""".split())
# what a unit measures and its size in the dimension's base unit (a compound "a/b" divides them: km/h, g/mol)
DIMENSIONS = {"m": ("length", 1), "km": ("length", 1000), "cm": ("length", Decimal("0.01")), "mm": ("length", Decimal("0.001")),
              "ft": ("length", Decimal("0.3048")), "yd": ("length", Decimal("0.9144")), "inch": ("length", Decimal("0.0254")), "mi": ("length", Decimal("1609.344")),
              "kg": ("mass", 1), "g": ("mass", Decimal("0.001")), "mg": ("mass", Decimal("0.000001")), "t": ("mass", 1000),
              "lb": ("mass", Decimal("0.45359237")), "oz": ("mass", Decimal("0.028349523125")),
              "s": ("time", 1), "ms": ("time", Decimal("0.001")), "min": ("time", 60), "h": ("time", 3600), "day": ("time", 86400),
              "week": ("time", 604800),
              "kb": ("data", 1000), "mb": ("data", 10**6), "gb": ("data", 10**9), "tb": ("data", 10**12),
              "kib": ("data", 2**10), "mib": ("data", 2**20), "gib": ("data", 2**30), "tib": ("data", 2**40),
              "m2": ("area", 1), "km2": ("area", 10**6), "cm2": ("area", Decimal("0.0001")), "ft2": ("area", Decimal("0.09290304")),
              "mi2": ("area", Decimal("2589988.110336")), "ha": ("area", 10**4), "acre": ("area", Decimal("4046.8564224")),
              "m3": ("volume", 1), "l": ("volume", Decimal("0.001")), "ml": ("volume", Decimal("0.000001")),
              "w": ("power", 1), "kw": ("power", 1000), "mw": ("power", 10**6), "gw": ("power", 10**9),
              "kwh": ("energy", 3600000), "mwh": ("energy", 3600000000), "gwh": ("energy", 3600000000000),
              "hz": ("frequency", 1), "khz": ("frequency", 1000), "mhz": ("frequency", 10**6), "ghz": ("frequency", 10**9),
              "kn": ("length/time", Decimal("1852") / 3600), "mol": ("amount", 1),
              "°c": ("temperature", 1), "°f": ("temperature", Decimal(5) / 9)}
_OFFSET = {"°c": Decimal(0), "°f": Decimal(-160) / 9}  # to degrees Celsius: value * size + offset


def _dim(unit: Optional[str]) -> Optional[tuple[str, Decimal]]:
    if unit in DIMENSIONS:
        return DIMENSIONS[unit][0], Decimal(DIMENSIONS[unit][1])
    if unit and "/" in unit:
        a, b = unit.split("/", 1)
        if a in DIMENSIONS and b in DIMENSIONS:
            return f"{DIMENSIONS[a][0]}/{DIMENSIONS[b][0]}", Decimal(DIMENSIONS[a][1]) / Decimal(DIMENSIONS[b][1])
    return None


def dimension(unit: Optional[str]) -> Optional[str]:
    """What a unit measures (length, mass, time, data, area, speed as length/time...; any other unit, each currency too, is its own
    dimension: "412,000 pounds (about $520,000)" states no second amount in pounds)."""
    d = _dim(unit)
    return d[0] if d else unit


def convert(value: Decimal, unit: str, to: str) -> Optional[Decimal]:
    """value in unit expressed in `to`, when both measure the same thing; None otherwise."""
    if unit == to:
        return value
    a, b = _dim(unit), _dim(to)
    if a is None or b is None or a[0] != b[0]:
        return None
    base = value * a[1] + _OFFSET.get(unit, 0)
    return (base - _OFFSET.get(to, 0)) / b[1]


def scale_of(unit: str, to: str) -> Optional[Decimal]:
    """How many of `to` one step of `unit` is (to carry a precision across units); None when they measure different things."""
    a, b = _dim(unit), _dim(to)
    return a[1] / b[1] if a and b and a[0] == b[0] else None


def _stem(word: str) -> str:
    """A noun's stem, enough to tell "dimensions" from "tokens": plural and adjective endings off."""
    w = word.casefold().replace("\u2019", "'").split("'")[0]
    if w.endswith(("ses", "xes", "ches", "shes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    return w[:-2] if w.endswith("al") and len(w) > 6 else w


def _unit_word(w: str) -> Optional[str]:
    w = w.casefold()
    return UNITS.get(w) or CURRENCY.get(w)


def _per(text: str, pos: int, unit: str) -> tuple[str, int]:
    """A compound unit: "km/h", "g/mol", "metres per second"."""
    m = _PER.match(text, pos)
    if m and (second := UNITS.get(m["w"].casefold())) and unit in DIMENSIONS and second in DIMENSIONS:
        return f"{unit}/{second}", m.end()
    return unit, pos


def _unit_at(text: str, pos: int) -> tuple[Optional[str], Optional[str], int]:
    """(unit, noun, end) of the words after a number at pos (a scale already read)."""
    m = _NEXT_WORD.match(text, pos)
    if not m:
        return None, None, pos
    w = m["w"].casefold()
    n2 = _NEXT_WORD.match(text, m.end())
    if n2 and (w, n2["w"].casefold()) in UNIT_PAIRS:
        unit, end = _per(text, n2.end(), UNIT_PAIRS[(w, n2["w"].casefold())])
        return unit, None, end
    if unit := _unit_word(w):
        unit, end = _per(text, m.end(), unit)
        return unit, None, end
    if w not in STOP and m["w"][0].islower():
        return None, _stem(m["w"]), m.end()
    return None, None, pos


def _alone(text: str, start: int, end: int) -> bool:
    """The span stands alone in its part of the text ("One.", "- one", "(only one)")."""
    return bool(_ALONE_BEFORE.search(text[:start]) and _ALONE_AFTER.match(text, end))


def _starts(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, int, Decimal, Optional[re.Match], bool]]:
    """Where numbers are written: (start, end of the value, value, the digit match or None, lone "one"), in order."""
    found = []
    for m in SCIENTIFIC.finditer(text):
        found.append((m.start(), m.end(), scientific_value(m), None, False))
    for s, e, v, lone in number_words(text):
        found.append((s, e, v, None, lone))
    spans = [(s, e) for s, e, *_ in found]
    for m in _NUM.finditer(text):
        if not _overlaps(spans, m.start(), m.end()):
            found.append((m.start(), m.end(), None, m, False))
    return sorted((f for f in found if not _overlaps(taken, f[0], f[1])), key=lambda f: f[0])


def _numbers(text: str, taken: list[tuple[int, int]]) -> list[Candidate]:
    out, last = [], 0
    for start, pos, value, m, lone in _starts(text, taken):
        if start < last:
            continue  # read already, as part of the number before ("€1,2 Mio.")
        label = _LABEL_BEFORE.search(text[:start])
        if label and _ANSWER_NO.match(text, label.start(), start) and _SENTENCE_START.search(text[:label.start()]):
            label = None  # "41 m? No. 38.4 m": a "No." that opens a sentence answers, it labels no number ("No. 5")
        if label or (m is not None and m["more"]):
            continue
        if text[start - 1 : start] == "[" and text[pos : pos + 1] == "]":
            continue  # a citation marker
        unit = None
        if m is not None:
            value = Decimal(re.sub(r"[,\u00a0\u202f\u2009'\u2019]", "", m["int"]) + (m["frac"] or ""))
            value = -value if m["sign"] else value
            if m["cur"]:
                unit = CURRENCY[m["cur"].strip().lower()]
            comma = _DECIMAL_COMMA.match(text, pos) if not m["frac"] and "," not in m["int"] else None
            if comma and (m["cur"] or _CODE_BEFORE.search(text[:start]) or _DECIMAL_COMMA_SAYS.match(text, comma.end())):
                value, pos = Decimal(f"{value}.{comma[1]}"), comma.end()  # "€1,2 Mio.", "3,5 %": a decimal comma
        if unit is None and (code := _CODE_BEFORE.search(text[:start])):
            unit = CURRENCY[code[1].lower()]
        scale, binary = 0, False
        suffix = _SUFFIX.match(text, pos) if m is not None else None
        if suffix:
            s = suffix[0]
            if s.lower() in ("st", "nd", "rd", "th"):
                continue  # an ordinal
            if s.lower() in ("bn", "mn", "tn") or s in ("K", "k", "M", "B", "b", "T") or (unit in CURRENCY.values() and s.lower() == "m"):
                scale, binary = _SCALE_SUFFIX[s.lower()], s in ("K", "k")
            elif _unit_word(s) and not (unit in CURRENCY.values()):
                unit = _unit_word(s)
            else:
                continue  # glued to letters: "3D", "4o", "2x"
            pos = suffix.end()
            if unit and not scale:
                unit, pos = _per(text, pos, unit)
        if not scale:
            w = _NEXT_WORD.match(text, pos)
            if w and w["w"].casefold() in SCALES:
                scale, pos = SCALES[w["w"].casefold()], w.end()
                pos += 1 if text[pos : pos + 1] == "." else 0  # "Mio."
            elif w and w["w"] in ("K", "M", "B", "T") and text[pos:w.start("w")].isspace():  # "597 M parameters"
                scale, binary, pos = _SCALE_SUFFIX[w["w"].lower()], w["w"] == "K", w.end()
        noun = None
        if m is not None and (m["cur"] or "").strip() == "$" and (code := _DOLLAR_CODE.match(text, pos)):
            unit, pos = CURRENCY[code[1].lower()], code.end()
        if unit is None:
            unit, noun, pos = _unit_at(text, pos)
        if lone and not (scale or unit or noun or _alone(text, start, pos)):
            continue  # "one" as a pronoun ("the large one has"), not a count
        readings = [value.scaleb(scale)]
        if binary and value == value.to_integral_value() and int(value) > 0 and int(value) & (int(value) - 1) == 0:
            readings.append(Decimal(int(value) * 1024))
        plain = m is not None and not m["frac"] and not m["sign"] and not m["cur"] and len(m["int"]) == 4 and not scale
        counts = _COUNTED.match(text, m.end()) if m is not None else None  # "2048 dimensions", "2048-dimensional": a count, not a year
        if plain and unit is None and not counts and 1800 <= int(m["int"]) <= 2099:
            year_only = _YEAR_BEFORE.search(text[:start])  # "in 2023": a year; "768 or 2048": a year or a count
            out.append(Candidate("date", (int(m["int"]), None, None), start, m.end(), text[start : m.end()],
                                 None if year_only else Quantity((value,))))
            continue
        out.append(Candidate("number", Quantity(tuple(readings), unit, noun), start, pos, text[start:pos]))
        last = pos
    return _distribute(text, out)


_LIST_JOIN = re.compile(r"\s*(?:[,;]\s*(?:and\s+|or\s+)?|\s(?:and|or|to|and/or)\s|\s*[-\u2013/]\s*)", re.IGNORECASE)


def _distribute(text: str, numbers: list[Candidate]) -> list[Candidate]:
    """A unit or noun after a list of numbers applies to each ("137M or 161M parameters", "64, 128 and 768 dimensions")."""
    out = list(numbers)
    for i in range(len(out) - 2, -1, -1):
        a, b = out[i], out[i + 1]
        if a.kind == b.kind == "number" and not (a.value.unit or a.value.noun) and (b.value.unit or b.value.noun) \
                and _LIST_JOIN.fullmatch(text[a.end:b.start]):
            out[i] = Candidate("number", Quantity(a.value.readings, b.value.unit, b.value.noun), a.start, a.end, a.text)
    for i, c in enumerate(out):  # a year that may be a count: only alone, or listed with numbers ("768 or 2048")
        if c.also is not None:
            near = [(out[k], text[out[k].end:c.start] if k < i else text[c.end:out[k].start]) for k in (i - 1, i + 1) if 0 <= k < len(out)]
            listed = any(n.kind == "number" and _LIST_JOIN.fullmatch(gap) for n, gap in near)
            line = re.fullmatch(r"[\s*_>#\-+\u2022.;:]*", text[text.rfind("\n", 0, c.start) + 1:c.start]) \
                and re.fullmatch(r"[\s*_.;:]*", text[c.end:(text.find("\n", c.end) + 1 or len(text) + 1) - 1])
            if not (listed or line):
                out[i] = Candidate(c.kind, c.value, c.start, c.end, c.text)
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
_ROMAN = re.compile(r"(?=[IVXL])X{0,3}(?:IX|IV|V?I{0,3})|XL|L")  # a regnal number ("Henry VIII") is part of a name, no acronym
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
    words = tuple(part for w in raw if not re.fullmatch(r"[A-Z]\.", w) for part in re.sub(r"['\u2019]s$", "", w.casefold()).split("-"))
    acronym = any(re.fullmatch(r"[A-Z]{2,}(?:-[A-Z]{2,})*", w) and not _ROMAN.fullmatch(w) for w in raw) and not shouted
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
    taken = [(c.start, c.end) for c in found]
    found += [Candidate("time", value, s, e, text[s:e]) for s, e, value in find_times(text) if not _overlaps(taken, s, e)]
    for finder in (_models, _numbers, _names):
        taken = [(c.start, c.end) for c in found]
        found += finder(text, taken)
    return sorted(found, key=lambda c: (c.start, c.end))
