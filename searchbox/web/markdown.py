"""A small, safe markdown subset to HTML for ANSWER.md and sweep summaries: all text is escaped, only our own tags come out."""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*$")
_BULLET = re.compile(r"[-*+]\s+(.*)")
_NUMBER = re.compile(r"\d{1,9}[.)]\s+(.*)")
_RULE = re.compile(r"(?:-{3,}|\*{3,}|_{3,})$")
_TABLE_SEP = re.compile(r"\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?$")
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^\s)]+)\)")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([A-Za-z0-9_.-]+\.(?:png|svg))\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])")


def inline(text: str, image_base: str | None = None) -> str:
    """One line's inline markup; code spans are left literal."""
    parts = _CODE.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        esc = html.escape(part, quote=True)
        if image_base is not None:  # only sibling figure files (a sweep summary's own figures)
            base = html.escape(image_base, quote=True)
            esc = _IMAGE.sub(lambda m: f'<img alt="{m.group(1)}" src="{base}{m.group(2)}">', esc)
        esc = _LINK.sub(lambda m: f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow" target="_blank">{m.group(1)}</a>', esc)
        esc = _BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", esc)
        esc = _ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", esc)
        out.append(esc)
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def render(text: str, image_base: str | None = None) -> str:
    """Headings, paragraphs, lists, fenced code, quotes, rules, pipe tables, code/bold/italic, http(s) links."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""
    i = 0

    def flush() -> None:
        nonlocal list_tag
        if para:
            out.append("<p>" + "<br>".join(inline(p, image_base) for p in para) + "</p>")
            para.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{inline(t, image_base)}</li>" for t in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        if s.startswith("```"):
            flush()
            code = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            out.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
            i += 1
            continue
        if not s:
            flush()
        elif _HEADING.match(s):
            flush()
            m = _HEADING.match(s)
            level = len(m.group(1))
            out.append(f"<h{level}>{inline(m.group(2), image_base)}</h{level}>")
        elif _RULE.match(s):
            flush()
            out.append("<hr>")
        elif s.startswith("|") and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1].strip()):
            flush()
            head = _cells(s)
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append("<table><thead><tr>" + "".join(f"<th>{inline(c, image_base)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c, image_base)}</td>" for c in r) + "</tr>" for r in rows)
                       + "</tbody></table>")
            continue
        elif s.startswith(">"):
            flush()
            out.append(f"<blockquote>{inline(s.lstrip('>').strip(), image_base)}</blockquote>")
        elif _BULLET.match(s) or _NUMBER.match(s):
            tag = "ul" if _BULLET.match(s) else "ol"
            if para or (list_tag and list_tag != tag):
                flush()
            list_tag = tag
            items.append((_BULLET.match(s) or _NUMBER.match(s)).group(1))
        elif items and raw.startswith((" ", "\t")):
            items[-1] += " " + s  # a wrapped list item
        else:
            if items:
                flush()
            para.append(s)
        i += 1
    flush()
    return "\n".join(out)
