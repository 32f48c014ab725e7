"""Which part of ANSWER.md is graded: the answer before its sources, without labels or file references.

The agent is told to write the answer first and its sources after, under a `Sources:` line. So:
- the *answer part* is the text before the first sources line: a line that, without markdown
  markers (#, *, _, >, a list dash), starts with Sources/Source/References/Citations/
  Bibliography (optionally "used") followed by a colon or the end of the line. An inline
  "Sources:"/"References:" cuts its line too where it starts a part of its own: after an opening
  bracket, markdown emphasis, a sentence end (. ! ?), a semicolon, or a spaced dash or bar; a word
  "sources:" inside the answer's sentence ("it draws on two sources: the card and the post") cuts
  nothing. With no such line, or nothing before it, the whole file is the answer part;
- at most ANSWER_CAP (4,096) characters are read, after reasoning blocks are dropped: a longer answer is graded on
  its first 4,096 characters (what it says past them, a Sources line included, is not read), so every grader's
  time is bounded whatever the file holds;
- reasoning blocks (<think>...</think>) and a leading "Answer:"/"Final answer:" label or heading
  are dropped;
- file references are dropped (markdown link targets, URLs, `dataroom/...` and names with a
  document or code file extension, with their folders) unless a gold answer is itself such a reference, so a cited
  `annual-report-2023.md` never matches the gold "2023";
- the *answer line* is the answer part's first non-empty line (what exact match and F1 read;
  contains and the judge read the whole answer part);
- the *claim* is what the `correct` grade reads: the answer line, joined with what it introduces
  when it is a lead-in ending in a colon ("The authors are:" and the list or line after it), and
  with the rest of its list when it is a list item, so a bulleted answer is read whole; the lines
  of the answer part after the claim are `after` (where `correct` looks for values on lines of
  their own: an answer that lists alternatives line by line offers them all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

ANSWER_PART_VERSION = "part-3"  # part-3: read at most ANSWER_CAP characters; inline Sources found in linear time

_MARKERS = re.compile(r"[*_#>`]")
_SOURCES_LINE = re.compile(r"^(?:[-+]\s+)?(sources?|references?|citations?|bibliography)(\s+used)?\s*(:|$)", re.IGNORECASE)
_SOURCES_WORD = re.compile(r"\b(?:sources?|references?)[ \t]*\**[ \t]*:", re.IGNORECASE)
_OPENERS = " \t\u00a0([*_"  # what may stand between a part's opening and the word: whitespace, brackets, emphasis
ANSWER_CAP = 4096  # characters of ANSWER.md (after reasoning blocks) that grading reads: the answer comes first, by the prompt
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,2}[.)])\s+")
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
    claim: str = ""  # the answer line with the lead-in's continuation or the rest of its list (what `correct` reads)
    after: str = ""  # the answer part's lines after the claim


def is_reference(text: str) -> bool:
    """True when the text holds a file path, link or URL (such a gold answer keeps references)."""
    return bool(_REFERENCE.search(text or ""))


def strip_references(text: str) -> str:
    return _REFERENCE.sub(" ", _LINK_TARGET.sub("]", text))


def answer_part(answer_md: str, keep_references: bool = False) -> AnswerPart:
    """The part of ANSWER.md that grading reads (see the module docstring)."""
    lines = _THINK.sub("", answer_md or "")[:ANSWER_CAP].splitlines()
    cut, part = None, "whole"
    for i, line in enumerate(lines):
        if _SOURCES_LINE.match(_MARKERS.sub("", line).strip()):
            cut = i
            break
        start = inline_sources(line)
        if start is not None and line[:start].strip():
            lines[i], cut = line[:start], i + 1
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
    claim, after = claim_of(text)
    return AnswerPart(text, first, part, claim, after)


def inline_sources(line: str) -> Optional[int]:
    """Where an inline "Sources:"/"References:" part starts in a line (what is kept ends there), or None.

    It starts a part of its own after an opening bracket or markdown emphasis, a sentence end (. ! ? ;, kept with the
    sentence), or a spaced dash or bar. Found by the word first, then one look back over the whitespace, brackets and
    emphasis before it: each character is looked at a bounded number of times, so a line of `**` costs linear time
    (a single regex for the same rule backtracked: 2 KiB of `**` took minutes)."""
    for m in _SOURCES_WORD.finditer(line):
        r = len(line[: m.start()].rstrip(_OPENERS))
        region = line[r : m.start()]
        before = line[r - 1] if r else ""
        if before in (".", "!", "?", ";"):
            return r
        if before in ("-", "\u2013", "\u2014", "|") and r >= 2 and line[r - 2].isspace():
            return r - 2
        marks = [k for k, ch in enumerate(region) if ch in "([*_"]
        if marks:
            return r + marks[0]
    return None


def claim_of(text: str) -> tuple[str, str]:
    """(the claim, the lines after it): the answer line joined with its lead-in's continuation or the rest of its
    list ("; " between)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if not ln.strip().startswith(("```", "~~~"))]  # code fences frame, say nothing
    i = next((k for k, ln in enumerate(lines) if ln), None)
    if i is None:
        return "", ""
    lead = ""
    if _MARKERS.sub("", lines[i]).rstrip().endswith(":"):  # a lead-in: what it introduces is the answer
        j = next((k for k in range(i + 1, len(lines)) if lines[k]), None)
        if j is None:
            return lines[i], ""
        lead, i = lines[i] + " ", j
    items, end = [lines[i]], i + 1
    if _LIST_ITEM.match(lines[i]):
        for ln in lines[i + 1:]:
            if not _LIST_ITEM.match(ln):
                break
            items.append(ln)
            end += 1
    return lead + "; ".join(_LIST_ITEM.sub("", ln) for ln in items), "\n".join(lines[end:]).strip()
