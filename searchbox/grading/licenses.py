"""License names read as SPDX identifiers: "Apache License, Version 2.0" = "Apache 2" = `Apache-2.0`.

`find(text)` gives every license mention with its span and canonical form; `canonical(text)` rewrites
each mention to that form. Known families (Apache, Creative Commons with its BY/NC/ND/SA parts,
GPL/LGPL/AGPL with "-or-later", BSD 2/3-clause, MPL, MIT, CC0, Unlicense) become their SPDX id; any
other "<Capitalised words> License" (the "Qwen Research License") is a license named by its words.
"""

from __future__ import annotations

import re
from typing import Iterator

_V = r"(?:[\s,]*(?:v(?:ersion)?\.?\s*))?"  # ", Version " / " v" / "v." before a version number
_LIC = r"(?:[\s-]+licen[sc]e)?"
_CC_PART = r"(?:attribution|by|non[\s-]?commercial|nc|share[\s-]?alike|sa|no[\s-]?derivatives?|no[\s-]?derivs|nd)"
_CC_ORDER = ("BY", "NC", "ND", "SA")


def _cc(m: re.Match) -> str:
    parts = {_cc_part(p) for p in re.findall(_CC_PART, m["parts"], re.IGNORECASE)}
    return "CC-" + "-".join(p for p in _CC_ORDER if p in parts) + "-" + m["ver"]


def _cc_part(word: str) -> str:
    w = re.sub(r"[\s-]", "", word.lower())
    return {"attribution": "BY", "by": "BY", "noncommercial": "NC", "nc": "NC", "sharealike": "SA", "sa": "SA"}.get(w, "ND")


def _gpl(m: re.Match) -> str:
    kind = (m["kind"] or "").strip().lower()
    prefix = "A" if kind.startswith("a") else "L" if kind.startswith("l") else ""
    minor = m["minor"] or "0"
    later = "-or-later" if m["later"] and "only" not in m["later"].lower() else ""
    return f"{prefix}GPL-{m['major']}.{minor}{later}"


# (pattern, canonical form or a function of the match); tried in order, the first match at a position wins
_FAMILIES: list[tuple[re.Pattern, object]] = [
    (re.compile(rf"\b(?:creative\s+commons|cc)(?P<parts>(?:[\s-]+{_CC_PART}\b)+){_LIC}{_V}[\s-]*(?P<ver>[1-4]\.0)(?:[\s-]+international)?"
                rf"(?:\s+licen[sc]e)?", re.IGNORECASE), _cc),
    (re.compile(r"\b(?:cc0|cc[\s-]+zero|creative\s+commons\s+zero)(?:[\s-]+v?1\.0)?(?:[\s-]+universal)?", re.IGNORECASE), "CC0-1.0"),
    (re.compile(rf"\bapache(?:[\s-]+software)?{_LIC}{_V}[\s-]*2(?:\.0)?(?![\d.]*\d)", re.IGNORECASE), "Apache-2.0"),
    (re.compile(r"\b(?:gnu\s+)?(?P<kind>affero\s+|lesser\s+|library\s+|a|l)?(?:gpl|general\s+public\s+licen[sc]e)"
                rf"{_V}[\s-]*(?P<major>[123])(?:\.(?P<minor>\d))?(?P<later>\+|[\s-]+or[\s-]+later|-only)?(?![\d])", re.IGNORECASE), _gpl),
    (re.compile(r"\b(?:bsd[\s-]*(?P<a>[23])[\s-]*clause|(?P<b>[23])[\s-]*clause[\s-]*bsd)(?:\s+licen[sc]e)?", re.IGNORECASE),
     lambda m: f"BSD-{m['a'] or m['b']}-Clause"),
    (re.compile(r"\b(?:new|modified|revised)\s+bsd(?:\s+licen[sc]e)?", re.IGNORECASE), "BSD-3-Clause"),
    (re.compile(r"\b(?:simplified|freebsd)\s+bsd(?:\s+licen[sc]e)?", re.IGNORECASE), "BSD-2-Clause"),
    (re.compile(rf"\b(?:mozilla\s+public\s+licen[sc]e|mpl){_V}[\s-]*2(?:\.0)?(?![\d.]*\d)", re.IGNORECASE), "MPL-2.0"),
    (re.compile(r"\b(?:the\s+)?mit\s+licen[sc]e\b|\bMIT\b|\bexpat\s+licen[sc]e\b", re.IGNORECASE), "MIT"),
    (re.compile(r"\b(?:the\s+)?unlicen[sc]e\b", re.IGNORECASE), "Unlicense"),
]
# any other license named by capitalised words: "Qwen Research License", "Llama 2 Community License Agreement"
_NAMED = re.compile(r"\b[A-Z][\w.]*\s+(?:(?:[A-Z][\w.]*|\d+(?:\.\d+)*)\s+){0,3}Licen[sc]e(?:\s+Agreement)?\b")
_NAMED_SKIP = re.compile(r"^(?:The|A|An|This|That|Its|Their|Open|Source|Software)\s+", re.IGNORECASE)


def find(text: str) -> list[tuple[int, int, str]]:
    """Every license mention in text: (start, end, canonical form), non-overlapping, in order."""
    text = text or ""
    found: list[tuple[int, int, str]] = []
    taken = bytearray(len(text))  # linear in the text however many mentions it holds
    for pattern, form in _FAMILIES:
        for m in pattern.finditer(text):
            if m[0].strip().upper() == "MIT" and not m[0].isupper():
                continue  # "mit" in German, a lower-case word: only MIT itself names the license
            _add(found, taken, m.start(), m.end(), form(m) if callable(form) else form)
    for m in _NAMED.finditer(text):
        start = m.start() + (len(skip[0]) if (skip := _NAMED_SKIP.match(m[0])) else 0)
        words = text[start:m.end()].split()
        if len(words) >= 2:
            _add(found, taken, start, m.end(), " ".join(w.capitalize() if w.islower() else w for w in words))
    return sorted(found)


def _add(found: list[tuple[int, int, str]], taken: bytearray, start: int, end: int, form: str) -> None:
    if not any(taken[start:end]):
        taken[start:end] = b"\x01" * (end - start)
        found.append((start, end, form))


def canonical(text: str) -> str:
    """text with each license mention replaced by its canonical form."""
    out, last = [], 0
    for start, end, form in find(text):
        out += [text[last:start], form]
        last = end
    return "".join(out) + (text or "")[last:]


def iter_forms(text: str) -> Iterator[str]:
    """The canonical forms of the licenses text mentions, in order."""
    return (form for _, _, form in find(text))
