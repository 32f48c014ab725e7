"""Regrade finished runs from their artifacts and rewrite the sweep tables, without rerunning anything; or grade one answer.

    python -m searchbox.grade SWEEP_DIR... [--questions Q.jsonl] [--dry-run]
                              [grading.judge=true grading.judge_endpoint=URL grading.judge_model=ID]
    python -m searchbox.grade tables RESULT_DIR... [--questions Q.jsonl] [--dry-run]
    python -m searchbox.grade check --gold G [--alias A ...] (--answer TEXT | --answer - | --answer-file PATH)
                                    [--question Q] [--json]

`check` prints every grade of one answer (the text of an ANSWER.md) against a gold and its aliases, with
what `correct` read and why it says what it says; `--json` prints one JSON object instead. It exits 0
whatever the grade and 2, with one line, on bad input (no or empty gold, no or empty answer, an
unreadable answer file).

Gold answers come from --questions when given, else from the question file each run recorded
(`questions_path`, matched by question id and text), else from the gold recorded in run_meta
(the gold as of the run). Grades are replaced in each run_meta.json; each sweep directory's
runs/turns/tool_calls parquet are collected again. The judge keys its cached verdicts by the
model id its endpoint serves (/v1/models).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..record.collect import collect, regrade_hint, run_dirs, write
from ..errors import ArgParser, SearchboxError, cli
from .qfile import MAX_GOLD_CHARS, MAX_QUESTION_CHARS, read_bounded
from .measures import MEASURES
from . import GRADER_VERSION, Judge, Question, explain, grade, grade_text, load_questions
from ..record.record import read_meta, update_grades

COMPARED = ("correct", "exact_match", "f1", "contains", "judge", "evidence_recall")  # what a change report shows
MEANING = {**{g: MEASURES[g] for g in ("correct", "contains", "exact_match", "f1")}, "correct": f"{MEASURES['correct']} (the primary grade)"}
OVERRIDES = {"judge", "judge_endpoint", "judge_model"}
ANSWER_FILE_CAP = 1024**2  # bytes of an answer `check` reads (grading reads the first answer.ANSWER_CAP characters of it)


@dataclass
class GoldSource:
    """Where each run's gold comes from: the --questions file, the run's own question file, or its run_meta."""

    override: Optional[dict[str, Question]] = None
    files: Optional[dict[str, Optional[dict[str, Question]]]] = None
    warnings: int = 0

    def question_for(self, meta: dict) -> tuple[Optional[Question], str]:
        qid, text = str(meta.get("question_id") or ""), meta.get("question") or ""
        self.files = self.files if self.files is not None else {}
        candidates = [("questions", self.override)]
        path = meta.get("questions_path")
        if path:
            if path not in self.files:
                self.files[path] = {q.id: q for q in load_questions(Path(path))} if Path(path).is_file() else None
            candidates.append(("questions_path", self.files[path]))
        for source, table in candidates:
            q = (table or {}).get(qid)
            if q is None:
                continue
            if q.question.strip() != text.strip():  # the file now asks something else: this run did not answer it
                self._warn(f"{meta.get('run_id')}: question {qid} in the {source} file differs from the run's question; using the run's gold")
                continue
            return q, source
        q = Question.from_record(meta)
        return (q, "run_meta") if q else (None, "none")

    def _warn(self, text: str) -> None:
        self.warnings += 1
        if self.warnings <= 20:
            print(f"searchbox: warning: {text}", file=sys.stderr)


def split_overrides(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Hydra-style `grading.KEY=VALUE` items out of argv (the rest goes to argparse)."""
    rest, found = [], {}
    for item in argv:
        key, eq, value = item.partition("=")
        if eq and key.startswith("grading."):
            name = key[len("grading."):]
            if name not in OVERRIDES:
                raise SearchboxError(f"unknown override {key!r}; expected grading.judge, grading.judge_endpoint or grading.judge_model")
            found[name] = value
        else:
            rest.append(item)
    return rest, found


def _truthy(value: str) -> bool:
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off", ""):
        return False
    raise SearchboxError(f"grading.judge={value!r}: expected true or false")


def regrade(dirs: list[Path], gold: GoldSource, judge: Optional[Judge] = None, dry_run: bool = False) -> list[tuple[str, dict]]:
    """Regrade every finished run under dirs; returns (run_id, {grade: (old, new)}) for each run whose grades changed."""
    changes = []
    for rd in run_dirs(dirs):
        meta = read_meta(rd)
        question, source = gold.question_for(meta)
        if question is None:
            gold._warn(f"{rd}: no gold answer recorded or found; left as it was")
            continue
        grades = {**grade(rd, question, judge), "gold_source": source}
        old = meta.get("grades") or {}
        diff = {k: (old.get(k), grades.get(k)) for k in COMPARED if old.get(k) != grades.get(k)}
        if diff:
            changes.append((meta.get("run_id") or rd.name, diff))
        if not dry_run:
            update_grades(rd, grades)
    return changes


