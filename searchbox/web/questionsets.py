"""The question sets a web job may take its question (and gold) from, so that web runs are graded like a sweep's.

Only the packaged sets, each with the dataroom its questions are about: a browser never names a path on the server.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Optional

from ..corpus.dataroom import builtin_dataroom, packaged_corpus
from ..grading import Question, load_questions

LISTED = 1000  # questions a set shows in the picker at most


@dataclass(frozen=True)
class QuestionSet:
    name: str
    label: str
    path: Path
    dataroom: Path  # what its questions are about: the job's dataroom when none is uploaded


def sets() -> dict[str, QuestionSet]:
    builtin = Path(str(resources.files("searchbox") / "builtin"))
    return {s.name: s for s in (
        QuestionSet("jina-builtin", "Jina corpus (built from its front matter)", builtin / "jina-questions.jsonl", packaged_corpus()),
        QuestionSet("tiny", "tiny lighthouse dataroom", builtin / "questions.jsonl", builtin_dataroom()),
    )}


@functools.lru_cache(maxsize=8)
def questions(name: str) -> tuple[Question, ...]:
    return tuple(load_questions(sets()[name].path))


def find(name: str, question_id: str) -> Optional[Question]:
    """The question `question_id` of set `name` (None when either is unknown)."""
    if name not in sets():
        return None
    return next((q for q in questions(name) if q.id == question_id), None)


def listing(name: str) -> list[dict]:
    """What the picker shows of a set: id, type and question text."""
    return [{"id": q.id, "type": q.type, "question": q.question} for q in questions(name)[:LISTED]]
