"""Runs whose question is no longer in its file as it was asked or graded: reworded, removed, or its gold changed.

A reworded question is another run (the question text is in the run key), so the old wording's run would stay in
the tables beside the new one: two rows for one question of the file. collect drops a run whose question file
(the run's own `questions_path`) now lacks its id or words it differently.

A changed gold is the same run (the run key holds nothing of the gold: the model never saw it), but its grades were
computed against the old one. A run's grades record the gold they were graded against (`gold_hash`: `gold_hash` below
over answer, aliases, gold_files, evidence_files and evidence spans; runs graded before it carry only `graded_gold`,
the answer and aliases joined by " | "), so `why_regrade` sees a question whose gold in its file differs: collect then
regrades the run through the hook its caller passes (grading is a floor above) or leaves it out in one line, never
keeps the old grade. A run graded against an explicit `--questions` file (`gold_source` "questions") answers to that
file, not to its own.

A run without a question file, or whose file is gone or unreadable, or whose grades record no gold, is kept as it is
(nothing says it is stale). Only `id`, `question` and the gold fields are read, bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .. import bounds
from ..config import stable_hash

FILE_CAP = 256 * 1024**2  # bytes of a question file read to compare wordings
LINE_DEPTH = 32
GOLD_HASH_VERSION = "gold-1"  # in every gold_hash: bump when what it covers changes (every run then reads as regradable)


def _texts(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def _spans(evidence: Any) -> list[dict]:
    return [{"file": str(e.get("file")), "text": str(e.get("text"))} for e in evidence if isinstance(e, dict)] \
        if isinstance(evidence, list) else []


def gold_hash(answer: Any, aliases: Any = (), gold_files: Any = (), evidence_files: Any = (), evidence: Any = ()) -> str:
    """A stable digest of everything a grade is computed against: the answer and its aliases (the answer grades), the
    gold and evidence files and the evidence spans (evidence and the metrics beside accuracy). Values are taken as the
    question file reader gives them (grading/qfile.py: numbers as their text), so a raw line and its Question agree."""
    answer = "" if answer is None else str(answer)
    return stable_hash(GOLD_HASH_VERSION, answer, _texts(list(aliases)), _texts(list(gold_files)), _texts(list(evidence_files)),
                       _spans(list(evidence)))


def joined_golds(answer: Any, aliases: Any = ()) -> str:
    """The answer and aliases as `graded_gold` records them (empty ones left out, as Question.golds does)."""
    return " | ".join(g for g in ["" if answer is None else str(answer), *_texts(list(aliases))] if g)


@dataclass(frozen=True)
class Asked:
    """One question of a file as collect compares it with a run: its wording and its gold."""

    question: str
    gold_hash: str
    golds: str  # joined_golds: what runs graded before gold_hash recorded


def gold_changed(grades: Any, now_hash: str, now_golds: str) -> bool:
    """Whether a run's grades were computed against another gold than (now_hash, now_golds): compared by gold_hash
    where the grades record one, else by graded_gold; grades that record neither, or that an explicit --questions file
    gave their gold, are not judged."""
    if not isinstance(grades, dict) or grades.get("gold_source") == "questions":
        return False
    recorded = grades.get("gold_hash")
    if isinstance(recorded, str) and recorded:
        return recorded != now_hash
    recorded = grades.get("graded_gold")
    if isinstance(recorded, str):
        return recorded != now_golds
    return False


class QuestionTexts:
    """id -> question (wording and gold) of each question file, read once per collect."""

    def __init__(self) -> None:
        self._files: dict[str, Optional[dict[str, Asked]]] = {}

    def of(self, path: str) -> Optional[dict[str, Asked]]:
        if path not in self._files:
            self._files[path] = read_questions(Path(path))
        return self._files[path]

    def _asked(self, meta: dict) -> tuple[Optional[str], Optional[str], Optional[dict[str, Asked]]]:
        path, qid = meta.get("questions_path"), meta.get("question_id")
        if not isinstance(path, str) or not path or not isinstance(qid, str) or not qid:
            return None, None, None
        return path, qid, self.of(path)

    def why_stale(self, meta: dict) -> Optional[str]:
        """Why the run's row would be stale ("reworded in FILE", "removed from FILE"), or None to keep it."""
        path, qid, asked = self._asked(meta)
        if asked is None:
            return None
        if qid not in asked:
            return f"question {qid} removed from {path}"
        if asked[qid].question != meta.get("question"):
            return f"question {qid} reworded in {path}"
        return None

    def why_regrade(self, meta: dict) -> Optional[str]:
        """Why the run's grades are stale ("the gold of question Q changed in FILE since it was graded"), or None. Only
        for a run whose question still stands as it was asked (why_stale is None)."""
        path, qid, asked = self._asked(meta)
        if asked is None or qid not in asked or asked[qid].question != meta.get("question"):
            return None
        now = asked[qid]
        if gold_changed(meta.get("grades"), now.gold_hash, now.golds):
            return f"the gold of question {qid} changed in {path} since the run was graded"
        return None


def read_questions(path: Path) -> Optional[dict[str, Asked]]:
    """id -> Asked of a jsonl question file; None when it is not a readable regular file of at most FILE_CAP."""
    try:
        if not path.is_file() or path.stat().st_size > FILE_CAP:
            return None
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    out: dict[str, Asked] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            raw = bounds.loads(line)
        except ValueError:
            continue
        if isinstance(raw, dict) and isinstance(raw.get("question"), str) and isinstance(raw.get("id"), (str, int)) \
                and not isinstance(raw.get("id"), bool):
            answer = raw.get("answer")
            out.setdefault(str(raw["id"]), Asked(raw["question"], gold_hash(answer, raw.get("aliases") or [], raw.get("gold_files") or [],
                                                                              raw.get("evidence_files") or [], raw.get("evidence") or []),
                                                 joined_golds(answer, raw.get("aliases") or [])))
    return out


def read_texts(path: Path) -> Optional[dict[str, str]]:
    """id -> question of a jsonl question file (read_questions' wordings)."""
    asked = read_questions(path)
    return None if asked is None else {qid: a.question for qid, a in asked.items()}
