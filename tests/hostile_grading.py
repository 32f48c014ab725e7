"""Hostile battery, round three (grading and audit): attempts registered into tests.hostile_attempts.ATTEMPTS.

Hostile files and arguments given to `python -m searchbox.grade` (check and regrade) and `python -m
searchbox.questions audit`, each in a fresh process under a wall-clock guard: every one must end within the guard,
with exit 0 and a grade, or exit 2 and one line naming the problem, never a traceback, a hang or a silent misread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from tests.hostile_attempts import ROOT, attempt, held

GUARD_S = 60.0
GOOD = {"id": "a", "question": "How tall is Gannet Rock?", "answer": "38.4 metres", "gold_files": ["g.md"]}


def _cli(args: list[str], stdin: bytes | None = None) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", *args], input=stdin, capture_output=True, timeout=GUARD_S, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        held(False, f"{' '.join(args[:2])} still running after {GUARD_S:.0f} s")
    return proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"), time.monotonic() - t


def _one_line(rc: int, err: str, what: str) -> None:
    held("Traceback" not in err, f"{what}: traceback: {err.strip().splitlines()[-1:]}")
    held(rc == 2 and err.count("\n") == 1, f"{what}: exit {rc}, stderr {err[:200]!r}")


def _check(answer: str, **kw) -> tuple[dict, float]:
    rc, out, err, took = _cli(["searchbox.grade", "check", "--gold", kw.get("gold", "38.4 metres"), "--question", "How tall is Gannet Rock?",
                               "--answer", "-", "--json"], answer.encode())
    held(rc == 0 and "Traceback" not in err, f"check exit {rc}: {err[-200:]!r}")
    return json.loads(out), took


@attempt("grading", "grade check of answers shaped for backtracking: '**' x 1024 .. 8192, digits, dots, parentheses at 16 KiB")
def grading_backtracking(tmp: Path) -> str:
    worst = 0.0
    for answer in ("**" * 1024, "**" * 8192, "1." * 8192, "(" * 16384, "(1.2" * 4096, "1" * 16384, "**Sources** " * 1400):
        grades, took = _check(answer)
        held(grades["correct"] == 0.0, f"{answer[:12]!r}...: graded correct")
        worst = max(worst, took)
    return f"7 shapes graded 0 each, slowest {worst:.1f} s in a fresh process (graders read the first 4,096 characters)"


@attempt("grading", "grade check of a 10 MB answer on stdin and of a 5,000-digit number")
def grading_huge_answer(tmp: Path) -> str:
    grades, took = _check("It is " + "9" * 5000 + " metres.")
    held(grades["correct"] == 0.0, "a 5,000-digit number graded correct")
    rc, _, err, took2 = _cli(["searchbox.grade", "check", "--gold", "x", "--answer", "-"], b"Gannet Rock. " * 800_000)
    _one_line(rc, err, "10 MB on stdin")
    return f"5,000 digits graded 0 in {took:.1f} s; 10 MB on stdin refused in one line in {took2:.1f} s ({err.strip()[:80]})"


@attempt("grading", "grade check --answer-file /dev/zero, a FIFO, a folder; a 100 KB alias")
def grading_unbounded_files(tmp: Path) -> str:
    fifo = tmp / "answer.md"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(tmp)):
        rc, _, err, _ = _cli(["searchbox.grade", "check", "--gold", "x", "--answer-file", path])
        _one_line(rc, err, path)
        held("not a regular file" in err, f"{path}: {err!r}")
    rc, _, err, _ = _cli(["searchbox.grade", "check", "--gold", "x", "--alias", "y" * 100_000, "--answer", "x"])
    _one_line(rc, err, "a 100 KB alias")
    return "/dev/zero, a FIFO and a folder refused as not regular files; a 100 KB alias refused in one line"


def _questions(tmp: Path, *lines) -> Path:
    p = tmp / "q.jsonl"
    p.write_bytes(b"".join(x if isinstance(x, bytes) else (x if isinstance(x, str) else json.dumps(x)).encode() + b"\n" for x in lines))
    return p


BAD_LINES = {
    "aliases as a string": {**GOOD, "aliases": "12"},
    "a question given as a number": {**GOOD, "question": 42},
    "100,000 levels of nesting": '{"id": "a", "question": "q?", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "a 5,000-digit number": '{"id": "a", "question": "q?", "answer": ' + "9" * 5000 + "}",
    "invalid UTF-8": b'{"id": "a", "question": "\xff?"}',
    "a 10 MB gold": {**GOOD, "answer": "x" * 10_000_000},
    "evidence as a string": {**GOOD, "evidence": "g.md"},  # evidence spans (issue 29): {file, text} objects, both non-empty
    "an evidence span without its text": {**GOOD, "evidence": [{"file": "g.md"}]},
    "an evidence span of an empty file name": {**GOOD, "evidence": [{"file": " ", "text": "38.4 metres tall"}]},
    "an evidence passage of 1 MB": {**GOOD, "evidence": [{"file": "g.md", "text": "x" * 1_000_000}]},
}


@attempt("grading", "regrade and audit with hostile question files: string aliases, number question, deep nesting, huge numbers, bad UTF-8, 10 MB gold")
def grading_hostile_question_files(tmp: Path) -> str:
    corpus = tmp / "corpus"
    corpus.mkdir()
    (corpus / "g.md").write_text("Gannet Rock is 38.4 metres tall.\n")
    sweep = tmp / "sweep"
    (sweep / "runs").mkdir(parents=True)
    for name, line in BAD_LINES.items():
        q = _questions(tmp, line)
        for args in (["searchbox.questions", "audit", str(q), str(corpus)], ["searchbox.grade", str(sweep), "--questions", str(q)]):
            rc, _, err, _ = _cli(args)
            _one_line(rc, err, f"{name} ({args[0]})")
            held("q.jsonl" in err, f"{name}: the error does not name the file: {err!r}")
    return f"{len(BAD_LINES)} hostile question files x (audit, regrade): one line each, naming the file"


@attempt("grading", "a question file with a duplicate id given to regrade (the second silently replaced the first)")
def grading_duplicate_id(tmp: Path) -> str:
    q = _questions(tmp, GOOD, {**GOOD, "answer": "41 metres"})
    (tmp / "sweep" / "runs").mkdir(parents=True)
    rc, _, err, _ = _cli(["searchbox.grade", str(tmp / "sweep"), "--questions", str(q)])
    _one_line(rc, err, "duplicate id")
    held("duplicate question id 'a'" in err, f"not named: {err!r}")
    return f"refused: {err.strip()[:100]}"


@attempt("grading", "a zip bomb (64 MB of zeros in a 64 KB zip) given to the audit as its corpus")
def grading_audit_zip_bomb(tmp: Path) -> str:
    bomb = tmp / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("g.md", b"\0" * (64 * 1024**2))
    rc, _, err, took = _cli(["searchbox.questions", "audit", str(_questions(tmp, GOOD)), str(bomb)])
    _one_line(rc, err, "zip bomb")
    held("zip bomb" in err, f"not refused as a bomb: {err!r}")
    return f"refused by the dataroom's zip checks in {took:.1f} s: {err.strip()[:90]}"
