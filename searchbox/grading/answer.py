"""Which part of ANSWER.md is graded: the answer before its sources, without labels or file references.

The agent is told to write the answer first and its sources after, under a `Sources:` line. So:
- the *answer part* is the text before the first sources line: a line that, without markdown
  markers (#, *, _, >, a list dash), starts with Sources/Source/References/Citations/
  Bibliography (optionally "used") followed by a colon or the end of the line. An inline
  "Sources:"/"References:" cuts its line too where it starts a part of its own: after an opening
  bracket, markdown emphasis, a sentence end (. ! ?), a semicolon, or a spaced dash or bar; a word
  "sources:" inside the answer's sentence ("it draws on two sources: the card and the post") cuts
  nothing. With no such line, or nothing before it, the whole file is the answer part;
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

ANSWER_PART_VERSION = "part-2"

_MARKERS = re.compile(r"[*_#>`]")
_SOURCES_LINE = re.compile(r"^(?:[-+]\s+)?(sources?|references?|citations?|bibliography)(\s+used)?\s*(:|$)", re.IGNORECASE)
_SOURCES_INLINE = re.compile(r"(?:[(\[]|[*_]+|[.!?;]|\s[-\u2013\u2014|])[\s(\[*_]*\b(sources?|references?)\s*\**\s*:", re.IGNORECASE)
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
    lines = _THINK.sub("", answer_md or "").splitlines()
    cut, part = None, "whole"
    for i, line in enumerate(lines):
        if _SOURCES_LINE.match(_MARKERS.sub("", line).strip()):
            cut = i
            break
        m = _SOURCES_INLINE.search(line)
        if m and line[: m.start()].strip():
            keep = line[: m.start() + (1 if m[0][0] in ".!?;" else 0)]  # a sentence's full stop stays with it
            lines[i], cut = keep, i + 1
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
