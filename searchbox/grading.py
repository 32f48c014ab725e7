"""Grading: normalised exact match, token F1, contains-gold, a cached LLM judge, and retrieval hit."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import string
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd

from .config import stable_hash
from .errors import ConfigError, ModelError
from .paths import cache_dir

ARTICLES = re.compile(r"\b(a|an|the)\b")
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
PUNCT = str.maketrans({c: " " for c in string.punctuation if c not in ".-"})

JUDGE_PROMPT_VERSION = "judge-v1"
JUDGE_PROMPT = """You grade answers to questions about a document collection.
Question: {question}
Gold answer: {gold}
Other accepted forms: {aliases}
Candidate answer:
<<<
{answer}
>>>
Does the candidate answer state the gold answer (same fact; wording, units and formatting may differ)?
Reply with exactly one word: CORRECT or INCORRECT."""


@dataclass
class Question:
    """One line of a question file."""

    id: str
    question: str
    answer: str = ""
    aliases: list[str] = field(default_factory=list)
    gold_files: list[str] = field(default_factory=list)
    type: str = ""

    @property
    def golds(self) -> list[str]:
        return [g for g in [self.answer, *self.aliases] if g]


def load_questions(path: Path, limit: Optional[int] = None, ids: Optional[Iterable[str]] = None) -> list[Question]:
    """Read a jsonl question file; each line needs `id` and `question`."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            q = Question(id=str(raw["id"]), question=raw["question"], answer=str(raw.get("answer", "")),
                         aliases=[str(a) for a in raw.get("aliases") or []], gold_files=list(raw.get("gold_files") or []), type=raw.get("type", ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: bad question line ({exc})") from exc
        out.append(q)
    if ids:
        wanted = set(ids)
        out = [q for q in out if q.id in wanted]
    return out[:limit] if limit else out


def normalize(text: str) -> str:
    """Lowercase, drop articles, punctuation (but decimal points) and thousands separators, squeeze spaces."""
    text = THOUSANDS.sub("", (text or "").lower())
    text = text.translate(PUNCT)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # a period is punctuation unless inside a number
    text = ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: list[str]) -> float:
    p = normalize(prediction)
    return float(any(p == normalize(g) for g in golds)) if golds else math.nan


def token_f1(prediction: str, golds: list[str]) -> float:
    if not golds:
        return math.nan
    pred = normalize(prediction).split()
    best = 0.0
    for gold in golds:
        ref = normalize(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if not pred or not ref or common == 0:
            continue
        precision, recall = common / len(pred), common / len(ref)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def contains(prediction: str, golds: list[str]) -> float:
    if not golds:
        return math.nan
    p = f" {normalize(prediction)} "
    return float(any(f" {normalize(g)} " in p for g in golds if normalize(g)))


def retrieval_hit(touched: Iterable[str], gold_files: list[str]) -> float:
    """1 when the run read or retrieved any gold file (paths compared without the dataroom/ prefix)."""
    if not gold_files:
        return math.nan
    seen = {p[len("dataroom/"):] if p.startswith("dataroom/") else p for p in touched}
    return float(any(any(s == g or s.endswith("/" + g) for s in seen) for g in gold_files))


class Judge:
    """An LLM judge through the same OpenAI-compatible client; verdicts cached by (model, prompt version, inputs)."""

    def __init__(self, client, model_label: str):
        self.client = client
        self.model_label = model_label
        self.db = sqlite3.connect(cache_dir("judge") / "verdicts.sqlite", timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS verdict (key TEXT PRIMARY KEY, value REAL, raw TEXT)")
        self.calls = 0

    def __call__(self, question: Question, answer: str) -> float:
        if not answer.strip() or not question.answer:
            return 0.0 if question.answer else math.nan
        key = stable_hash(self.model_label, JUDGE_PROMPT_VERSION, question.question, question.golds, answer, length=32)
        row = self.db.execute("SELECT value FROM verdict WHERE key = ?", (key,)).fetchone()
        if row:
            return row[0]
        prompt = JUDGE_PROMPT.format(question=question.question, gold=question.answer, aliases=", ".join(question.aliases) or "none", answer=answer[:4000])
        try:
            resp = self.client.chat({"messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "temperature": 0})
        except ModelError:
            return math.nan  # a grade that cannot be computed is missing, never 0
        self.calls += 1
        raw = (resp.message.get("content") or "").strip().upper()
        value = 0.0 if "INCORRECT" in raw else 1.0 if "CORRECT" in raw else math.nan
        if not math.isnan(value):
            self.db.execute("INSERT OR REPLACE INTO verdict VALUES (?, ?, ?)", (key, value, raw))
        return value


def touched_paths(run_dir: Path) -> list[str]:
    path = Path(run_dir) / "tool_calls.parquet"
    if not path.exists():
        return []
    calls = pd.read_parquet(path, columns=["paths"])
    return [p for paths in calls["paths"] for p in (paths if paths is not None else [])]


def grade(run_dir: Path, question: Question, judge: Optional[Judge] = None) -> dict:
    """All grades of one finished run; missing grades are NaN, never 0."""
    answer_path = Path(run_dir) / "work" / "ANSWER.md"
    answer = answer_path.read_text(encoding="utf-8", errors="replace") if answer_path.is_file() else ""
    golds = question.golds
    grades = {
        "exact_match": exact_match(answer, golds), "f1": token_f1(answer, golds), "contains": contains(answer, golds),
        "retrieval_hit": retrieval_hit(touched_paths(run_dir), question.gold_files),
        "judge": judge(question, answer) if judge else math.nan,
    }
    if judge:
        grades["judge_model"] = judge.model_label
        grades["judge_prompt"] = JUDGE_PROMPT_VERSION
    return grades
