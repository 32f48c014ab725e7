"""Citation precision and recall, from the files the answer's `Sources:` part cites.

- The *sources part* is what follows the answer's first sources line (the line grading/answer.py cuts the answer at,
  its own text after the colon included); text before it cites nothing, however many file names it holds.
- A *citation* is a markdown link target, or a token that names a path (holds a `/` or ends in a file extension);
  bare words name no file. Each resolves to a dataroom file: the dataroom-relative path (a `dataroom/` prefix and any
  folders up to `work/dataroom/` dropped), else the one file it is the path-suffix or the file name or stem of.
  A citation that resolves to no file, or to several, is still a citation: it counts against precision.
- The *supporting files* are the question's gold_files and evidence_files together.

citation_precision = distinct citations that resolve to a supporting file / distinct citations (None: nothing cited
or nothing supporting); citation_recall = supporting files cited / supporting files (None when there are none).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .answer import ANSWER_CAP, _MARKERS, _SOURCES_LINE, _SOURCES_WORD, _THINK, inline_sources  # one definition of a sources line

CITATIONS_VERSION = "citations-1"
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_TOKEN = re.compile(r"[^\s,;()\[\]<>`\"'*]+")
_PATHLIKE = re.compile(r"/|\.[A-Za-z0-9]{1,8}$")


def sources_part(answer_md: str) -> str:
    """The text after the answer's first sources line ("" when it has none)."""
    lines = _THINK.sub("", answer_md or "")[:ANSWER_CAP].splitlines()  # what grading reads, and no more (linear)
    for i, line in enumerate(lines):
        bare = _MARKERS.sub("", line).strip()
        m = _SOURCES_LINE.match(bare)
        if m:
            return "\n".join([bare[m.end():], *lines[i + 1:]])
        start = inline_sources(line)
        if start is not None and line[:start].strip():
            word = _SOURCES_WORD.search(line, start)
            return "\n".join([line[word.end():] if word else line[start:], *lines[i + 1:]])
    return ""


def citations(answer_md: str) -> list[str]:
    """The distinct citations of the sources part, in order, normalised (see the module docstring)."""
    part = sources_part(answer_md)
    found = _LINK.findall(part) + [t for t in _TOKEN.findall(_LINK.sub("]", part)) if _PATHLIKE.search(t.rstrip(".:"))]
    out = []
    for raw in found:
        ref = raw.strip().rstrip(".:").removeprefix("file://").split("#", 1)[0]
        parts = [p for p in ref.split("/") if p not in ("", ".")]
        if "dataroom" in parts:
            parts = parts[len(parts) - parts[::-1].index("dataroom"):]
        if parts and "/".join(parts) not in out:
            out.append("/".join(parts))
    return out


def resolve(ref: str, files: set[str]) -> Optional[str]:
    """The one dataroom file a citation names, or None."""
    if ref in files:
        return ref
    for key in (lambda f: f.endswith("/" + ref), lambda f: f.rsplit("/", 1)[-1] == ref,
                lambda f: f.rsplit("/", 1)[-1].rsplit(".", 1)[0] == ref):
        hits = [f for f in files if key(f)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            return None  # ambiguous: names no one file
    return None


@dataclass
class Citations:
    cited: list[str] = field(default_factory=list)  # distinct citations
    resolved: dict[str, Optional[str]] = field(default_factory=dict)  # citation -> dataroom file
    supporting: list[str] = field(default_factory=list)  # the supporting files, as dataroom files

    @property
    def correct(self) -> list[str]:
        return [c for c in self.cited if self.resolved.get(c) in self.supporting]

    def grades(self) -> dict:
        files = {self.resolved[c] for c in self.correct}
        return {"citation_precision": len(self.correct) / len(self.cited) if self.cited and self.supporting else None,
                "citation_recall": len(files) / len(self.supporting) if self.supporting else None,
                "citations": len(self.cited), "citations_version": CITATIONS_VERSION}


def measure(answer_md: str, files: set[str], gold_files: Iterable[str], evidence_files: Iterable[str] = ()) -> Citations:
    supporting = []
    for g in dict.fromkeys([*gold_files, *evidence_files]):
        f = resolve(g.removeprefix("dataroom/").strip("/"), files) if g else None
        if f and f not in supporting:
            supporting.append(f)
    cited = citations(answer_md)
    return Citations(cited, {c: resolve(c, files) for c in cited}, supporting)


def room_files(run_dir: Path) -> set[str]:
    """The dataroom-relative paths of the dataroom a run saw: the shared copy its pointer names (corpus.store), else its
    own work/dataroom (links not followed; empty when it has none)."""
    from ..corpus.dataroom import POINTER, run_dataroom

    root = run_dataroom(run_dir) if (Path(run_dir) / POINTER).is_file() else Path(run_dir) / "work" / "dataroom"
    out: set[str] = set()
    if root.is_dir() and not root.is_symlink():
        for folder, _, names in os.walk(root):
            rel = Path(folder).relative_to(root).as_posix()
            out.update(n if rel == "." else f"{rel}/{n}" for n in names)
    return out
