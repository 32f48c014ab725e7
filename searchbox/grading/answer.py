"""Which part of ANSWER.md is graded: the answer before its sources, without labels or file references.

The agent is told to write the answer first and its sources after, under a `Sources:` line. So:
- the *answer part* is the text before the first sources line: a line that, without markdown
  markers (#, *, _, >, a list dash), starts with Sources/Source/References/Citations/
  Bibliography (optionally "used") followed by a colon or the end of the line; an inline
  "Sources:"/"References:" cuts its line too. With no such line, or nothing before it, the
  whole file is the answer part;
- reasoning blocks (<think>...</think>) and a leading "Answer:"/"Final answer:" label or heading
  are dropped;
- file references are dropped (markdown link targets, URLs, `dataroom/...` and names with a
  document or code file extension, with their folders) unless a gold answer is itself such a reference, so a cited
  `annual-report-2023.md` never matches the gold "2023";
- the *answer line* is the answer part's first non-empty line (what exact match and F1 read;
  contains and the judge read the whole answer part).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSWER_PART_VERSION = "part-1"

_MARKERS = re.compile(r"[*_#>`]")
_SOURCES_LINE = re.compile(r"^(?:[-+]\s+)?(sources?|references?|citations?|bibliography)(\s+used)?\s*(:|$)", re.IGNORECASE)
_SOURCES_INLINE = re.compile(r"[\s(\[*_]*\b(sources?|references?)\s*\**\s*:", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_LABEL_LINE = re.compile(r"^(?:final\s+|short\s+)?answer\s*:?\s*$", re.IGNORECASE)
_LABEL = re.compile(r"^[\s*_#>]*(?:final\s+|short\s+)?answer[\s*_]*[:\u2013\u2014][\s*_]*", re.IGNORECASE)
_EXT = r"(?:md|markdown|txt|csv|tsv|json|jsonl|pdf|html?|xml|ya?ml|rst|py|ipynb|docx?|xlsx?|pptx?)"
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_REFERENCE = re.compile(rf"(?:https?://|file://)\S+|\bdataroom/\S*|(?:[\w.\-~]+/)*[\w\-~][\w.\-~]*\.{_EXT}\b", re.IGNORECASE)


@dataclass
class AnswerPart:
    text: str  # the answer part
    line: str  # its first non-empty line
    part: str  # before_sources | whole


def is_reference(text: str) -> bool:
    """True when the text holds a file path, link or URL (such a gold answer keeps references)."""
    return bool(_REFERENCE.search(text or ""))


def strip_references(text: str) -> str:
    return _REFERENCE.sub(" ", _LINK_TARGET.sub("]", text))


def answer_part(answer_md: str, keep_references: bool = False) -> AnswerPart:
    """The part of ANSWER.md that grading reads (see the module docstring)."""
    lines = _THINK.sub("", answer_md or "").splitlines()
    cut, part = None, "whole"
    for i, line in enumerate(lines):
        if _SOURCES_LINE.match(_MARKERS.sub("", line).strip()):
            cut = i
            break
        m = _SOURCES_INLINE.search(line)
        if m and line[: m.start()].strip():
            lines[i], cut = line[: m.start()], i + 1
            break
    if cut is not None and any(ln.strip() for ln in lines[:cut]):
        lines, part = lines[:cut], "before_sources"
    body = list(lines)
    while body and not body[0].strip():
        body.pop(0)
    if body and _LABEL_LINE.match(_MARKERS.sub("", body[0]).strip()):
        body.pop(0)  # a heading "Answer" on its own line
    elif body:
        body[0] = _LABEL.sub("", body[0], count=1)
    text = "\n".join(body).strip()
    if not keep_references:
        text = strip_references(text)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return AnswerPart(text, first, part)
