"""Answer normalisation into canonical tokens, and the string graders over them: exact match, token F1, contains.

Both sides (answer and gold) go through the same steps, in this order:
1. Unicode NFKC (full-width digits, ligatures, "℃"), diacritics folded ("Zürich" = "Zurich");
2. digit-group separators dropped ("41,200", "41 200" with a thin/no-break space, "41'200");
3. license names become their SPDX identifier ("Apache License, Version 2.0" = "Apache 2" = "Apache-2.0",
   "Creative Commons Attribution-NonCommercial 4.0 International" = "CC BY-NC 4.0" = "CC-BY-NC-4.0",
   "GPLv3" = "GPL-3.0", "MIT License" = "MIT"; see grading/licenses.py);
4. a middle initial inside a name is dropped ("Scott A. Martens" = "Scott Martens");
5. attached scale letters read as words: "1.54B"/"7b" billion, "2M" million (capital M only:
   "2m" stays metres), "16K"/"16k" thousand, "3T" trillion, "2bn"/"2 mn";
6. case folded; every Unicode dash and hyphen is one hyphen, a separator between words and
   digits ("38.4-metre" = "38.4 metre", "CC-BY-NC-4.0" = "CC BY NC 4.0") and a minus sign only
   before a number that follows no word ("-5 °C");
7. dates become "year month day": ISO dates, ISO timestamps with a time and a zone (the date as
   written: "2024-04-16T16:19:47.000+02:00" = "2024-04-16"), dates in words with or without a weekday
   and an ordinal ("Tuesday, 16th April 2024" = "April 16, 2024" = "2024-04-16"), month and year, and
   day/month/year or month/day/year in digits when only one reading is a date ("16/04/2024"; "04/05/2024"
   is left as numbers);
8. tokens: numbers, words, %, °c/°f and currency symbols; all other punctuation separates;
9. articles (a, an, the) dropped as whole tokens only; number words two..twenty become digits
   ("one" is left alone: far more often a pronoun than a count);
10. a number followed by a scale word is multiplied out ("1.54 billion" = "1540000000"); a number
   followed by a unit gets the unit's one spelling (m/metre/metres/meter -> m, km, %, kg, ft,
   gbp/usd/eur, ...; a currency symbol or code before the number moves after it) and trailing
   decimal zeros are dropped ("38.40 m" = "38.4 m"); a bare number keeps its digits ("3.10" is
   not "3.1": versions).

A gold answer also stands for its other written forms (`gold_forms`): "nK" where n is a power of two
(1, 2, 4, ... 512: context lengths) is n x 1000 and n x 1024 ("8K" = "8,000" = "8,192"), and a gold
that is such an n x 1024 is also "nK" ("8192" = "8K"). Other "K" stay thousands ("10K" = 10,000).

The graders: `exact_match` (the prediction's tokens equal a gold's), `token_f1` (best token F1 over
the golds) and `contains` (a gold's tokens occur contiguously in the prediction: the *lenient* measure,
which credits an answer that also names other candidates; searchbox.grading.correct is the strict one).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from decimal import Decimal, InvalidOperation

from . import licenses

NORMALIZER_VERSION = "norm-3"

_GROUP_SEP = re.compile(r"(?<=\d)[,\u00a0\u202f\u2009'\u2019](?=\d{3}(?!\d))")
_SCALE_LETTER = re.compile(r"(?<=\d)(K|k|M|B|b|T)\b")
_SCALE_SHORT = re.compile(r"(?<=\d)\s?(bn|mn|tn)\b", re.IGNORECASE)
_SCALE_LETTERS = {"K": "thousand", "k": "thousand", "M": "million", "B": "billion", "b": "billion", "T": "trillion"}
_SCALE_SHORTS = {"bn": "billion", "mn": "million", "tn": "trillion"}
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d]")
_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august", "september",
                                       "october", "november", "december"], 1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_WEEKDAY = r"(?:(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\.?,?\s+(?:the\s+)?)?"
_TIME = r"(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?(?:z|utc|[+-]\d{2}(?::?\d{2})?))?)?"
_DATE_ISO = re.compile(rf"\b{_WEEKDAY}(\d{{4}})[-/.](\d{{1,2}})[-/.](\d{{1,2}}){_TIME}(?![\d:])", re.IGNORECASE)
_DATE_DMY = re.compile(rf"\b{_WEEKDAY}{_ORD}\s+(?:of\s+)?{_MON},?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_MDY = re.compile(rf"\b{_WEEKDAY}{_MON}\s+(?:the\s+)?{_ORD},?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_MY = re.compile(rf"\b{_MON},?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_NUMERIC = re.compile(r"(?<![\d.])(\d{1,2})([/.])(\d{1,2})\2(\d{4})\b")  # 16/04/2024 or 04/16/2024, when only one reading fits
_MIDDLE_INITIAL = re.compile(r"\b([A-Z][a-z\u00c0-\u024f'\u2019-]+)\s+(?:[A-Z]\.\s*)+(?=[A-Z][a-z\u00c0-\u024f])")
_BINARY_K = re.compile(r"(?<![\w.])(\d+)\s?[Kk]\b")
_TOKEN = re.compile(r"(?:(?<![\w.])-)?\d+(?:\.\d+)*|[^\W\d_]+|%|°[cf]?|[$£€¥]")

ARTICLES = {"a", "an", "the"}
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    ["zero", "", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
     "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]) if w}
SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
CURRENCY = {"$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp",
            "€": "eur", "eur": "eur", "euro": "eur", "euros": "eur", "¥": "jpy", "jpy": "jpy", "yen": "jpy"}
_UNIT_NAMES = {
    "m": "m metre metres meter meters", "km": "km kilometre kilometres kilometer kilometers kms",
    "cm": "cm centimetre centimetres centimeter centimeters", "mm": "mm millimetre millimetres millimeter millimeters",
    "ft": "ft foot feet", "inch": "inch inches", "mi": "mi mile miles", "kg": "kg kilogram kilograms kilo kilos kgs",
    "g": "g gram grams", "t": "tonne tonnes", "%": "% percent pct", "s": "s sec secs second seconds",
    "ms": "ms millisecond milliseconds", "min": "min mins minute minutes", "h": "h hr hrs hour hours",
    "day": "day days", "week": "week weeks", "month": "month months", "year": "year years yr yrs",
    "gb": "gb gigabyte gigabytes", "mb": "mb megabyte megabytes", "kb": "kb kilobyte kilobytes", "tb": "tb terabyte terabytes",
    "°c": "°c celsius", "°f": "°f fahrenheit", "°": "° degree degrees",
}
UNITS = {name: canon for canon, names in _UNIT_NAMES.items() for name in names.split()}
UNIT_PAIRS = {("per", "cent"): "%", ("degrees", "celsius"): "°c", ("degree", "celsius"): "°c", ("degrees", "fahrenheit"): "°f",
              ("square", "metres"): "m2", ("square", "meters"): "m2", ("square", "metre"): "m2", ("square", "meter"): "m2"}


def fold(text: str) -> str:
    """Unicode NFKC with diacritics folded (step 1)."""
    text = unicodedata.normalize("NFKC", text or "")
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _month(m: str) -> int:
    m = m.lower().rstrip(".")
    return int(m) if m.isdigit() else _MONTHS.get(m) or _MONTHS[m[:3]]


def find_dates(text: str) -> list[tuple[int, int, tuple[int, int, int | None]]]:
    """Every date written in text (steps 7 of the module docstring): (start, end, (year, month, day or None)), in order.
    Impossible dates (month 13, day 32) are no dates."""
    text = text or ""
    found: list[tuple[int, int, tuple[int, int, int | None]]] = []
    taken = bytearray(len(text))  # linear in the text however many dates it holds

    def add(m: re.Match, value: tuple[int, int, int | None]) -> None:
        if not any(taken[m.start():m.end()]):
            taken[m.start():m.end()] = b"\x01" * (m.end() - m.start())
            found.append((m.start(), m.end(), value))

    for pattern, order in ((_DATE_ISO, (1, 2, 3)), (_DATE_DMY, (3, 2, 1)), (_DATE_MDY, (3, 1, 2)), (_DATE_MY, (2, 1, None))):
        for m in pattern.finditer(text):
            y, mo, d = int(m[order[0]]), _month(m[order[1]]), int(m[order[2]]) if order[2] else None
            if 1 <= mo <= 12 and (d is None or 1 <= d <= 31):
                add(m, (y, mo, d))
    for m in _DATE_NUMERIC.finditer(text):
        a, b = int(m[1]), int(m[3])
        readings = {(b, a) if 1 <= b <= 12 and 1 <= a <= 31 else None, (a, b) if 1 <= a <= 12 and 1 <= b <= 31 else None} - {None}
        if len(readings) == 1:
            add(m, (int(m[4]), *readings.pop()))
    return sorted(found)


def _dates(text: str) -> str:
    out, last = [], 0
    for start, end, (y, m, d) in find_dates(text):
        out += [text[last:start], f" {y} {m} {d} " if d is not None else f" {y} {m} "]
        last = end
    return "".join(out) + text[last:]


def gold_forms(gold: str) -> list[str]:
    """A gold answer and its other written forms (the binary "K" rule in the module docstring)."""
    forms = [gold]
    binary = _BINARY_K.sub(lambda m: str(int(m[1]) * 1024) if _power_of_two(int(m[1])) else m[0], gold or "")
    if binary != gold:
        forms.append(binary)
    whole = _GROUP_SEP.sub("", (gold or "").strip())
    if whole.isdigit() and int(whole) % 1024 == 0 and _power_of_two(int(whole) // 1024):
        forms.append(f"{int(whole) // 1024}K")
    return forms


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _golds(golds: list[str]) -> list[str]:
    return [form for g in golds for form in gold_forms(g)]


def _number(token: str) -> Decimal | None:
    try:
        return Decimal(token)
    except InvalidOperation:
        return None  # "4.0.1": a version, kept as written


def _plain(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def tokens(text: str) -> list[str]:
    """The canonical tokens of an answer or a gold string (see the module docstring)."""
    text = _GROUP_SEP.sub("", fold(_GROUP_SEP.sub("", text or "")))  # before NFKC too: it turns thin spaces into spaces
    text = _MIDDLE_INITIAL.sub(r"\1 ", licenses.canonical(text))
    text = _SCALE_LETTER.sub(lambda m: " " + _SCALE_LETTERS[m[1]], text)
    text = _SCALE_SHORT.sub(lambda m: " " + _SCALE_SHORTS[m[1].lower()], text)
    text = _dates(_DASHES.sub("-", text.casefold()))
    raw = [NUMBER_WORDS.get(t, t) for t in _TOKEN.findall(text) if t not in ARTICLES]
    out: list[str] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        value = _number(tok) if tok[-1:].isdigit() else None
        if value is None:
            if tok in CURRENCY and i + 1 < len(raw) and raw[i + 1][-1:].isdigit() and _number(raw[i + 1]) is not None:
                k = i + 2
                while k < len(raw) and raw[k] in SCALES:
                    k += 1
                raw[i:k] = raw[i + 1 : k] + [tok]  # "£1.5 million" -> "1.5 million £": the currency follows the amount
                continue
            out.append(tok)
            i += 1
            continue
        j, scaled = i + 1, False
        while j < len(raw) and raw[j] in SCALES:
            value, scaled, j = value.scaleb(SCALES[raw[j]]), True, j + 1
        unit = None
        if j + 1 < len(raw) and (raw[j], raw[j + 1]) in UNIT_PAIRS:
            unit, j = UNIT_PAIRS[(raw[j], raw[j + 1])], j + 2
        elif j < len(raw) and (raw[j] in UNITS or raw[j] in CURRENCY):
            unit, j = UNITS.get(raw[j]) or CURRENCY[raw[j]], j + 1
        out.append(_plain(value) if scaled or unit else tok)
        if unit:
            out.append(unit)
        i = j
    return out


def normalize(text: str) -> str:
    """The canonical tokens joined by spaces (what exact match compares)."""
    return " ".join(tokens(text))


def exact_match(prediction: str, golds: list[str]) -> float:
    """1 when the prediction's tokens equal some gold's; NaN without gold."""
    if not golds:
        return math.nan
    p = tokens(prediction)
    return float(any(p == tokens(g) for g in _golds(golds) if tokens(g)))


def token_f1(prediction: str, golds: list[str]) -> float:
    """Best token F1 over the golds; NaN without gold."""
    if not golds:
        return math.nan
    pred = Counter(tokens(prediction))
    best = 0.0
    for gold in _golds(golds):
        ref = Counter(tokens(gold))
        common = sum((pred & ref).values())
        if common:
            precision, recall = common / sum(pred.values()), common / sum(ref.values())
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains(prediction: str, golds: list[str]) -> float:
    """The lenient grade: 1 when some gold's tokens occur, contiguous and in order, among the prediction's
    (whatever else it says: negations and other candidates too); NaN without gold."""
    if not golds:
        return math.nan
    p = tokens(prediction)
    for gold in _golds(golds):
        g = tokens(gold)
        if g and any(p[i : i + len(g)] == g for i in range(len(p) - len(g) + 1)):
            return 1.0
    return 0.0
