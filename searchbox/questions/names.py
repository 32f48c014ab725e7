"""The names a question gives and the front matter of a file: what the audit (audit.py) and its field checks (fields.py) both read."""

from __future__ import annotations

import re
from typing import Protocol

FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)
QUOTED = re.compile(r'"([^"]{3,})"|“([^”]{3,})”|(?<!\w)\'([^\']{3,})\'(?!\w)')
QUESTION_WORDS = frozenset("what which who whom whose when where why how on in of for the a an is are was were did does do".split())
IDENT = re.compile(r"[A-Za-z0-9][\w.-]*\w")


class AuditedQuestion(Protocol):
    id: str
    question: str
    answer: str
    aliases: list[str]
    gold_files: list[str]
    type: str


def entities(question: str) -> list[str]:
    """The names a question gives: quoted titles, identifier-like words (with a digit or an inner hyphen), and runs of
    capitalised words after the first word ("Skerrow Point")."""
    quoted = [next(g for g in m.groups() if g) for m in QUOTED.finditer(question)]
    rest = QUOTED.sub(" ", question)
    idents = [w for w in IDENT.findall(rest) if len(w) >= 4 and (re.search(r"\d", w) or "-" in w.strip("-"))]
    names, run, end, before = [], [], 0, ""  # before: the last non-space character ahead of the word (linear: a passage can be long)
    for m in [*re.finditer(r"[\w'-]+", rest), None]:
        if m is not None:
            gap = rest[end : m.start()].rstrip()
            before, end = (gap[-1] if gap else before), m.end()
        initial = m is not None and (not before or before in ".?!:")
        if m is not None:
            before = m[0][-1]
        if m is not None and m[0][:1].isupper() and not initial and m[0].lower() not in QUESTION_WORDS:
            run.append(m[0])
        elif run:
            names.append(" ".join(run))
            run = []
    return list(dict.fromkeys(quoted + idents + names))
