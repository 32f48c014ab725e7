"""Grading a finished run from its artifacts: string graders on the answer part, evidence recall, a cached judge.

`grade(run_dir, question, judge)` reads only what the run left (work/ANSWER.md through safefs,
trace.jsonl, work/dataroom), so `python -m searchbox.grade` can redo it at any time. What each grade means:
- `correct` (the primary grade): the answer line asserts the gold (or an alias) and nothing contradicting it
  (grading/correct.py: negated, retracted, hedged, a bound, several candidates of the gold's type, a wrong unit all
  fail; the claim is read by grading/claim.py, its typed values found by candidates.py and compared by values.py, the
  question's shape (comparison options, whole names, explanations) read by shape.py);
- `contains` (the lenient grade): counts an answer whose answer part holds a gold's tokens, contiguous and in order,
  whatever else it says;
- `exact_match`: counts an answer whose answer line's tokens are exactly a gold's (or one of its written forms);
- `f1`: the best token F1 of the answer line against a gold (partial credit for overlapping tokens);
- `judge`: an LLM judge's CORRECT/INCORRECT on the answer part (optional; preferred when configured);
- `evidence_recall` and the other evidence_* fields: see searchbox/evidence.py.
Normalisation (tokens, dates, units, currencies, licenses, names) for all of them: grading/normalize.py. Question files are
read, bounded and checked, by grading/qfile.py; graders read the first answer.ANSWER_CAP characters. A grade
that cannot be computed (no gold) is None, never 0.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from ..corpus import safefs
from ..errors import ModelError
from ..record.stale import gold_hash
from .evidence import EVIDENCE_VERSION
from .evidence import of_run as evidence_of_run
from .answer import ANSWER_PART_VERSION, AnswerPart, answer_part, is_reference
from .correct import CORRECT_VERSION, Verdict, correct, verdict
from .judge import PROMPT_HASH, Judge
from .qfile import records
from .normalize import NORMALIZER_VERSION, contains, exact_match, normalize, token_f1, tokens

# Bump GRADER_VERSION with any change to what a grade means; it names its parts.
GRADER_VERSION = f"grader-3/{CORRECT_VERSION}/{NORMALIZER_VERSION}/{ANSWER_PART_VERSION}/{EVIDENCE_VERSION}"
ANSWER_FILE = "ANSWER.md"
# Measures written as text (a JSON count): missing too in the grades of a run that could not act (not_a_result).
TEXT_MEASURES = frozenset({"search_calls_by_tool"})
GRADED_CHARS = 1000  # of the answer part kept in the grades, to show what was read

__all__ = ["GRADER_VERSION", "PROMPT_HASH", "AnswerPart", "Judge", "Question", "answer_part", "contains", "correct", "exact_match",
           "explain", "grade", "grade_text", "load_questions", "normalize", "token_f1", "tokens", "verdict"]


@dataclass
class Question:
    """One line of a question file."""

    id: str
    question: str
    answer: str = ""
    aliases: list[str] = field(default_factory=list)
    gold_files: list[str] = field(default_factory=list)  # the files that hold the answer (BrowseComp-Plus: gold documents)
    type: str = ""
    # The answer-bearing passages, where the source names them: [{"file": dataroom path, "text": the passage}]
    # (the question builder's, HotpotQA's supporting facts, ...). Evidence reads these before the occurrence rule.
    evidence: list[dict] = field(default_factory=list)
    evidence_files: list[str] = field(default_factory=list)  # documents that support the answer, kept apart from gold_files
    fact: str = ""  # questions that ask for one fact share this group (reports cluster their CIs by it); "" = its own id

    @property
    def golds(self) -> list[str]:
        return [g for g in [self.answer, *self.aliases] if g]

    @property
    def gold_hash(self) -> str:
        """What a run's grades record of the gold they were computed against (record/stale.py: a question file's gold
        that no longer hashes so is regraded, never kept); the run key holds none of it."""
        return gold_hash(self.answer, self.aliases, self.gold_files, self.evidence_files, self.evidence)

    @classmethod
    def from_record(cls, meta: dict) -> Optional["Question"]:
        """The gold as of the run, from run_meta (None when the run recorded none)."""
        gold = meta.get("gold") or ({"answer": meta["gold_answer"]} if meta.get("gold_answer") else None)
        if not gold:
            return None
        return cls(id=str(meta.get("question_id") or ""), question=meta.get("question") or "", answer=str(gold.get("answer") or ""),
                   aliases=[str(a) for a in gold.get("aliases") or []], gold_files=list(gold.get("gold_files") or []),
                   type=gold.get("type") or meta.get("question_type") or "")


def load_questions(path: Path, limit: Optional[int] = None, ids: Optional[Iterable[str]] = None) -> list[Question]:
    """Read a jsonl question file; each line needs `id` and `question` (checked and bounded by grading/qfile.py)."""
    out = [Question(id=r["id"], question=r["question"], answer=r["answer"], aliases=r["aliases"], gold_files=r["gold_files"], type=r["type"],
                    evidence=r["evidence"], evidence_files=r["evidence_files"], fact=r["fact"]) for r in records(path)]
    if ids:
        wanted = set(map(str, ids))
        out = [q for q in out if q.id in wanted]
    return out[:limit] if limit else out


def _missing(value: float) -> Optional[float]:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def graded_part(answer_md: str, question: Question) -> AnswerPart:
    """The part of an ANSWER.md text every grader reads (references kept only when a gold answer is one)."""
    return answer_part(answer_md, keep_references=any(is_reference(g) for g in question.golds))


def explain(answer_md: str, question: Question) -> tuple[AnswerPart, Verdict]:
    """The graded part of an ANSWER.md text and `correct`'s verdict on it, with its reasons (the one way every caller
    gets them: grading, `grade check` and the web app's run page)."""
    part = graded_part(answer_md, question)
    return part, verdict(part.claim, question.golds, question.question, part.after)


