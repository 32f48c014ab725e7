"""What every importer writes: a dataroom folder (one file per document), questions.jsonl and a DATASET.md card.

File names are stable and safe on any file system: a lower-case ASCII slug of the title (or id), at most
SLUG_CHARS long, then the first 10 hex digits of the SHA-1 of the document id, then `.md`. So the same document
gets the same name on every import and two documents never share one. Each file starts with front matter
holding the document's id and title (JSON-quoted, which YAML reads as double-quoted scalars).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from .source import DatasetError

SLUG_CHARS = 60
DATAROOM = "dataroom"
QUESTIONS = "questions.jsonl"
CARD = "DATASET.md"
EXAMPLES = 5  # record ids shown per reason for dropping


def slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:SLUG_CHARS].strip("-") or "doc"


def file_name(doc_id: str, title: str = "") -> str:
    """The dataroom file name of a document (see the module docstring)."""
    digest = hashlib.sha1(doc_id.encode("utf-8")).hexdigest()[:10]
    return f"{slug(title or doc_id)}-{digest}.md"


@dataclass
class Dropped:
    """What an import left out, and why: reason -> count, with the first few record ids as examples."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, record_id: str = "") -> None:
        self.counts[reason] += 1
        shown = self.examples.setdefault(reason, [])
        if record_id and len(shown) < EXAMPLES:
            shown.append(record_id)


class Output:
    """The folder an import writes. Documents go in as they are read (streaming); questions after."""

    def __init__(self, out: Path, fmt: str, source: Path):
        self.out, self.fmt, self.source = Path(out), fmt, Path(source)
        self.room = self.out / DATAROOM
        if self.out.exists() and any(self.out.iterdir()):
            raise DatasetError(f"{self.out}: the output folder is not empty (import into a new folder)")
        self.room.mkdir(parents=True, exist_ok=True)
        self.names: dict[str, str] = {}  # document id -> file name
        self.dropped = Dropped()
        self.notes: list[str] = []
        self.questions = 0
        self._qfile = open(self.out / (QUESTIONS + ".partial"), "w", encoding="utf-8")

    def document(self, doc_id: str, text: str, title: str = "", **meta: str) -> str:
        """Write one document (once per id) and return its file name."""
        if doc_id in self.names:
            return self.names[doc_id]
        name = file_name(doc_id, title)
        head = {"id": doc_id, "title": title, **{k: v for k, v in meta.items() if v}}
        lines = ["---", *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()), "---", ""]
        if title:
            lines += [f"# {title}", ""]
        tmp = self.room / (name + ".partial")
        tmp.write_text("\n".join(lines) + text.rstrip("\n") + "\n", encoding="utf-8")
        os.replace(tmp, self.room / name)
        self.names[doc_id] = name
        return name

    def question(self, qid: str, question: str, answer: str = "", *, aliases: Iterable[str] = (), gold_files: Iterable[str] = (),
                 evidence_files: Iterable[str] = (), evidence: Iterable[dict] = (), type: str = "", fact: str = "") -> None:
        row = {"id": qid, "question": question, "answer": answer, "aliases": [a for a in dict.fromkeys(aliases) if a and a != answer],
               "gold_files": list(dict.fromkeys(gold_files)), "type": type}
        if ev_files := list(dict.fromkeys(evidence_files)):
            row["evidence_files"] = ev_files
        if ev := list(evidence):
            row["evidence"] = ev
        if fact:
            row["fact"] = fact
        self._qfile.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.questions += 1

    def finish(self, counts: Optional[dict[str, int]] = None) -> dict:
        """Close questions.jsonl (renamed into place only now) and write the card; the summary it states."""
        self._qfile.close()
        os.replace(self.out / (QUESTIONS + ".partial"), self.out / QUESTIONS)
        summary = {"format": self.fmt, "source": str(self.source), "documents": len(self.names), "questions": self.questions,
                   **(counts or {}), "dropped": dict(self.dropped.counts)}
        lines = [f"# {self.source.name} ({self.fmt})", "", f"Imported by `python -m searchbox.datasets import {self.fmt}` from `{self.source}`.", "",
                 "| what | count |", "|---|---|", f"| documents (files in {DATAROOM}/) | {len(self.names)} |", f"| questions ({QUESTIONS}) | {self.questions} |"]
        lines += [f"| {k} | {v} |" for k, v in (counts or {}).items()]
        lines += ["", "## Dropped", ""]
        if not self.dropped.counts:
            lines.append("Nothing was dropped.")
        for reason, n in sorted(self.dropped.counts.items()):
            shown = self.dropped.examples.get(reason) or []
            lines.append(f"- {n} x {reason}" + (f" (e.g. {', '.join(shown)})" if shown else ""))
        if self.notes:
            lines += ["", "## Notes", "", *(f"- {n}" for n in self.notes)]
        lines += ["", "File names: a slug of the title, then 10 hex digits of the SHA-1 of the document id; the id and title are in each",
                  "file's front matter. The question file's format: docs/datasets.md."]
        (self.out / CARD).write_text("\n".join(lines) + "\n", encoding="utf-8")
        (self.out / "dataset.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        return summary

    def abort(self) -> None:
        self._qfile.close()
