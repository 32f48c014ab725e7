"""Each run's fact group (`fact_group`), from its question file, so CIs resample facts rather than questions (issue 29).

Questions that ask one fact (questions/facts.py: the same answer file and normalised gold) are one observation: the
57 packaged multi-hop questions ask 35 facts, and resampling them as 57 makes the CIs too narrow. The group is computed
here, from the question file each run recorded (`questions_path`; one from another checkout falls back to the packaged
file of that name, as regrading does), not stored in runs.parquet: one source of truth, the question line. A run whose
file is gone, unreadable, or no longer holds its question with the run's wording is its own group (its question id):
nothing says it shares a fact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd

from ..errors import SearchboxError
from ..grading import Question, load_questions
from ..grading.tables import BUILTIN
from ..questions.facts import fact_of

COLUMN = "fact_group"


def _questions(recorded: str) -> Optional[dict[str, Question]]:
    path = Path(recorded)
    if not path.is_file() and (BUILTIN / path.name).is_file():
        path = BUILTIN / path.name
    try:
        return {q.id: q for q in load_questions(path)} if path.is_file() else None
    except (SearchboxError, OSError, ValueError):
        return None


def with_facts(runs: pd.DataFrame) -> pd.DataFrame:
    """runs with a `fact_group` column (a table that has one already keeps it)."""
    if runs.empty or "question_id" not in runs.columns or COLUMN in runs.columns:
        return runs
    files: dict[str, Optional[dict[str, Question]]] = {}
    paths = runs["questions_path"] if "questions_path" in runs.columns else pd.Series(None, index=runs.index, dtype=object)
    texts = runs["question"] if "question" in runs.columns else pd.Series(None, index=runs.index, dtype=object)
    out = []
    for qid, path, text in zip(runs["question_id"].astype(str), paths, texts):
        table = None
        if isinstance(path, str) and path:
            if path not in files:
                files[path] = _questions(path)
            table = files[path]
        q = (table or {}).get(qid)
        same = q is not None and (not isinstance(text, str) or q.question.strip() == text.strip())
        out.append(fact_of(q) if same else f"question {qid}")
    return runs.assign(**{COLUMN: out})


def resampled(runs: pd.DataFrame) -> str:
    """What these runs' CIs resample, in a word for a caption: "facts" when some questions share one, else "questions"."""
    n, m = counts(runs)
    return "facts" if m < n else "questions"


def counts(runs: pd.DataFrame) -> tuple[int, int]:
    """(questions, distinct facts) of these runs."""
    if runs.empty or "question_id" not in runs.columns:
        return 0, 0
    groups = runs[COLUMN] if COLUMN in runs.columns else runs["question_id"].astype(str)
    return int(runs["question_id"].nunique()), int(groups.nunique())
