"""Which fact a question asks: questions that ask one fact are one observation, not several (issue 29).

A fact is the answer file and the gold value, normalised as the grader normalises it (grading.normalize): "The model X
has been superseded. What is the dimension of the model that superseded it?" asks the successor card's 1024 whatever X
is, so 21 packaged questions that end on jina-embeddings-v3's card ask a handful of facts. The answer file is the file of
the question's evidence span that holds the gold, else its one gold file, else all its gold files together (a question
with two gold files and no span says no more). A question file may name the group itself (`fact`: an importer that
knows two questions share a fact its files do not show); that wins.

The group is computed from the question line wherever it is needed (the audit, and the analysis from each run's question
file), never written beside it: a written key is a second copy of the gold, which goes stale when the gold is edited.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Protocol

from ..grading.normalize import normalize, tokens


class Asked(Protocol):
    id: str
    answer: str
    aliases: list[str]
    gold_files: list[str]


def answer_file(q: Asked) -> str:
    """The file that answers: its evidence span's that holds the gold, else its one gold file, else its gold files joined."""
    golds = [t for t in (tokens(g) for g in [q.answer, *(q.aliases or [])]) if t]
    for span in getattr(q, "evidence", None) or []:
        if isinstance(span, dict) and isinstance(span.get("file"), str):
            hay = tokens(str(span.get("text") or ""))
            if any(any(hay[i : i + len(g)] == g for i in range(len(hay) - len(g) + 1)) for g in golds):
                return span["file"]
    files = sorted(dict.fromkeys(q.gold_files or []))
    return files[0] if len(files) == 1 else " + ".join(files)


def fact_of(q: Asked) -> str:
    """The question's fact group: its own `fact` when the file gives one, else "ANSWER_FILE: normalised gold"; a question
    with neither gold nor gold file is its own fact (its id)."""
    given = str(getattr(q, "fact", "") or "").strip()
    if given:
        return given
    value, where = normalize(q.answer or ""), answer_file(q)
    return f"{where}: {value}" if value and where else f"question {q.id}"


def count(questions: Iterable[Asked]) -> tuple[int, int, Counter]:
    """(questions, distinct facts, questions per fact)."""
    per = Counter(fact_of(q) for q in questions)
    return sum(per.values()), len(per), per