def stale_regrader(judge: Optional[Judge] = None, judges: Optional[list] = None,
                   said: Optional[list[str]] = None) -> Callable[[Path, dict], dict]:
    """collect's regrade hook (record.collect.Regrade) for a run whose question file's gold changed since it was graded:
    regrade it against that file (the question matched by id and wording, as this CLI does), with the judges the caller
    has, and write the grades through update_grades; `said` gets one line for each run regraded. A question no longer
    found as the run asked it, or a file that cannot be read, is a SearchboxError (collect leaves the run out with it)."""
    gold = GoldSource()

    def regrade_run(rd: Path, meta: dict) -> dict:
        graded = meta.get("grades") or {}
        if (graded.get("judge_model") and judge is None) or (not judges and any(
                k.startswith("judge_") and k.endswith("_model") and k != "judge_model" for k in graded)):
            raise SearchboxError("it was graded by a judge this regrade does not have: regrade it with its judge "
                                 f"({regrade_hint(rd)} grading.judge=true grading.judge_endpoint=URL)")  # not without the verdict
        question, source = gold.question_for(meta)
        if source != "questions_path" or question is None:
            raise SearchboxError(f"question {meta.get('question_id')} is not in {meta.get('questions_path')} as the run asked it")
        record = update_grades(rd, {**grade(rd, question, judge, judges), "gold_source": source})
        if said is not None:
            said.append(f"{rd}: regraded against the gold of question {question.id} now in {meta.get('questions_path')}")
        return record.to_dict()

    return regrade_run


def _answer_text(args: argparse.Namespace) -> str:
    if args.answer is not None and args.answer_file is not None:
        raise SearchboxError("give the answer once: --answer TEXT, --answer - (stdin) or --answer-file PATH")
    if args.answer_file is not None:
        try:  # regular files only, capped: never /dev/zero or a FIFO
            text = read_bounded(Path(args.answer_file), ANSWER_FILE_CAP, "answer file")
        except SearchboxError as exc:
            raise SearchboxError(f"cannot read the answer file: {exc}") from None
    elif args.answer == "-":
        try:
            data = sys.stdin.buffer.read(ANSWER_FILE_CAP + 1)
            if len(data) > ANSWER_FILE_CAP:
                raise SearchboxError(f"the answer on stdin is over the {ANSWER_FILE_CAP}-byte cap")
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SearchboxError(f"cannot read the answer from stdin: {exc}".splitlines()[0]) from exc
    elif args.answer is not None:
        text = args.answer
    else:
        raise SearchboxError("check needs the answer: --answer TEXT, --answer - (stdin) or --answer-file PATH")
    if not text.strip():
        raise SearchboxError("the answer is empty: nothing to grade")
    return text


