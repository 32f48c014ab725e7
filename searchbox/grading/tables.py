"""Regrade a committed result's tables: the answer grades of every row of its runs.parquet, from the answer it recorded.

    python -m searchbox.grade tables RESULT_DIR... [--questions Q.jsonl] [--dry-run]

A committed result (results/<name>/) keeps only its tables, not its run folders: the answer each run wrote is in
`runs.parquet` (`answer_text`, the whole ANSWER.md), but the tool results that evidence is measured on are not.
So this regrades what the answer alone decides (`correct`, `contains`, `exact_match`, `f1` and their reasons) with
the current graders and keeps every evidence column as it was recorded. The row's `grader_version` then names
the current answer graders and the evidence grader that measured the recorded evidence (its `evidence_version`),
so a table never claims a grader that did not run. Regrade the sweep folders themselves (`python -m
searchbox.grade SWEEP_DIR`) to redo evidence too.

Gold answers come from --questions when given, else from the question file each row recorded (`questions_path`,
or the packaged file of the same name when that path is from another checkout), matched by question id and
text; a row whose question is found nowhere keeps its grades and is named in one line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ArgParser, SearchboxError
from ..model.controls import row_cannot_act
from . import Question, grade_text, load_questions, not_a_result
from .answer import ANSWER_PART_VERSION
from .correct import CORRECT_VERSION
from .normalize import NORMALIZER_VERSION

BUILTIN = Path(__file__).resolve().parent.parent / "builtin"
ANSWER_GRADES = ("correct", "correct_reason", "exact_match", "f1", "contains", "answer_part", "graded_answer")
MOVED = ("correct", "contains", "exact_match", "f1")  # the grades whose changes are counted
# runs.parquet columns that hold a measure of the run (grading.grade's numbers, bare): missing in a row that could not act
MEASURE_PREFIXES = ("correct", "contains", "exact_match", "f1", "evidence_", "gold_", "judge", "citation_", "search_calls",
                    "confidence")


def _plain(value):
    """A table cell as Python's own type (numpy's bool is no numbers.Number, so not_a_result would keep it)."""
    return value.item() if isinstance(value, np.generic) else value


def _not_a_result(runs: pd.DataFrame, i, why: str) -> None:
    """Row i's measures missing: grading.not_a_result over the row's measure columns (MEASURE_PREFIXES)."""
    measures = {c: _plain(runs.at[i, c]) for c in runs.columns if c.startswith(MEASURE_PREFIXES) and not c.endswith("_version")}
    for col, value in {**measures, **not_a_result(measures, why)}.items():
        if col not in runs.columns:
            runs[col] = pd.Series(None, index=runs.index, dtype=object)
        elif value is None and runs[col].dtype.kind in "biu":  # an integer or boolean column holds no missing value as it is
            runs[col] = runs[col].astype(object)
        runs.at[i, col] = value


def answer_grader_version(evidence_version: str) -> str:
    """The grader string of a row whose answer grades are current and whose evidence was measured by evidence_version."""
    return f"grader-3/{CORRECT_VERSION}/{NORMALIZER_VERSION}/{ANSWER_PART_VERSION}/{evidence_version}"


@dataclass
class Regraded:
    """What a regrade of one table did: rows regraded, rows left as they were (and why), grades that moved."""

    path: Path
    rows: int = 0
    left: list[str] = field(default_factory=list)
    moved: dict[str, int] = field(default_factory=dict)  # grade -> rows whose value changed
    before: dict[str, float] = field(default_factory=dict)  # grade -> mean over the table, before and after
    after: dict[str, float] = field(default_factory=dict)
    by_condition: list[dict] = field(default_factory=list)  # per (model, condition) mean correct before/after, where it moved

    def lines(self) -> list[str]:
        out = [f"{self.path}: {self.rows} rows regraded, {len(self.left)} left as recorded"]
        for g in MOVED:
            if g in self.before:
                out.append(f"  {g:<12} {self.moved.get(g, 0):>5} rows moved; mean {self.before[g]:.3f} -> {self.after[g]:.3f}")
        for c in self.by_condition:
            out.append(f"  correct {c['condition']}: {c['before']:.3f} -> {c['after']:.3f} (n={c['n']})")
        out += [f"  left: {why}" for why in self.left[:10]]
        if len(self.left) > 10:
            out.append(f"  ... and {len(self.left) - 10} more left as recorded")
        return out


class Golds:
    """Question files by path, each read once; a path from another checkout falls back to the packaged file of that name."""

    def __init__(self, override: Optional[Path] = None):
        self.override = self._table(override) if override else None
        self.files: dict[str, Optional[dict[str, Question]]] = {}

    @staticmethod
    def _table(path: Path) -> dict[str, Question]:
        return {q.id: q for q in load_questions(path)}

    def _file(self, recorded: str) -> Optional[dict[str, Question]]:
        if recorded not in self.files:
            path = Path(recorded)
            if not path.is_file() and (BUILTIN / path.name).is_file():
                path = BUILTIN / path.name
            self.files[recorded] = self._table(path) if path.is_file() else None
        return self.files[recorded]

    def question(self, row: dict) -> tuple[Optional[Question], str]:
        qid, text = str(row.get("question_id") or ""), str(row.get("question") or "")
        tables = [("--questions", self.override)]
        if row.get("questions_path"):
            tables.append((str(row["questions_path"]), self._file(str(row["questions_path"]))))
        for _, table in tables:
            q = (table or {}).get(qid)
            if q is not None and q.question.strip() == text.strip():
                return q, ""
        return None, f"{row.get('run_id')}: question {qid} not found with the run's wording in {', '.join(s for s, t in tables if t is not None) or 'no question file'}"


def _mean(values: pd.Series) -> float:
    v = pd.to_numeric(values, errors="coerce")
    return float(v.mean()) if v.notna().any() else float("nan")


def regrade_table(result_dir: Path, golds: Golds, dry_run: bool = False) -> Regraded:
    path = result_dir / "runs.parquet"
    if not path.is_file() or path.is_symlink():
        raise SearchboxError(f"{result_dir}: no runs.parquet (a regular file) to regrade")
    table = pq.read_table(path)
    runs = table.to_pandas()
    if "answer_text" not in runs.columns:
        raise SearchboxError(f"{path}: no answer_text column: these tables are older than the answers they could be regraded from")
    done = Regraded(path=path)
    old = runs.copy()
    for i, row in runs.iterrows():
        q, why = golds.question(row.to_dict())
        if q is None:
            done.left.append(why)
            continue
        new = grade_text(str(row.get("answer_text") or ""), q)
        for k in ANSWER_GRADES:
            if k in runs.columns:
                runs.at[i, k] = new[k]
        runs.at[i, "graded_gold"] = " | ".join(q.golds)
        runs.at[i, "grader_version"] = answer_grader_version(str(row.get("evidence_version") or "evidence-?"))
        why = row_cannot_act(row.to_dict())
        if why:
            _not_a_result(runs, i, why)
        done.rows += 1
    for g in MOVED:
        if g not in runs.columns:
            continue
        a, b = pd.to_numeric(old[g], errors="coerce"), pd.to_numeric(runs[g], errors="coerce")
        done.moved[g] = int(((a != b) & ~(a.isna() & b.isna())).sum())
        done.before[g], done.after[g] = _mean(a), _mean(b)
    design = json.loads((table.schema.metadata or {}).get(b"searchbox_design", b"[]") or b"[]")
    design = [c for c in design if c in runs.columns] or [c for c in ("model", "tools", "budget") if c in runs.columns]
    if design and "correct" in runs.columns:
        design = [c for c in design if old[c].astype(object).map(str).nunique() > 1]  # the columns that tell conditions apart
        keys = old[design].astype(object).apply(lambda r: ", ".join(f"{c}={v}" for c, v in r.items()), axis=1)
        for key in sorted(set(keys)):
            m = keys == key
            b, a = _mean(old.loc[m, "correct"]), _mean(runs.loc[m, "correct"])
            if not (pd.isna(a) and pd.isna(b)) and abs(a - b) > 1e-12:
                done.by_condition.append({"condition": key, "before": b, "after": a, "n": int(m.sum())})
    if not dry_run:
        out = pa.Table.from_pandas(runs, preserve_index=False).replace_schema_metadata(table.schema.metadata)
        tmp = result_dir / f".runs.parquet.{os.getpid()}.tmp"
        pq.write_table(out, tmp)
        tmp.replace(path)
    return done


def main(argv: list[str]) -> int:
    parser = ArgParser(prog="python -m searchbox.grade tables",
                       description="Regrade the answer grades of committed result tables (runs.parquet).")
    parser.add_argument("dirs", nargs="+", type=Path, help="result directories holding runs.parquet")
    parser.add_argument("--questions", type=Path, default=None, help="question file whose gold answers win (matched by id and text)")
    parser.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    args = parser.parse_args(argv)
    if args.questions and not args.questions.is_file():
        raise SearchboxError(f"no such question file: {args.questions}")
    golds = Golds(args.questions)
    for d in args.dirs:
        if not d.is_dir():
            raise SearchboxError(f"no such result directory: {d}")
        print("\n".join(regrade_table(d, golds, args.dry_run).lines()))
    return 0
