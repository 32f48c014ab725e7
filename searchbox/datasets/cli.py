"""The command line: `import FORMAT SOURCE --out DIR`, `export beir DIR --out OUT`, `check DIR`. Errors are one line."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Optional

from ..errors import SearchboxError
from . import beir, browsecomp, hotpotqa, longmemeval, musique
from .check import missing
from .export import beir as export_beir
from .writer import Output

FORMATS = ("beir", "browsecomp-plus", "hotpotqa", "musique", "longmemeval")


def do_import(fmt: str, source: Path, out: Path, split: str = "test", variant: str = "distractor") -> dict:
    writer = Output(out, fmt, source)
    try:
        if fmt == "beir":
            counts = beir.run(source, writer, split)
        elif fmt == "browsecomp-plus":
            counts = browsecomp.run(source, writer)
        elif fmt == "hotpotqa":
            counts = hotpotqa.run(source, writer, variant)
        elif fmt == "musique":
            counts = musique.run(source, writer)
        else:
            counts = longmemeval.run(source, writer)
    except BaseException:
        writer.abort()
        shutil.rmtree(out, ignore_errors=True)  # a half import is no data set: nothing is left to be mistaken for one
        raise
    return writer.finish(counts)


def do_check(folder: Path, questions: Optional[Path] = None, dataroom: Optional[Path] = None) -> list[tuple[str, str]]:
    from ..grading import load_questions

    return missing(load_questions(questions or folder / "questions.jsonl"), dataroom or folder / "dataroom")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m searchbox.datasets", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="import a data set into a dataroom folder + questions.jsonl + DATASET.md")
    imp.add_argument("format", choices=FORMATS)
    imp.add_argument("source", type=Path, help="the data set's folder (beir, browsecomp-plus) or file (hotpotqa, musique, longmemeval)")
    imp.add_argument("--out", type=Path, required=True)
    imp.add_argument("--split", default="test", help="beir: which qrels/<split>.tsv")
    imp.add_argument("--variant", choices=hotpotqa.VARIANTS, default="distractor", help="hotpotqa: distractor or fullwiki")
    exp = sub.add_parser("export", help="write a searchbox corpus and question set out in another format")
    exp.add_argument("format", choices=("beir",))
    exp.add_argument("folder", type=Path, help="a folder with dataroom/ and questions.jsonl")
    exp.add_argument("--out", type=Path, required=True)
    chk = sub.add_parser("check", help="verify that every file a question names is in the dataroom")
    chk.add_argument("folder", type=Path, nargs="?", default=Path("."))
    chk.add_argument("--questions", type=Path)
    chk.add_argument("--dataroom", type=Path)
    args = p.parse_args(argv)
    try:
        if args.cmd == "import":
            print(json.dumps(do_import(args.format, args.source, args.out, args.split, args.variant)))
        elif args.cmd == "export":
            print(json.dumps(export_beir(args.folder, args.out)))
        else:
            gone = do_check(args.folder, args.questions, args.dataroom)
            for qid, name in gone:
                print(f"question {qid!r}: {name!r} is not in the dataroom", file=sys.stderr)
            print(f"{'ok' if not gone else 'missing'}: {len(gone)} named file(s) missing")
            return 1 if gone else 0
    except SearchboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