def check(argv: list[str]) -> int:
    """`python -m searchbox.grade check`: every grade of one answer against a gold (see the module docstring)."""
    parser = ArgParser(prog="python -m searchbox.grade check", description="Grade one answer against a gold answer and its aliases.")
    parser.add_argument("--gold", help="the gold answer")
    parser.add_argument("--alias", action="append", default=[], help="another accepted form of the gold (repeatable)")
    parser.add_argument("--answer", help="the answer text (an ANSWER.md's content); - reads it from stdin")
    parser.add_argument("--answer-file", help="read the answer from this file")
    parser.add_argument("--question", default="", help="the question (what it already says is no competing claim)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--judge", action="append", default=[], metavar="URL", help="also ask the judge at this endpoint (repeatable: j1, j2, ...)")
    parser.add_argument("--judge-prompt", action="append", default=[], metavar="PROMPT", help="the prompt of the judge in the same place (searchbox | browsecomp)")
    args = parser.parse_args(argv)
    if args.gold is None or not args.gold.strip():
        raise SearchboxError("check needs a non-empty --gold (the gold answer)")
    if any(not a.strip() for a in args.alias):
        raise SearchboxError("an --alias is empty")
    for name, value, cap in [("--gold", args.gold, MAX_GOLD_CHARS), ("--question", args.question, MAX_QUESTION_CHARS),
                             *(("--alias", a, MAX_GOLD_CHARS) for a in args.alias)]:
        if len(value) > cap:
            raise SearchboxError(f"{name} of {len(value)} characters: at most {cap} (a question file's limit too)")
    answer = _answer_text(args)
    question = Question("check", args.question, args.gold, list(args.alias))
    grades = grade_text(answer, question)
    part, why = explain(answer, question)
    out = {"correct": grades["correct"], "contains": grades["contains"], "exact_match": grades["exact_match"], "f1": grades["f1"],
           "correct_reason": why.reason, "asserted": why.asserted, "offered": why.offered, "denied": why.denied,
           "contradicting": why.contradicting, "context": why.context, "answer_line": part.line, "claim": why.claim or part.claim,
           "answer_part": part.part,
           "golds": question.golds, "grader_version": GRADER_VERSION}
    if args.judge:  # each judge's verdict on this one pair (grading/judges.py)
        from .judges import connect, verdicts

        prompts = list(args.judge_prompt) + ["searchbox"] * len(args.judge)
        judges = connect([{"name": f"j{i}", "endpoint": url, "prompt": prompts[i - 1]} for i, url in enumerate(args.judge, 1)])
        out.update(verdicts(judges, question.question, question.golds, part.text))
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    for name in ("correct", "contains", "exact_match", "f1"):
        value = out[name]
        print(f"{name:<12} {'' if value is None else f'{value:.3f}':<6} {MEANING[name]}")
    print(f"why correct: {why.reason}")
    for label in ("asserted", "offered", "denied", "contradicting", "context"):
        if out[label]:
            print(f"  {label}: " + "; ".join(out[label]))
    print(f"claim read: {out['claim']!r}")
    for i in range(1, len(args.judge) + 1):
        v = out.get(f"judge_j{i}")
        print(f"judge j{i:<6} {'' if v is None else f'{v:.3f}':<6} {out.get(f'judge_j{i}_model', '')} prompt {out.get(f'judge_j{i}_prompt', '')} "
              f"at {out.get(f'judge_j{i}_endpoint', '')}" + (f" ({out[f'judge_j{i}_error']})" if out.get(f"judge_j{i}_error") else ""))
    return 0


@cli
def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        return check(argv[1:])
    if argv[:1] == ["tables"]:  # a committed result's tables, from the answers they recorded (grading/tables.py)
        from .tables import main as tables

        return tables(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m searchbox.grade", description=__doc__.splitlines()[0],
                                     epilog="Overrides: grading.judge=true grading.judge_endpoint=URL grading.judge_model=ID "
                                            "(or --judge --judge-endpoint URL --judge-model ID). "
                                            "Grade one answer: python -m searchbox.grade check --help")
    parser.add_argument("dirs", nargs="+", type=Path, help="sweep directories (or single run directories)")
    parser.add_argument("--questions", type=Path, default=None, help="question file whose gold answers win (matched by id and question text)")
    parser.add_argument("--judge", action="store_true", default=None, help="also grade with the LLM judge")
    parser.add_argument("--judge-endpoint", default=None, help="OpenAI-compatible judge URL (default: $LLAMA_URL)")
    parser.add_argument("--judge-model", default=None, help="judge model id (needed when the endpoint serves several)")
    parser.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    rest, overrides = split_overrides(argv)
    args = parser.parse_args(rest)
    use_judge = args.judge if args.judge is not None else _truthy(overrides.get("judge", "false"))
    endpoint = args.judge_endpoint or overrides.get("judge_endpoint") or os.environ.get("LLAMA_URL")
    missing = [d for d in args.dirs if not d.is_dir()]
    if missing:
        raise SearchboxError(f"no such sweep directory: {missing[0]}")
    if args.questions and not args.questions.is_file():
        raise SearchboxError(f"no such question file: {args.questions}")
    gold = GoldSource(override={q.id: q for q in load_questions(args.questions)} if args.questions else None)
    judge = None
    if use_judge:
        if not endpoint:
            raise SearchboxError("grading.judge=true needs grading.judge_endpoint=URL (or $LLAMA_URL)")
        judge = Judge.connect(endpoint, args.judge_model or overrides.get("judge_model"))
    changes = regrade(args.dirs, gold, judge, args.dry_run)
    total = len(run_dirs(args.dirs))
    if not total:
        print(f"searchbox: warning: no run directories under {', '.join(map(str, args.dirs))}: nothing to regrade "
              "(a committed result keeps only its tables; regrade the sweep it was collected from)", file=sys.stderr)
    if not args.dry_run:
        for d in args.dirs:
            if (d / "runs").is_dir():  # a sweep: its tables follow the new grades
                write(d, *collect([d]))
    for run_id, diff in changes[:50]:
        print(f"{run_id}: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in diff.items()))
    if len(changes) > 50:
        print(f"... and {len(changes) - 50} more")
    verb = "would change" if args.dry_run else "changed"
    print(f"regraded {total} runs: {len(changes)} {verb}" + (f"; judge {judge.model_id} at {judge.endpoint}, {judge.calls} new verdicts" if judge else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