def grade_text(answer_md: str, question: Question) -> dict:
    """The string grades of an ANSWER.md text: correct on the claim (the answer line with its lead-in or list) and why,
    exact match and F1 on the answer line, contains (lenient) on the answer part."""
    golds = question.golds
    part, why = explain(answer_md, question)
    return {
        "correct": _missing(why.value), "correct_reason": why.reason[:300],
        "exact_match": _missing(exact_match(part.line, golds)), "f1": _missing(token_f1(part.line, golds)),
        "contains": _missing(contains(part.text, golds)), "answer_part": part.part, "graded_answer": part.text[:GRADED_CHARS],
    }


def read_answer(run_dir: Path) -> str:
    """work/ANSWER.md as the model left it (never through a link); "" when absent."""
    work = Path(run_dir) / "work"
    return (safefs.read_text(work, ANSWER_FILE) or "") if work.is_dir() else ""


def beside_accuracy(run_dir: Path, answer: str, question: Question) -> dict:
    """The metrics beside accuracy (grading/citations.py, documents.py, searches.py, calibration.py say what each counts)."""
    from . import citations, documents, searches
    from .calibration import CONFIDENCE_VERSION, stated_confidence
    files = citations.room_files(run_dir)
    return {**citations.measure(answer, files, question.gold_files, question.evidence_files).grades(),
            **documents.of_run(run_dir, question.gold_files, question.evidence_files, question.golds), **searches.of_run(run_dir),
            "confidence": stated_confidence(answer), "confidence_version": CONFIDENCE_VERSION}


def not_a_result(grades: dict, why: str) -> dict:
    """The grades of a run that could not act (model.controls.cannot_act): every measure None, never the 0 it scored by
    construction, so that no table, figure or mean (runs.parquet, the web's, the report's) counts it; `cannot_act` says
    why. Text (what was graded, by which grader and judge) is kept."""
    out = {k: (None if isinstance(v, numbers.Number) or k in TEXT_MEASURES else v) for k, v in grades.items()}
    out["correct_reason"] = f"n/a: {why}"[:300]
    out["cannot_act"] = why
    return out


def inert_run(run_dir: Path) -> str:
    """Why the run in run_dir could not act, from its record ('' when it could, or when it has no readable record)."""
    from ..model.controls import cannot_act
    from ..record.record import read_meta

    try:
        meta = read_meta(run_dir)
    except (OSError, ValueError):
        return ""
    return cannot_act((meta.get("served") or {}).get("policy"), [str(t) for t in meta.get("tools") or []],
                      bool(meta.get("answer_present")))


def grade(run_dir: Path, question: Question, judge: Optional[Judge] = None, judges: Optional[list] = None) -> dict:
    """All grades of one finished run, JSON-ready; a grade that cannot be computed is None, never 0, and a run that
    could not act has no measure at all (not_a_result)."""
    grades = _grade(run_dir, question, judge, judges)
    why = inert_run(run_dir)
    return not_a_result(grades, why) if why else grades


def _grade(run_dir: Path, question: Question, judge: Optional[Judge], judges: Optional[list]) -> dict:
    answer = read_answer(run_dir)
    grades = {**grade_text(answer, question), **evidence_of_run(run_dir, question.gold_files, question.golds, question.evidence).grades(),
              "judge": None, "grader_version": GRADER_VERSION, "graded_gold": " | ".join(question.golds),
              "gold_hash": question.gold_hash}
    grades.update(beside_accuracy(run_dir, answer, question))
    if judges:  # grading.judges: several judges, each with its own columns (grading/judges.py)
        from .judges import verdicts

        grades.update(verdicts(judges, question.question, question.golds, graded_part(answer, question).text))
    if judge is not None:
        try:
            grades.update(judge.identity())
            grades["judge"] = _missing(judge(question.question, question.golds, graded_part(answer, question).text))
        except ModelError as exc:  # unreachable judge: the grade is missing, and says why
            grades["judge_error"] = str(exc)[:300]
    return grades
