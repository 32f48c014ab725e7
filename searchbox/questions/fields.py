"""Is a gold the value of what its question asks, or only present in its file? (The audit's field checks, issue 29.)

A gold can occur in its gold file and still not answer the question: the file states it for another field (the question
asks the release date, the gold is the file's `updated:` date), it is one item of the value asked (one of four authors),
or the file holds the same value by accident (a sentence about something else). `judge` reads one gold file and says
which, as the audit's reasons:

- a *field statement* is a top-level front-matter key with its value as written (YAML lists as items), or a body line
  `Label: value` whose label names a known field (FIELDS); the field a question asks is its builder template's, else
  the first of FIELDS whose words the question uses;
- where the file states the asked field (and is about the question's subject), that statement decides: its whole value
  is the gold (ok), or the gold is one item of several (gold_is_part_of_value), or the gold is another field's value
  (gold_is_other_field);
- otherwise the gold must stand in a field statement of a file about the question's subject, or in a passage (the
  paragraph or list item around the line, a few lines at most) that names the subject, or, in a file about the subject,
  names no other thing the corpus has a document about; else the file holds it by accident (gold_file_off_subject).

The subject is what the question names (names.entities); for a multi-hop answer file, which the question reaches through
its bridge and must not name, it is the file's own subject. Every scan is one pass over the file's lines (the tokens of
each line come from audit.Corpus, computed once), and a passage is at most PASSAGE_LINES lines either side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Protocol

from ..grading.normalize import tokens
from .names import FRONT_MATTER, QUOTED, AuditedQuestion, entities



class Corpus(Protocol):
    """What the field checks read of audit.Corpus (which imports this module)."""

    texts: dict[str, str]

    def all_line_tokens(self, path: str) -> list[list[str]]: ...

    def documented(self) -> frozenset[tuple[str, ...]]: ...

# canonical field -> (the keys and labels that state it, the words a question asks it with); FIELD_ORDER: first match wins
FIELDS = {
    "license": (("license", "licence", "licenses", "license_name"), r"\blicen[cs]"),
    "parameter_size": (("parameter_size", "parameters", "params", "parameter_count"), r"\bparameter"),
    "token_length": (("token_length", "context_length", "max_tokens", "input_length", "max_input_length", "context_window"),
                     r"\b(?:input|context) length|\btokens\b"),
    "output_dimension": (("output_dimension", "dimension", "dimensions", "embedding_dimension"), r"\bdimension"),
    "authors": (("authors", "author", "by", "writer", "writers", "written_by", "byline"), r"\bauthor|\bwr[io]te\b|\bwritten by\b"),
    "updated_at": (("updated", "updated_at", "last_updated", "modified", "modified_at", "last_modified", "revised"),
                   r"\b(?:last )?(?:updated|modified|revised)\b"),
    "created_at": (("created", "created_at"), r"\bcreated\b"),
    "published_at": (("published_at", "published", "publish_date", "publication_date", "pub_date", "date"), r"\bpublish"),
    "release_date": (("release_date", "released", "release", "released_at", "released_on", "date"), r"\breleas|\blaunched\b"),
}
ASKED_WORDS = tuple((name, re.compile(words, re.I)) for name, (_, words) in FIELDS.items())  # "Under which license is M released?": license
TEMPLATE_SUFFIXES = (("post_date", "published_at"), ("card_to_post_date", "published_at"), ("release_date", "release_date"),
                     ("author", "authors"), ("parameters", "parameter_size"), ("license", "license"), ("input_length", "token_length"),
                     ("dimension", "output_dimension"))  # the builder's templates (questions/build.py), by how their names end
LIST_SPLIT = re.compile(r"\s*(?:,|;|&|\band\b)\s*", re.I)  # "Ann, Bob and Cy": the items of a list written as text
LIST_FIELDS = frozenset({"authors"})  # fields whose text value is a list of names
# greedy tails, stripped in Python: a lazy `(.*?)\s*$` backtracks quadratically on a line with a long run of spaces
KEY = re.compile(r"^([A-Za-z_][\w-]{0,63})[ \t]*:(.*)$")
LABEL = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?[*_]{0,2}([A-Za-z][\w ]{0,30}?)[*_]{0,2}[ \t]*:[*_]{0,2}[ \t]+(\S.*)$")
ITEM = re.compile(r"^[ \t]+-[ \t]+(.*)$")
PASSAGE_LINES = 4  # a passage reaches this many lines either side of the gold's line, inside its paragraph or list item
BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#|\|)")
IDENT_WORD = re.compile(r"\b[\w.]*(?:\d[\w.]*-|-[\w.-]*\d|\w-\w)[\w.-]*")  # jina-embeddings-v2, 8k-token
OK, PART, OTHER, OFF = "ok", "gold_is_part_of_value", "gold_is_other_field", "gold_file_off_subject"


def _norm_key(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


KEY_FIELDS: dict[str, frozenset[str]] = {}
for _name, (_keys, _) in FIELDS.items():
    for _k in _keys:
        KEY_FIELDS[_k] = KEY_FIELDS.get(_k, frozenset()) | {_name}


def fields_of_key(key: str) -> frozenset[str]:
    """The fields a key or label states ("date" may be a post's publication or a release), none for one not known."""
    return KEY_FIELDS.get(_norm_key(key), frozenset())


def asked_field(q: AuditedQuestion) -> Optional[str]:
    """The field the question asks: its builder template's, else the first field whose words the question uses outside
    the names it gives (quoted titles, identifiers with a hyphen or a digit)."""
    template = getattr(q, "template", "") or ""
    for suffix, name in TEMPLATE_SUFFIXES:
        if template.endswith(suffix) or template.endswith(suffix + "s"):
            return name
    words = IDENT_WORD.sub(" ", QUOTED.sub(" ", q.question))  # a title's words ask nothing: "...High-Dimensional Cosine..."
    return next((name for name, rx in ASKED_WORDS if rx.search(words)), None)


@dataclass(frozen=True)
class Statement:
    """One field statement of a file: its key or label, its value's items as written, and the lines it spans."""

    key: str
    items: tuple[str, ...]
    lines: tuple[int, int]  # [first, last) line numbers of the file

    @property
    def fields(self) -> frozenset[str]:
        return fields_of_key(self.key)


def _unquote(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def _items(key: str, value: str) -> tuple[str, ...]:
    value = _unquote(value)
    if value.startswith("[") and value.endswith("]"):
        return tuple(i for i in (_unquote(v) for v in value[1:-1].split(",")) if i)
    if fields_of_key(key) & LIST_FIELDS:
        return tuple(i for i in (_unquote(v) for v in LIST_SPLIT.split(value)) if i)
    return (value,) if value else ()


def statements(text: str, front_lines: int) -> list[Statement]:
    """The file's field statements: every top-level front-matter key (its `- item` lines its items), then every body line
    `Label: value` whose label is a known field. One pass over the lines."""
    lines = text.splitlines()
    out: list[Statement] = []
    i = 1 if front_lines else 0
    while i < max(0, front_lines - 1):  # between the two `---` lines
        m = KEY.match(lines[i])
        if not m:
            i += 1
            continue
        j, items = i + 1, list(_items(m[1], m[2].strip()))
        while j < front_lines - 1 and (ITEM.match(lines[j]) or (lines[j][:1].isspace() and lines[j].strip())):
            item = ITEM.match(lines[j])
            if item:
                items.append(_unquote(item[1].strip()))
            j += 1
        out.append(Statement(m[1], tuple(x for x in items if x), (i, j)))
        i = j
    for n in range(front_lines, len(lines)):
        m = LABEL.match(lines[n]) if ":" in lines[n] else None
        if m and fields_of_key(m[1]):
            out.append(Statement(m[1], _items(m[1], m[2].strip()), (n, n + 1)))
    return out


def _holds(text: str, golds: list[list[str]]) -> bool:
    hay = tokens(text)
    return any(g and any(hay[i : i + len(g)] == g for i in range(len(hay) - len(g) + 1)) for g in golds)


def value_verdict(s: Statement, golds: list[str]) -> Optional[str]:
    """OK when the statement's value is the gold (its one item holds it, or its items are the gold's items, in any
    order), PART when the gold is one item of several, None when the value does not hold the gold."""
    wanted = [t for t in (tokens(g) for g in golds) if t]
    if len(s.items) == 1:
        return OK if _holds(s.items[0], wanted) else None
    mine = sorted(_tok(i) for i in s.items)
    if any(sorted(_tok(i) for i in LIST_SPLIT.split(g) if i.strip()) == mine for g in golds):
        return OK
    if any(_holds(i, wanted) for i in s.items):
        return PART
    return None


@lru_cache(maxsize=4096)
def _tok(text: str) -> tuple[str, ...]:
    """tokens, cached: subject names and the names a passage gives repeat from passage to passage."""
    return tuple(tokens(text))


def _in(needle: tuple[str, ...], hay) -> bool:
    return bool(needle) and any(tuple(hay[i : i + len(needle)]) == needle for i in range(len(hay) - len(needle) + 1))


def is_about(names: list[str], titles: list[str], subjects: list[str]) -> bool:
    """The file is about the subject: one of its names (model_name, file name) is a subject name, or its title or first
    heading holds one as whole words ("Gannet Rock structural survey" is about Gannet Rock; a heading
    "jina-embeddings-v2-base-code" is not about jina-embeddings-v2)."""
    want = [t for t in (tokens(s) for s in subjects) if t]
    if any(tokens(n) in want for n in [*names, *titles]):
        return True
    for title in titles:
        words = [tokens(w) for w in re.findall(r"\S+", title)]
        flat = [(k, t) for k, w in enumerate(words) for t in w]  # each token with the word it came from
        for w in want:
            for i in range(len(flat) - len(w) + 1):
                if [t for _, t in flat[i : i + len(w)]] == w:
                    first, last = flat[i][0], flat[i + len(w) - 1][0]
                    whole = (i == 0 or flat[i - 1][0] != first) and (i + len(w) == len(flat) or flat[i + len(w)][0] != last)
                    if whole:
                        return True
    return False


def passage(lines: list[str], n: int, start: int) -> tuple[int, int]:
    """The lines [lo, hi) of the paragraph or list item around line n (at most PASSAGE_LINES either side, none above `start`)."""
    lo = n
    while lo > max(start, n - PASSAGE_LINES) and lines[lo - 1].strip() and not BLOCK_START.match(lines[lo]):
        lo -= 1
    hi = n + 1
    while hi < min(len(lines), n + 1 + PASSAGE_LINES) and lines[hi].strip() and not BLOCK_START.match(lines[hi]):
        hi += 1
    return lo, hi


def on_subject(text: str, toks: list[str], subjects: list[str], golds: list[str], about: bool, documented) -> bool:
    """A passage (its text and its tokens) about the subject: it names it, or (in a file about the subject) it names no
    other thing the corpus has a document about (`documented()`: the token tuples of every file's names). A person the
    passage names beside a date is no other subject; another lighthouse with its own file is."""
    if not subjects or any(_in(_tok(n), toks) for n in subjects):
        return True
    if not about:
        return False
    mine = [*subjects, *golds]
    others = [e for e in entities(text) if not any(_in(_tok(x), _tok(e)) or _in(_tok(e), _tok(x)) for x in mine)]
    return not others or not any(_tok(e) in documented() for e in others)


def judge(q: AuditedQuestion, corpus: Corpus, path: str, golds: list[str], subjects: list[str], names: list[str],
          titles: list[str], own_subject: bool = False) -> tuple[str, str]:
    """(verdict, detail) for one gold file that holds a gold: OK, PART, OTHER or OFF (see the module docstring). `names`
    and `titles`: the file's own (is_about); `own_subject`: the file's subject is the question's (a multi-hop answer file,
    reached through its bridge)."""
    text = corpus.texts.get(path, "")
    front = FRONT_MATTER.match(text)
    front_lines = front.group(0).count("\n") if front else 0
    gold_tokens = [t for t in (tokens(g) for g in golds) if t]
    about = own_subject or not subjects or is_about(names, titles, subjects)
    stated = statements(text, front_lines)
    field_lines = {n for s in stated for n in range(*s.lines)}
    prose = lru_cache(maxsize=1)(lambda: _prose_holds(corpus, path, front_lines, field_lines, gold_tokens, subjects, golds, about))
    if about:
        asked = asked_field(q)
        mine = [s for s in stated if asked and asked in s.fields]
        verdicts = [(value_verdict(s, golds), s) for s in mine]
        if any(v == OK for v, _ in verdicts):
            return OK, ""
        part = next((s for v, s in verdicts if v == PART), None)
        if part:
            return PART, f"{q.answer!r} is one of the {len(part.items)} items of {part.key} in {path}"
        others = [s for s in stated if s not in mine and value_verdict(s, golds)]
        if others and not asked:
            return OK, ""  # a field the audit does not know: a file about the subject states it
        # the file states the field asked with another value (or states it nowhere, nor in prose): the gold is another field's
        if others and (mine or not prose()):
            said = f"its {mine[0].key} is {', '.join(mine[0].items)!r}" if mine else f"it states no {asked}"
            return OTHER, f"{q.answer!r} is the {others[0].key} of {path}; the question asks {asked}, {said}"
    if prose():
        return OK, ""
    why = "the file is about something else" if not about else "no passage that holds it is about the question's subject"
    return OFF, f"{q.answer!r} in {path}, but {why}" + (f" (the question names {subjects[0]!r})" if subjects and not about else "")


def _prose_holds(corpus: Corpus, path: str, front_lines: int, field_lines: set[int], gold_tokens: list[list[str]],
                 subjects: list[str], golds: list[str], about: bool) -> bool:
    """Some body line outside the field statements holds the gold in a passage about the subject."""
    lines, per_line = corpus.texts.get(path, "").splitlines(), corpus.all_line_tokens(path)
    wanted = [tuple(g) for g in gold_tokens]
    for n, toks in enumerate(per_line):
        if n < front_lines or n in field_lines or n >= len(lines) or not toks:
            continue
        if any(_in(g, toks) for g in wanted):
            lo, hi = passage(lines, n, front_lines)
            if on_subject("\n".join(lines[lo:hi]), [t for ln in per_line[lo:hi] for t in ln], subjects, golds, about, corpus.documented):
                return True
    return False
