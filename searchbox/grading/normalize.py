"""Answer normalisation into canonical tokens, and the string graders over them: exact match, token F1, contains.

Both sides (answer and gold) go through the same steps, in this order:
1. Unicode NFKC (full-width digits, ligatures, "℃"), diacritics folded ("Zürich" = "Zurich");
2. digit-group separators dropped ("41,200", "41 200" with a thin/no-break space, "41'200");
3. attached scale letters read as words: "1.54B"/"7b" billion, "2M" million (capital M only:
   "2m" stays metres), "16K"/"16k" thousand, "3T" trillion, "2bn"/"2 mn";
4. case folded; every Unicode dash and hyphen is one hyphen, a separator between words and
   digits ("38.4-metre" = "38.4 metre", "CC-BY-NC-4.0" = "CC BY NC 4.0") and a minus sign only
   before a number that follows no word ("-5 °C");
5. dates in words or ISO form become "year month day" ("16 January 2025" = "2025-01-16");
6. tokens: numbers, words, %, °c/°f and currency symbols; all other punctuation separates;
7. articles (a, an, the) dropped as whole tokens only; number words two..twenty become digits
   ("one" is left alone: far more often a pronoun than a count);
8. a number followed by a scale word is multiplied out ("1.54 billion" = "1540000000"); a number
   followed by a unit gets the unit's one spelling (m/metre/metres/meter -> m, km, %, kg, ft,
   gbp/usd/eur, ...; a currency symbol or code before the number moves after it) and trailing
   decimal zeros are dropped ("38.40 m" = "38.4 m"); a bare number keeps its digits ("3.10" is
   not "3.1": versions).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from decimal import Decimal, InvalidOperation

NORMALIZER_VERSION = "norm-2"

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
_DATE_DMY = re.compile(rf"\b{_ORD}\s+(?:of\s+)?{_MON},?\s+(\d{{4}})\b")
_DATE_MDY = re.compile(rf"\b{_MON}\s+{_ORD},?\s+(\d{{4}})\b")
_DATE_MY = re.compile(rf"\b{_MON},?\s+(\d{{4}})\b")
_DATE_ISO = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
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


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "")
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def _dates(text: str) -> str:
    def ymd(y: str, m: str, d: str | None = None) -> str:
        month = int(m) if m.isdigit() else _MONTHS.get(m.rstrip(".")) or _MONTHS[m.rstrip(".")[:3]]
        return f" {int(y)} {month} {int(d)} " if d is not None else f" {int(y)} {month} "

    text = _DATE_ISO.sub(lambda x: ymd(x[1], x[2], x[3]), text)
    text = _DATE_DMY.sub(lambda x: ymd(x[3], x[2], x[1]), text)
    text = _DATE_MDY.sub(lambda x: ymd(x[3], x[1], x[2]), text)
    return _DATE_MY.sub(lambda x: ymd(x[2], x[1]), text)


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
    text = _GROUP_SEP.sub("", _fold(_GROUP_SEP.sub("", text or "")))  # before NFKC too: it turns thin spaces into spaces
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
    return float(any(p == tokens(g) for g in golds if tokens(g)))


def token_f1(prediction: str, golds: list[str]) -> float:
    """Best token F1 over the golds; NaN without gold."""
    if not golds:
        return math.nan
    pred = Counter(tokens(prediction))
    best = 0.0
    for gold in golds:
        ref = Counter(tokens(gold))
        common = sum((pred & ref).values())
        if common:
            precision, recall = common / sum(pred.values()), common / sum(ref.values())
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains(prediction: str, golds: list[str]) -> float:
    """1 when some gold's tokens occur, contiguous and in order, among the prediction's; NaN without gold."""
    if not golds:
        return math.nan
    p = tokens(prediction)
    for gold in golds:
        g = tokens(gold)
        if g and any(p[i : i + len(g)] == g for i in range(len(p) - len(g) + 1)):
            return 1.0
    return 0.0
