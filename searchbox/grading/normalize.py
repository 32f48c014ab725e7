"""Answer normalisation into canonical tokens, and the string graders over them: exact match, token F1, contains.

Both sides (answer and gold) go through the same steps, in this order:
1. Unicode NFKC (full-width digits, ligatures, "℃"), diacritics folded ("Zürich" = "Zurich") and letters that
   carry no combining mark transliterated ("Søren" = "Soren", "Łukasz" = "Lukasz", "Straße" = "Strasse");
   superscript exponents after a digit read as powers ("10⁶" = "10^6"), elsewhere as digits ("m²" = "m2"); invisible
   format characters dropped (zero-width space and joiners, soft hyphen, BOM, bidi controls: "N\u200bot" = "Not") and
   Cyrillic or Greek letters drawn like Latin ones read as Latin in a word made only of such letters and Latin ones
   ("nоt" with a Cyrillic о = "not"; "Москва" is left);
2. digit-group separators dropped ("41,200", "41 200" with a thin/no-break space, "41'200"; a plain space is
   no separator: "768 512 256" is a list); a decimal comma is read as a point where it cannot be a group
   separator and says it is money or a measure ("€1,2 Mio.", "3,5 %", "38,4 m"); dotted initialisms lose their dots
   ("D.C." = "DC");
3. license names become their SPDX identifier ("Apache License, Version 2.0" = "Apache 2" = "Apache-2.0",
   "Creative Commons Attribution-NonCommercial 4.0 International" = "CC BY-NC 4.0" = "CC-BY-NC-4.0",
   "GPLv3" = "GPL-3.0", "MIT License" = "MIT"; see grading/licenses.py);
4. a middle initial inside a name is dropped ("Scott A. Martens" = "Scott Martens");
5. attached scale letters read as words: "1.54B"/"7b" billion, "2M" million (capital M only:
   "2m" stays metres, except after a currency: "$1.2m", "EUR 1.2m", "1.2m euros"), "16K"/"16k" thousand,
   "3T" trillion, "2bn"/"2 mn", "Mio."/"Mrd." (million, billion) and "lakh"/"crore" (10^5, 10^7); scientific notation becomes
   its digits ("1e6" = "1.2 × 10^6"/1000000 = "10^6" read as 1,000,000);
6. case folded; every Unicode dash and hyphen is one hyphen, a separator between words and
   digits ("38.4-metre" = "38.4 metre", "CC-BY-NC-4.0" = "CC BY NC 4.0") and a minus sign only
   before a number that follows no word ("-5 °C");
7. dates become "year month day": ISO dates, ISO timestamps with a time and a zone (the date as
   written: "2024-04-16T16:19:47.000+02:00" = "2024-04-16"), dates in words with or without a weekday
   and an ordinal ("Tuesday, 16th April 2024" = "April 16, 2024" = "16-Apr-2024" = "2024-04-16"), month and year,
   and day/month/year or month/day/year in digits, with slashes, dots or dashes, when only one reading is a date
   ("16/04/2024", "16-04-2024"; "04/05/2024" is left as numbers); ordinal words read as days ("the sixteenth of April 2024"); periods of a year
   become "year period": quarters ("Q3 2024" = "third quarter of 2024" = "2024 Q3"), halves ("H1 2024"),
   fiscal years ("FY2023" = "FY 2023" = "fiscal 2023", never the calendar year), "early"/"mid"/"late"
   ("mid-2024") and seasons ("summer 2024"); times of day with am/pm become 24-hour ("4:19 pm" = "16:19");
8. tokens: numbers, words, %, °c/°f and currency symbols; all other punctuation separates;
9. articles (a, an, the) dropped as whole tokens only; number words become digits, compounds too
   ("twenty-one", "two thousand and five" = 2005, "a million"); a lone "one" is left alone (far more often a
   pronoun than a count) but counts before a scale ("one million");
10. a number followed by a scale word is multiplied out ("1.54 billion" = "1540000000"); a number
   followed by a unit gets the unit's one spelling (m/metre/metres/meter -> m, km, %, kg, ft, m2 (m²,
   "square metres", "sq m"), l, kw, °c ("degrees Celsius"), % ("per cent", "percentage points"),
   gbp/usd/eur, ...; a currency symbol or code before the number moves after it) and trailing
   decimal zeros are dropped ("38.40 m" = "38.4 m"); a bare number keeps its digits ("3.10" is
   not "3.1": versions).

A gold answer also stands for its other written forms (`gold_forms`): "nK" where n is a power of two
(1, 2, 4, ... 512: context lengths) is n x 1000 and n x 1024 ("8K" = "8,000" = "8,192"), and a gold
that is such an n x 1024 is also "nK" ("8192" = "8K"). Other "K" stay thousands ("10K" = 10,000).
A gold with a German umlaut also stands for its transliteration ("Günther" = "Guenther").
Decided against: a fraction is no percentage ("0.35" is not "35%": a score or a share, it must say which).

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

NORMALIZER_VERSION = "norm-6"  # norm-6: invisible format characters dropped, Cyrillic/Greek look-alikes read as Latin, "38,4 m"

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
_ORDINAL_UNITS = "first second third fourth fifth sixth seventh eighth ninth".split()
ORDINALS = {w: i for i, w in enumerate(_ORDINAL_UNITS + "tenth eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
                                       "seventeenth eighteenth nineteenth twentieth".split(), 1)}
ORDINALS.update({f"twenty-{w}": 20 + i for i, w in enumerate(_ORDINAL_UNITS, 1)})
ORDINALS.update({"thirtieth": 30, "thirty-first": 31})
_ORD_WORDS = "|".join(sorted((w.replace("-", "[\\s-]") for w in ORDINALS), key=len, reverse=True))
_ORD = rf"(\d{{1,2}}(?:st|nd|rd|th)?|{_ORD_WORDS})"
_WEEKDAY = r"(?:(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?\.?,?\s+(?:the\s+)?)?"
_TIME = r"(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?(?:z|utc|[+-]\d{2}(?::?\d{2})?))?)?"
_DATE_ISO = re.compile(rf"\b{_WEEKDAY}(\d{{4}})[-/.](\d{{1,2}})[-/.](\d{{1,2}}){_TIME}(?![\d:])", re.IGNORECASE)
_DATE_DMY = re.compile(rf"\b{_WEEKDAY}{_ORD}(?:\s+(?:of\s+)?|-){_MON}(?:,?\s+|-)(\d{{4}})\b", re.IGNORECASE)
_DATE_MDY = re.compile(rf"\b{_WEEKDAY}{_MON}\s+(?:the\s+)?{_ORD},?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_MY = re.compile(rf"\b{_MON},?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_NUMERIC = re.compile(r"(?<![\d.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4})\b")  # 16/04/2024, 16-04-2024 or 04/16/2024, when only one reading fits
_Y4 = r"(?P<y>\d{4})\b"
_NTH = r"(?P<p>first|second|third|fourth|1st|2nd|3rd|4th)"
_PERIOD_PATTERNS = [(re.compile(pattern, re.IGNORECASE), code) for pattern, code in (  # (pattern, the period's name from the match)
    (rf"\bq(?P<p>[1-4])[\s/-]*(?:of\s+)?{_Y4}", lambda m: "q" + m["p"]),
    (r"\b(?P<y>\d{4})[\s/-]*q(?P<p>[1-4])\b", lambda m: "q" + m["p"]),
    (rf"\b{_NTH}\s+quarter,?\s+(?:of\s+)?{_Y4}", lambda m: "q" + _period(m)),
    (rf"\bh(?P<p>[12])[\s/-]*(?:of\s+)?{_Y4}", lambda m: "h" + m["p"]),
    (r"\b(?P<y>\d{4})[\s/-]*h(?P<p>[12])\b", lambda m: "h" + m["p"]),
    (rf"\b{_NTH}\s+half,?\s+(?:of\s+)?{_Y4}", lambda m: "h" + _period(m)),
    (r"\b(?:fy|fiscal(?:\s+year)?)\s?['\u2019]?(?P<y>\d{4}|\d{2})\b", lambda m: "fy"),
    (rf"\b(?P<p>early|mid|late|(?:the\s+)?(?:middle|end|start|beginning)\s+of)[\s-]+{_Y4}", lambda m: _period(m)),
    (rf"\b(?P<p>spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_Y4}", lambda m: _period(m)),
)]
_MIDDLE_INITIAL = re.compile(r"\b([A-Z][a-z\u00c0-\u024f'\u2019-]+)\s+(?:[A-Z]\.\s*)+(?=[A-Z][a-z\u00c0-\u024f])")
_BINARY_K = re.compile(r"(?<![\w.])(\d+)\s?[Kk]\b")
_TOKEN = re.compile(r"(?:(?<![\w.])-)?\d+(?:\.\d+)*|(?<![^\W\d_])(?:[kcm]?m|ft|mi)[23](?![\w])|[^\W\d_]+|%|°[cf]?|[$£€¥₹]")
_CLOCK = re.compile(r"(?<![\d:.])(?P<h>\d{1,2})(?::(?P<m>\d{2})(?::(?P<s>\d{2}))?)?(?:\s?(?P<ap>[ap])\.?\s?m\b\.?)?(?![\d:])", re.IGNORECASE)
_PER_HOUR = re.compile(r"(?<=\d)\s*(km|mi)\s*/\s*h\b", re.IGNORECASE)
_MINUS_WORD = re.compile(r"\bminus\s+(?=\d)", re.IGNORECASE)
_CURRENCY_PREFIX = re.compile(r"(?<![\w$])(?:us|au|a|ca|c|nz|hk|s)\$", re.IGNORECASE)
# A currency named with its country ("US dollars", "Swiss francs") is one unit, as its code and symbol are.
_CURRENCY_NAMES = {"usd": r"u\.?\s?s\.?|united\s+states|american", "aud": "australian", "cad": "canadian", "nzd": r"new\s+zealand",
                   "hkd": r"hong\s+kong", "sgd": "singapore"}
_CURRENCY_NAME = re.compile(r"(?<![\w.])(?:(?P<dollar>" + "|".join(f"(?P<{c}>{w})" for c, w in _CURRENCY_NAMES.items())
                            + r")\s+dollars?|(?:british\s+)?pounds?\s+sterling|british\s+pounds?|japanese\s+yen|swiss\s+francs?"
                            + r"|indian\s+rupees?)\b", re.IGNORECASE)
_NAMED_CODE = {"british": "gbp", "pound": "gbp", "japanese": "jpy", "swiss": "chf", "indian": "inr"}


def currency_names(text: str) -> str:
    """Every currency written as its name with a country ("74,000 US dollars") as its ISO code ("74,000 usd")."""
    def code(m: re.Match) -> str:
        if m["dollar"]:
            return " " + next(c for c in _CURRENCY_NAMES if m[c]) + " "
        return " " + _NAMED_CODE[next(w for w in _NAMED_CODE if m[0].lower().startswith(w))] + " "

    return _CURRENCY_NAME.sub(code, text)

ARTICLES = {"a", "an", "the"}
ONES = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                                   "sixteen seventeen eighteen nineteen".split())}
TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
NUMBER_WORDS = {w: str(i) for w, i in {**ONES, **TENS}.items() if w != "one"}  # single words that always count
SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "mio": 6, "mrd": 9, "mln": 6, "bln": 9, "bn": 9, "mn": 6, "tn": 12,
          "lakh": 5, "lakhs": 5, "crore": 7, "crores": 7}  # "lakh"/"crore": the Indian scale words (12 lakh = 1.2 million)
_ABBREVIATED_SCALES = ("mio", "mrd", "mln", "bln", "bn", "mn", "tn")  # abbreviations: after digits only, never a number word's
CURRENCY = {"$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp",
            "€": "eur", "eur": "eur", "euro": "eur", "euros": "eur", "¥": "jpy", "jpy": "jpy", "yen": "jpy", "₹": "inr", "inr": "inr",
            "rupees": "inr", "chf": "chf", "francs": "chf", "aud": "aud", "cad": "cad", "nzd": "nzd", "hkd": "hkd", "sgd": "sgd",
            "us$": "usd", "a$": "aud", "au$": "aud", "c$": "cad", "ca$": "cad", "nz$": "nzd", "hk$": "hkd", "s$": "sgd"}
_UNIT_NAMES = {
    "m": "m metre metres meter meters", "km": "km kilometre kilometres kilometer kilometers kms",
    "cm": "cm centimetre centimetres centimeter centimeters", "mm": "mm millimetre millimetres millimeter millimeters",
    "ft": "ft foot feet", "yd": "yd yds yard yards", "inch": "inch inches", "mi": "mi mile miles", "kg": "kg kilogram kilograms kilo kilos kgs",
    "g": "g gram grams", "mg": "mg milligram milligrams", "t": "tonne tonnes", "lb": "lb lbs", "oz": "oz ounce ounces",
    "%": "% percent pct", "s": "s sec secs second seconds",
    "ms": "ms millisecond milliseconds", "min": "min mins minute minutes", "h": "h hr hrs hour hours",
    "day": "day days", "week": "week weeks", "month": "month months", "year": "year years yr yrs",
    "gb": "gb gigabyte gigabytes", "mb": "mb megabyte megabytes", "kb": "kb kilobyte kilobytes", "tb": "tb terabyte terabytes",
    "gib": "gib", "mib": "mib", "kib": "kib", "tib": "tib",
    "m2": "m2 sqm", "km2": "km2", "cm2": "cm2", "ft2": "ft2 sqft", "mi2": "mi2", "ha": "ha hectare hectares", "acre": "acre acres",
    "m3": "m3", "l": "l litre litres liter liters", "ml": "ml millilitre millilitres milliliter milliliters",
    "w": "w watt watts", "kw": "kw kilowatt kilowatts", "mw": "mw megawatt megawatts", "gw": "gw gigawatt gigawatts",
    "kwh": "kwh", "mwh": "mwh", "gwh": "gwh", "hz": "hz hertz", "khz": "khz kilohertz", "mhz": "mhz megahertz", "ghz": "ghz gigahertz",
    "km/h": "kph kmh", "mi/h": "mph", "kn": "kn knot knots", "mol": "mol mole moles", "ppm": "ppm",
    "°c": "°c celsius", "°f": "°f fahrenheit", "°": "° degree degrees",
}
UNITS = {name: canon for canon, names in _UNIT_NAMES.items() for name in names.split()}
UNIT_PAIRS = {("per", "cent"): "%", ("percentage", "points"): "%", ("percentage", "point"): "%",
              ("degrees", "celsius"): "°c", ("degree", "celsius"): "°c", ("degrees", "c"): "°c", ("degree", "c"): "°c",
              ("degrees", "fahrenheit"): "°f", ("degree", "fahrenheit"): "°f", ("degrees", "f"): "°f", ("degree", "f"): "°f",
              **{(a, b): "m2" for a in ("square", "sq") for b in ("m", "metre", "metres", "meter", "meters")},
              **{(a, b): "km2" for a in ("square", "sq") for b in ("km", "kilometre", "kilometres", "kilometer", "kilometers")},
              **{(a, b): "ft2" for a in ("square", "sq") for b in ("ft", "foot", "feet")},
              **{(a, b): "mi2" for a in ("square", "sq") for b in ("mi", "mile", "miles")},
              **{("cubic", b): "m3" for b in ("m", "metre", "metres", "meter", "meters")},
              **{("metric", b): "t" for b in ("ton", "tons", "tonne", "tonnes")}}
PERIODS = {"q1": (1, 2, 3), "q2": (4, 5, 6), "q3": (7, 8, 9), "q4": (10, 11, 12), "h1": (1, 2, 3, 4, 5, 6), "h2": (7, 8, 9, 10, 11, 12),
           "early": (1, 2, 3, 4), "mid": (5, 6, 7, 8), "late": (9, 10, 11, 12), "spring": (3, 4, 5), "summer": (6, 7, 8),
           "autumn": (9, 10, 11), "winter": (12, 1, 2), "fy": ()}  # the months of each period of a year (a fiscal year: unknown)
_TRANSLIT = str.maketrans({"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H", "ı": "i", "ß": "ss",
                           "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "þ": "th", "Þ": "Th", "ð": "d", "Ð": "D"})
# Letters of other scripts drawn as a Latin letter is (Unicode's confusables, Cyrillic and Greek, one glyph each): an answer that
# spells "not" or a name with them reads as it looks.
_LOOK_ALIKE_PAIRS = {"а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "һ": "h",
                     "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O",
                     "Р": "P", "С": "C", "Т": "T", "Х": "X", "У": "Y", "І": "I", "Ј": "J", "Ѕ": "S", "Ԛ": "Q", "Ԝ": "W",
                     "ο": "o", "ν": "v", "ι": "i", "κ": "k", "ρ": "p", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H",
                     "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X"}
_LOOK_ALIKE = str.maketrans(_LOOK_ALIKE_PAIRS)
_LOOK_ALIKE_CHARS = frozenset(_LOOK_ALIKE_PAIRS)
_LOOK_ALIKE_ANY = re.compile(f"[{''.join(_LOOK_ALIKE_PAIRS)}]")
_LETTERS = re.compile(r"[^\W\d_]+")
_SUPERSCRIPT = re.compile("(?<=[0-9])([\u207b\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+)")
_SUPER_DIGITS = str.maketrans("\u207b\u00b9\u00b2\u00b3\u2070\u2074\u2075\u2076\u2077\u2078\u2079", "-1230456789")
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue"})
_INITIALISM = re.compile(r"\b(?:[A-Za-z]\.){2,}(?![A-Za-z])")
_DECIMAL_COMMA = re.compile(r"(?<![\d.,])((?:[$£€¥₹]\s?)?\d+),(\d{1,2})(?![\d,])(?=\s?(?:%|°|€|(?:mio|mrd|tsd|million|billion|thousand|euro|eur|"
                            + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True) if u[0].isalpha()) + r")\b))"
                            r"|(?<![\d.,])([$£€¥₹]\s?\d+),(\d{1,2})(?![\d,])", re.IGNORECASE)
_MONEY_M = re.compile(r"((?:[$£€¥₹]|\b(?:usd|eur|gbp|jpy|chf)\s?)\d+(?:\.\d+)?)\s?(m|mn|bn|b|k)\b"
                      r"|(?<![\w.])(\d+(?:\.\d+)?)\s?(m|mn|bn|k)(?=\s+(?:dollars?|euros?|pounds?|usd|eur|gbp)\b)", re.IGNORECASE)
_MONEY_SCALES = {"m": "million", "mn": "million", "bn": "billion", "b": "billion", "k": "thousand"}
SCIENTIFIC = re.compile(r"(?<![\w.^])(?:(?P<mant>\d+(?:\.\d+)?)(?:[eE](?P<e1>[+-]?\d{1,3})|\s?[x×*·]\s?10\^(?P<e2>[+-]?\d{1,3}))"
                        r"|10\^(?P<e3>[+-]?\d{1,3}))(?![\w.^])")
_WORD_AT = re.compile(r"[a-z]+", re.IGNORECASE)
_NUM_GAP = re.compile(r"(?:\s+|\s*-\s*)")


def scientific_value(m: re.Match) -> Decimal:
    """The value of a SCIENTIFIC match ("6.02e23", "1.2 × 10^6", "10^6")."""
    if m["e3"] is not None:
        return Decimal(f"1e{m['e3']}")
    return Decimal(f"{m['mant']}e{m['e1'] if m['e1'] is not None else m['e2']}")


def number_words(text: str) -> list[tuple[int, int, Decimal, bool]]:
    """Runs of English number words: (start, end, value, lone) where lone marks a bare "one" (a pronoun as often as a count).
    Compounds read whole ("twenty-one", "one hundred and five", "two thousand and five", "a million"); a scale word alone
    ("million", "hundreds") or "a" alone is no number."""
    out: list[tuple[int, int, Decimal, bool]] = []
    if not _ANY_NUMBER_WORD.search(text or ""):
        return out
    words = [(m.start(), m.end(), m[0].casefold()) for m in _WORD_AT.finditer(text or "")]
    i = 0
    while i < len(words):
        got = _number_run(text, words, i) if words[i][2] in _RUN_STARTS else None
        if got is None:
            i += 1
            continue
        j, value = got
        start, end = words[i][0], words[j - 1][1]
        value = Decimal(value)
        if words[j - 1][2] in SCALES and value % 10 ** SCALES[words[j - 1][2]] == 0:  # "two million": precise to millions
            value = Decimal(int(value) // 10 ** SCALES[words[j - 1][2]]).scaleb(SCALES[words[j - 1][2]])
        out.append((start, end, value, j - i == 1 and words[i][2] == "one"))
        i = j
    return out


_RUN_STARTS = frozenset([*ONES, *TENS, "a"])
_ANY_NUMBER_WORD = re.compile(rf"\b(?:{'|'.join([*ONES, *TENS, 'hundred', *SCALES])})\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


def _number_run(text: str, words: list, i: int):
    """(index after the run, value) of the number words starting at words[i], or None."""
    total, current, last, k, end, value = 0, 0, None, i, None, None
    while k < len(words):
        s, e, w = words[k]
        if k > i and not _NUM_GAP.fullmatch(text[words[k - 1][1]:s]):
            break
        if w == "a" and last is None and k + 1 < len(words) and words[k + 1][2] in ("hundred", *SCALES):
            current, last = 1, "a"
        elif w == "and" and last in ("hundred", "scale") and k + 1 < len(words) and (words[k + 1][2] in ONES or words[k + 1][2] in TENS):
            last = "and"
        elif w in ONES and (last is None or last in ("tens", "hundred", "scale", "and")) and not (last == "tens" and ONES[w] >= 10) \
                and not (ONES[w] == 0 and last is not None):
            current, last = current + ONES[w], "ones"
        elif w in TENS and (last is None or last in ("hundred", "scale", "and")):
            current, last = current + TENS[w], "tens"
        elif w == "hundred" and last in ("ones", "a") and 0 < current < 10:
            current, last = current * 100, "hundred"
        elif w in SCALES and w not in _ABBREVIATED_SCALES and last in ("ones", "tens", "hundred", "a") and current > 0:
            total, current, last = total + current * 10 ** SCALES[w], 0, "scale"
        else:
            break
        k += 1
        if last not in ("a", "and"):
            end, value = k, total + current
    return None if end is None else (end, value)


def fold(text: str) -> str:
    """Unicode NFKC with diacritics folded and the letters without a combining mark transliterated (step 1); invisible
    format characters dropped and Latin look-alikes read as Latin (look_alikes)."""
    text = _SUPERSCRIPT.sub(lambda m: "^" + m[1].translate(_SUPER_DIGITS), text or "")
    if not text.isascii():
        text = look_alikes(unicodedata.normalize("NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf")))
    text = unicodedata.normalize("NFKC", text).translate(_TRANSLIT)
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def look_alikes(text: str) -> str:
    """Cyrillic and Greek letters drawn like Latin ones ("nоt" with a Cyrillic о, "Ѕcott") read as those, in every word
    whose letters are all Latin or such look-alikes; a word with any other Cyrillic or Greek letter ("Москва") is left."""
    if not _LOOK_ALIKE_ANY.search(text):
        return text
    return _LETTERS.sub(lambda m: m[0].translate(_LOOK_ALIKE) if _LOOK_ALIKE_ANY.search(m[0]) and all(
        c.isascii() or c in _LOOK_ALIKE_CHARS for c in m[0]) else m[0], text)


def _day(d: str) -> int:
    d = re.sub(r"[\s-]+", "-", d.lower())
    return ORDINALS[d] if d in ORDINALS else int(re.sub(r"\D", "", d))


def _period(m: re.Match) -> str:
    word = (m["p"] or "").lower().replace("the ", "")
    return {"first": "1", "1st": "1", "second": "2", "2nd": "2", "third": "3", "3rd": "3", "fourth": "4", "4th": "4",
            "middle of": "mid", "end of": "late", "start of": "early", "beginning of": "early", "fall": "autumn"}.get(word, word)


def _month(m: str) -> int:
    m = m.lower().rstrip(".")
    return int(m) if m.isdigit() else _MONTHS.get(m) or _MONTHS[m[:3]]


def find_dates(text: str) -> list[tuple[int, int, tuple[int, int | str, int | None]]]:
    """Every date written in text (step 7 of the module docstring): (start, end, (year, month, day or None)), in order;
    a period of a year has the period's name for its month ("q3", "h1", "fy", "mid", "summer": see PERIODS).
    Impossible dates (month 13, day 32) are no dates."""
    text = text or ""
    found: list[tuple[int, int, tuple[int, int | str, int | None]]] = []
    if not _DIGIT.search(text):
        return found  # every date has a year in digits
    taken = bytearray(len(text))  # linear in the text however many dates it holds

    def add(m: re.Match, value: tuple[int, int, int | None]) -> None:
        if not any(taken[m.start():m.end()]):
            taken[m.start():m.end()] = b"\x01" * (m.end() - m.start())
            found.append((m.start(), m.end(), value))

    for pattern, order in ((_DATE_ISO, (1, 2, 3)), (_DATE_DMY, (3, 2, 1)), (_DATE_MDY, (3, 1, 2)), (_DATE_MY, (2, 1, None))):
        for m in pattern.finditer(text):
            y, mo, d = int(m[order[0]]), _month(m[order[1]]), _day(m[order[2]]) if order[2] else None
            if 1 <= mo <= 12 and (d is None or 1 <= d <= 31):
                add(m, (y, mo, d))
    for pattern, code in _PERIOD_PATTERNS:  # before month and year: "early April 2024" is April
        for m in pattern.finditer(text):
            year = int(m["y"]) if len(m["y"]) == 4 else 2000 + int(m["y"])
            add(m, (year, code(m), None))
    for m in _DATE_NUMERIC.finditer(text):
        a, b = int(m[1]), int(m[3])
        readings = {(b, a) if 1 <= b <= 12 and 1 <= a <= 31 else None, (a, b) if 1 <= a <= 12 and 1 <= b <= 31 else None} - {None}
        if len(readings) == 1:
            add(m, (int(m[4]), *readings.pop()))
    return sorted(found)


def _replace(text: str, spans: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, new in spans:
        out += [text[last:start], new]
        last = end
    return "".join(out) + text[last:]


def _dates(text: str) -> str:
    out, last = [], 0
    for start, end, (y, m, d) in find_dates(text):
        out += [text[last:start], f" {y} {m} {d} " if d is not None else f" {y} {m} "]
        last = end
    return "".join(out) + text[last:]


def gold_forms(gold: str) -> list[str]:
    """A gold answer and its other written forms (the binary "K" and umlaut rules in the module docstring)."""
    forms = [gold, *umlaut_forms(gold)]
    binary = _BINARY_K.sub(lambda m: str(int(m[1]) * 1024) if _power_of_two(int(m[1])) else m[0], gold or "")
    if binary != gold:
        forms.append(binary)
    whole = _GROUP_SEP.sub("", (gold or "").strip())
    if whole.isdigit() and int(whole) % 1024 == 0 and _power_of_two(int(whole) // 1024):
        forms.append(f"{int(whole) // 1024}K")
    return forms


def umlaut_forms(gold: str) -> list[str]:
    """A gold with a German umlaut written out ("Günther" -> ["Guenther"]); [] without one."""
    out = unicodedata.normalize("NFC", gold or "").translate(_UMLAUTS)
    return [out] if out != unicodedata.normalize("NFC", gold or "") else []


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


def find_times(text: str) -> list[tuple[int, int, tuple[int, int, int | None]]]:
    """Times of day written in text: (start, end, (hour, minute, second or None)) on a 24-hour clock ("4:19 pm" = 16:19)."""
    out = []
    for m in _CLOCK.finditer(text or ""):
        h, mi, sec = int(m["h"]), int(m["m"] or 0), int(m["s"]) if m["s"] else None
        if m["ap"]:
            if not 1 <= h <= 12:
                continue
            h = h % 12 + (12 if m["ap"].lower() == "p" else 0)
        elif m["m"] is None:
            continue  # a bare number is no time
        if h < 24 and mi < 60 and (sec is None or sec < 60):
            out.append((m.start(), m.end(), (h, mi, sec)))
    return out


def money_and_powers(text: str) -> str:
    """Step 2's decimal comma, a currency's "m" (million), dotted initialisms and scientific notation, rewritten plainly."""
    text = _DECIMAL_COMMA.sub(lambda m: f"{m[1]}.{m[2]}" if m[1] else f"{m[3]}.{m[4]}", text)
    text = _MONEY_M.sub(lambda m: f"{m[1]} {_MONEY_SCALES[m[2].lower()]}" if m[1] else f"{m[3]} {_MONEY_SCALES[m[4].lower()]}", text)
    text = _INITIALISM.sub(lambda m: m[0].replace(".", ""), text)
    text = _MINUS_WORD.sub("-", text)
    text = _PER_HOUR.sub(lambda m: " kph" if m[1].lower() == "km" else " mph", text)
    return SCIENTIFIC.sub(lambda m: _plain(scientific_value(m)), text)


def tokens(text: str) -> list[str]:
    """The canonical tokens of an answer or a gold string (see the module docstring)."""
    text = _GROUP_SEP.sub("", fold(_GROUP_SEP.sub("", text or "")))  # before NFKC too: it turns thin spaces into spaces
    text = _CURRENCY_PREFIX.sub(lambda m: f" {CURRENCY[m[0].lower()]} ", money_and_powers(currency_names(text)))
    text = _MIDDLE_INITIAL.sub(r"\1 ", licenses.canonical(text))
    text = _SCALE_LETTER.sub(lambda m: " " + _SCALE_LETTERS[m[1]], text)
    text = _SCALE_SHORT.sub(lambda m: " " + _SCALE_SHORTS[m[1].lower()], text)
    text = _dates(_DASHES.sub("-", text.casefold()))
    text = _replace(text, [(a, b, f"{h}:{mi:02d}" + (f":{sec:02d}" if sec is not None else "")) for a, b, (h, mi, sec) in find_times(text)])
    text = _replace(text, [(a, b, _plain(v)) for a, b, v, lone in number_words(text) if not lone])
    raw = [t for t in _TOKEN.findall(text) if t not in ARTICLES]
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
