"""The question-set audit (`python -m searchbox.questions audit Q.jsonl CORPUS`): does each question mean what it says?

Every check reads the documents as the grader does, through `searchbox.grading.normalize.tokens` (a gold
"occurs" in a line when its tokens occur there, contiguous and in order, like the `contains` grade):

- the gold (answer or an alias) occurs in the question's gold files, which exist in the corpus, in a line that states
  it rather than denies it (the grader's primary grade reads the line: "38.4 metres, not 41 metres" denies 41 metres),
  except where the answer is worked out rather than stated (aggregate, aggregation, count, comparison, yes/no);
- its type is one the audit knows (TYPES): a misspelt "multihop" would skip every multi-hop check;
- the question does not hold its own answer;
- a multi-hop question (type "multi-hop") has two gold files, and exactly one of them holds the answer (the *answer file*; the
  other is the bridge): with the answer in both, either document alone answers it;
- no shortcut past the bridge: the answer file does not name the question's entity (one grep for the name
  the question gives would land on it; the whole file is read, front matter included, as a grep reads it), and the question does not name the answer file's own subject
  (its model_name, title or file name); the question's names are its quoted titles, identifier-like words and runs
  of capitalised words ("Skerrow Point");
- one value per field: the documents about the answer's subject (the answer file and, for a model card,
  its release blog post and the other gold files where they name the model) give one value for the field
  asked (a card's release date vs its announcement post's date; a front-matter "137M" vs "161 million
  parameters" in the text); for an answer that is a measurement (a number and a unit), no sentence of a gold file
  about the question's subject states another amount in that unit ("41 metres" in a guidebook);
- the gold is the value of the field asked, about the question's subject (fields.py): not another field's value
  (gold_is_other_field), not one item of several (gold_is_part_of_value), not held by accident (gold_file_off_subject).

The report says how many distinct facts the questions ask (facts.py: answer file and normalised gold); reports
resample those, not questions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from decimal import ROUND_HALF_UP, Decimal
from typing import Iterable, Optional

import yaml

from ..grading.normalize import fold, tokens
from . import facts, fields
from .names import FRONT_MATTER, IDENT, AuditedQuestion, entities  # noqa: F401 - entities, AuditedQuestion: read by the audit's callers

REASONS = {  # id -> what it means, in the order the table lists them
    "duplicate_id": "another question has the same id",
    "unknown_type": "its type is none the audit knows, so no check of its kind would run (\"multihop\" skipped every multi-hop check)",
    "no_gold_files": "names no gold file, so nothing can be checked",
    "missing_gold_file": "a gold file is not in the corpus",
    "gold_not_in_files": "no gold (answer or alias) is stated in its gold files (absent, or only denied)",
    "answer_in_question": "the question holds its own answer",
    "multi_hop_one_file": "multi-hop with fewer than two gold files",
    "answer_in_both_hops": "more than one gold file holds the answer: either document alone answers it",
    "answer_file_names_entity": "the answer file's text names the question's entity: one grep reaches it past the bridge",
    "question_names_answer_file": "the question names the answer file's own subject",
    "several_values": "the documents about the answer's subject give more than one value for the field",
    "gold_is_other_field": "the gold file states the gold for another field than the one asked (an `updated:` date for a release date)",
    "gold_is_part_of_value": "the gold is one item of the value asked (one of four authors)",
    "gold_file_off_subject": "the gold file holds the gold by accident: not as the field asked, nor in a passage about the question's subject",
}
LINE_BREAK = "qqsearchboxlinebreakqq"  # a word that tokenises to itself and that no gold holds
DERIVED = frozenset({"aggregate", "aggregation", "count", "comparison", "yes-no", "yes/no", "boolean"})  # answers worked out, not stated
POLAR = ({"yes"}, {"no"})
TYPES = frozenset({"single-hop", "multi-hop", "factoid", "bridge"}) | DERIVED  # every type a check reads; anything else is refused  # a yes/no answer is worked out whatever the question's type says
# The types the importers write (searchbox/datasets/), each read as the class of question it is: a data set's own
# type names stay in the question file (the report's by-type figures show them); the audit checks them by class.
IMPORTED_TYPES = {"browsecomp-plus": "multi-hop", "musique": "multi-hop", "hotpotqa": "multi-hop",
                  "single-session-user": "single-hop", "single-session-assistant": "single-hop",
                  "single-session-preference": "single-hop", "knowledge-update": "single-hop", "multi-session": "multi-hop",
                  "temporal-reasoning": "aggregate"}
HOPS = re.compile(r"[2-9]hop\d*")  # MuSiQue's 2hop, 3hop1, 4hop3 ...


def type_class(qtype: str) -> Optional[str]:
    """The class of question a type names (one of TYPES), or None for a type no check knows ("multihop")."""
    if qtype in TYPES:
        return qtype
    if qtype in IMPORTED_TYPES:
        return IMPORTED_TYPES[qtype]
    if HOPS.fullmatch(qtype or ""):
        return "multi-hop"
    if (qtype or "").startswith("beir-"):
        return "single-hop"
    if (qtype or "").endswith("-abs") and type_class(qtype[:-4]) is not None:
        return "aggregate"  # LongMemEval's abstentions: the answer (nothing of the kind was said) is worked out, not stated
    return None


FIELDS_BY_TEMPLATE = {"card_release_date": "release_date", "successor_release_date": "release_date", "card_parameters": "parameter_size",
                      "post_to_card_parameters": "parameter_size", "successor_parameters": "parameter_size"}
FIELDS_BY_WORDS = (("license", re.compile(r"\blicen[cs]", re.I)), ("parameter_size", re.compile(r"\bparameter", re.I)),
                   ("token_length", re.compile(r"\b(?:input|context) length|\btokens\b", re.I)),
                   ("output_dimension", re.compile(r"\bdimension", re.I)), ("published_at", re.compile(r"\bpublish", re.I)),
                   ("release_date", re.compile(r"\breleas", re.I)))  # first match wins: "Under which license is M released?" asks the license
PARAMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(million|billion|thousand|[MBK])\b[\s-]*(?:parameters?|params)\b", re.I)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
HEADING = re.compile(r"^#{1,6}[ \t]+(\S.*)$", re.M)  # greedy, stripped in Python (a lazy tail backtracks on long space runs)
HEADING_SCAN = 64 * 1024  # a first heading is looked for this far into a file (bounded on big files)
COMPARED = re.compile(r"\b(?:than|under|over|up to|below|above|at most|at least|to)\s*~?\s*$", re.I)


@dataclass
class Finding:
    """One question's verdict: the reasons it fails (none when it passes), and a word on each."""

    id: str
    type: str
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons

    def fail(self, reason: str, detail: str = "") -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
            self.details.append(detail)

    def __str__(self) -> str:
        return f"{self.id}: " + "; ".join(f"{r} ({d})" if d else r for r, d in zip(self.reasons, self.details))


@dataclass
class Corpus:
    """The corpus as the audit reads it: every text file, and the front matter of those that have one."""

    texts: dict[str, str]
    meta: dict[str, dict] = field(default_factory=dict)
    _lines: dict[str, list[list[str]]] = field(default_factory=dict)
    _grep: dict[str, list[str]] = field(default_factory=dict)
    _documented: Optional[frozenset] = None

    @classmethod
    def of(cls, texts: dict[str, str]) -> "Corpus":
        corpus = cls(texts)
        for path, text in texts.items():
            m = FRONT_MATTER.match(text)
            try:
                meta = yaml.safe_load(m.group(1)) if m else None
            except yaml.YAMLError:
                meta = None
            if isinstance(meta, dict):
                corpus.meta[path] = meta
        return corpus

    def line_tokens(self, path: str, body_only: bool = False) -> list[list[str]]:
        """The canonical tokens of each non-empty line of a file, or of its body after the front matter (computed once)."""
        if path not in self._lines:
            text = self.texts.get(path, "")
            # One call for the whole file (a call per line costs 20 times more); a word no gold holds keeps lines apart.
            lines, line = [], []
            for t in tokens(f" {LINE_BREAK} ".join(text.splitlines())) + [LINE_BREAK]:
                if t == LINE_BREAK:
                    lines, line = lines + [line], []
                else:
                    line.append(t)
            self._lines[path] = lines
        lines = self._lines[path]
        front = FRONT_MATTER.match(self.texts.get(path, "")) if body_only else None
        return [t for t in lines[front.group(0).count("\n") if front else 0 :] if t]

    def all_line_tokens(self, path: str) -> list[list[str]]:
        """The canonical tokens of every line of a file, empty lines included: line n of the file is item n."""
        self.line_tokens(path)
        return self._lines[path]

    def occurs(self, path: str, phrases: Iterable[str], body_only: bool = False) -> bool:
        """Some phrase occurs in some line of the file (of its body only: after the front matter), under the grader's normalisation."""
        wanted = [t for t in (tokens(p) for p in phrases) if t]
        return any(_within(w, line) for line in self.line_tokens(path, body_only) for w in wanted)

    def documented(self) -> frozenset[tuple[str, ...]]:
        """The canonical tokens of every file's names (model_name, title, first heading): the things the corpus has a
        document about (computed once, when a field check first needs it)."""
        if self._documented is None:
            self._documented = frozenset(tuple(tokens(n)) for p in self.texts
                                         for n in [*(str(self.meta.get(p, {}).get(k)) for k in ("model_name", "title") if self.meta.get(p, {}).get(k)),
                                                   *titles_of(self, p)] if tokens(n))
        return self._documented

    def greps(self, path: str, name: str) -> bool:
        """`grep -i NAME FILE` finds the name as the question writes it: in any line of the whole file, front matter
        included (`related_models: - jina-clip-v1` is one grep away), case and spacing aside. Literal, as a grep is: a
        post's title is not found in a card's `release_blog` slug, which the grader's tokens would read as the title."""
        if path not in self._grep:
            self._grep[path] = [_grep_form(ln) for ln in self.texts.get(path, "").splitlines()]
        want = _grep_form(name)
        return bool(want) and any(want in ln for ln in self._grep[path])

    def cards(self) -> dict[str, str]:
        """model_name -> path of each model card."""
        return {str(m["model_name"]): p for p, m in self.meta.items() if m.get("model_name")}

    def post_by_slug(self, link) -> Optional[str]:
        slug = str(link).rstrip("/").rsplit("/", 1)[-1] if link else ""
        return next((p for p, m in self.meta.items() if slug and str(m.get("slug") or "") == slug and "model_name" not in m), None)


def _grep_form(text: str) -> str:
    return " ".join(fold(text).casefold().split())


def _within(needle: list[str], hay: list[str]) -> bool:
    return any(hay[i : i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


def occurs_in(text: str, phrases: Iterable[str]) -> bool:
    """Some phrase occurs in the text under the grader's normalisation (contiguous canonical tokens)."""
    hay = tokens(text)
    return any(w and _within(w, hay) for w in (tokens(p) for p in phrases))


def subject_names(corpus: Corpus, path: str) -> list[str]:
    """What a document is about, by name: its model_name or title, and its file name."""
    meta = corpus.meta.get(path, {})
    names = [str(meta[k]) for k in ("model_name", "title") if meta.get(k)]
    return names + [PurePosixPath(path).stem]


def titles_of(corpus: Corpus, path: str) -> list[str]:
    """A document's title (front matter) and its first markdown heading."""
    title = corpus.meta.get(path, {}).get("title")
    body = FRONT_MATTER.sub("", corpus.texts.get(path, "")[:HEADING_SCAN], count=1)
    heading = HEADING.search(body)
    return [str(t) for t in dict.fromkeys([title, heading[1].strip().rstrip("#").strip() if heading else None]) if t]


def field_of(q: AuditedQuestion) -> Optional[str]:
    template = getattr(q, "template", "") or ""
    if template:
        return FIELDS_BY_TEMPLATE.get(template)
    return next((f for f, rx in FIELDS_BY_WORDS if rx.search(q.question)), None)


def _date(value) -> Optional[str]:
    text = value.isoformat() if hasattr(value, "isoformat") else str(value or "")
    return text[:10] if re.match(r"\d{4}-\d{2}-\d{2}", text) else None


_NAME_RX: dict[tuple[str, ...], re.Pattern] = {}


def _names(text: str, names: list[str]) -> list[str]:
    """The names (model names) a text mentions, whole."""
    key = tuple(sorted({n.lower() for n in names}, key=lambda n: (-len(n), n)))
    if key not in _NAME_RX:
        _NAME_RX[key] = re.compile(rf"(?<![\w.-])({'|'.join(map(re.escape, key))})(?![\w-]|\.\d)")
    found = set(_NAME_RX[key].findall(text.lower()))
    return [n for n in names if n.lower() in found]


def _other_identifiers(text: str, model: str) -> bool:
    """The text names something identifier-like besides the model (`bge-reranker-base`, `XLM-RoBERTa-large`, `v2`)."""
    return any(w.lower() != model.lower() and (w.count("-") >= 2 or ("-" in w and re.search(r"\d", w)))
               for w in IDENT.findall(text))


@dataclass(frozen=True)
class Value:
    """One statement of the field's value: as written, where, and as a comparable amount (a date, or a number and its precision)."""

    written: str
    where: str
    date: Optional[str] = None
    amount: Optional[Decimal] = None
    quantum: Optional[Decimal] = None  # the precision the number is written to ("0.6B": 0.1 billion)

    def agrees(self, other: "Value") -> bool:
        """The same value, a number written to a coarser precision included ("0.6B" agrees with "597M", "137M" not with "161 million")."""
        if self.date or other.date:
            return self.date == other.date
        if self.amount is None or other.amount is None:
            return False
        q = max(self.quantum, other.quantum)
        return (self.amount / q).quantize(Decimal(1), ROUND_HALF_UP) == (other.amount / q).quantize(Decimal(1), ROUND_HALF_UP)


def number(written: str, where: str) -> Optional[Value]:
    """A parameter count as written ("137M", "1.54 billion", "~1.04B") as a Value."""
    m = re.fullmatch(r"\s*~?\s*(\d+(?:\.(\d+))?)\s*(thousand|million|billion|[KMB])?\s*", written, re.I)
    if not m:
        return None
    scale = {"k": 3, "thousand": 3, "m": 6, "million": 6, "b": 9, "billion": 9}.get((m[3] or "").lower(), 0)
    return Value(written.strip(), where, amount=Decimal(m[1]).scaleb(scale), quantum=Decimal(1).scaleb(scale - len(m[2] or "")))


def field_values(corpus: Corpus, q: AuditedQuestion, answer_file: str) -> list[Value]:
    """Each statement of the field the question asks, over the documents about the answer file's model: its card, its release
    post, the other gold files (in the card: sentences naming no other model; elsewhere: sentences naming this model alone).

    Stated in prose, a count after a comparison ("fewer than 1 billion parameters") or beside another count in one sentence
    (a breakdown: "a text encoder (561M parameters) and a vision encoder (304M parameters)") is not the model's own."""
    key, meta = field_of(q), corpus.meta.get(answer_file, {})
    model = meta.get("model_name")
    if key not in ("release_date", "parameter_size") or not model:
        return []
    model = str(model)
    post = corpus.post_by_slug(meta.get("release_blog"))
    if key == "release_date":
        out = [Value(str(meta.get("release_date")), f"{answer_file} release_date", date=_date(meta.get("release_date")))]
        if post:
            published = corpus.meta[post].get("published_at")
            out.append(Value(str(published), f"{post} published_at (its release post)", date=_date(published)))
        return [v for v in out if v.date]
    out = [v for v in [number(str(meta.get("parameter_size") or ""), f"{answer_file} parameter_size")] if v]
    others = [n for n in corpus.cards() if n != model]
    for path in dict.fromkeys([answer_file, *q.gold_files, *([post] if post else [])]):
        body = FRONT_MATTER.sub("", corpus.texts.get(path, ""), count=1)
        for sentence in (s for ln in body.splitlines() for s in SENTENCE.split(ln)):
            named = _names(sentence, [model, *others])
            if not (named == [model] if path != answer_file else (model in named or not named)) or \
                    _other_identifiers(sentence.replace(model, " "), model):
                continue  # not about this model alone
            found = [m for m in PARAMS.finditer(sentence) if not COMPARED.search(sentence[max(0, m.start() - 16) : m.start()])]
            values = [v for m in found if (v := number(f"{m[1]}{m[2]}" if len(m[2]) == 1 else f"{m[1]} {m[2]}", f"{path}: {m[0]!r}"))]
            if len({v.amount for v in values}) == 1:
                out.append(values[0])
    return out


def disagreeing(values: list[Value]) -> list[Value]:
    """The values that disagree with the first (the answer file's own field), one per amount."""
    if not values:
        return []
    first, seen, out = values[0], set(), []
    for v in values[1:]:
        if not v.agrees(first) and (v.date, v.amount) not in seen:
            seen.add((v.date, v.amount))
            out.append(v)
    return out


def audit_one(q: AuditedQuestion, corpus: Corpus) -> Finding:
    f = Finding(q.id, q.type)
    kind = type_class(q.type)
    if kind is None:
        f.fail("unknown_type", f"{q.type!r}; known: {', '.join(sorted(TYPES))} and the importers' ({', '.join(sorted(IMPORTED_TYPES))}, "
                               "2hop..9hop, beir-*)")
        return f
    golds = [g for g in [q.answer, *q.aliases] if g and tokens(g)]
    if not q.gold_files:
        f.fail("no_gold_files")
        return f
    missing = [g for g in q.gold_files if g not in corpus.texts]
    if missing:
        f.fail("missing_gold_file", ", ".join(missing))
    present = [g for g in q.gold_files if g in corpus.texts]
    derived = kind in DERIVED or set(tokens(q.answer)) in POLAR
    holding = [g for g in present if corpus.occurs(g, golds) and asserts(corpus, g, golds)]
    if not holding and present and not derived:
        denied = [g for g in present if corpus.occurs(g, golds)]
        f.fail("gold_not_in_files", f"{q.answer!r} " + (f"only denied in {', '.join(denied)}" if denied else f"in none of {', '.join(present)}"))
    if occurs_in(q.question, golds):
        f.fail("answer_in_question", repr(q.answer))
    multi = kind == "multi-hop"
    if multi and len(q.gold_files) < 2:
        f.fail("multi_hop_one_file")
    if multi and len(holding) > 1:
        f.fail("answer_in_both_hops", f"{q.answer!r} in {', '.join(holding)}")
    if multi and len(holding) == 1:
        answer_file = holding[0]
        named = [e for e in entities(q.question) if corpus.greps(answer_file, e)]
        if named:
            f.fail("answer_file_names_entity", f"{answer_file} names {named[0]!r}")
        subject = [n for n in subject_names(corpus, answer_file) if len(tokens(n)) > 1 and occurs_in(q.question, [n])]
        if subject:
            f.fail("question_names_answer_file", f"{subject[0]!r} ({answer_file})")
    if not derived and (len(holding) == 1 if multi else holding):
        for path in holding:  # the gold is the value of the field asked, about the question's subject, not merely present
            names, titles = subject_names(corpus, path), titles_of(corpus, path)
            subjects = [*names, *titles] if multi else entities(q.question)
            verdict_, detail = fields.judge(q, corpus, path, golds, subjects, names, titles, own_subject=multi)
            if verdict_ != fields.OK:
                f.fail(verdict_, detail)
    if len(holding) == 1 or (holding and not multi and not derived):
        values = field_values(corpus, q, holding[-1])
        if other := disagreeing(values):
            f.fail("several_values", f"{values[0].written} ({values[0].where}) vs " + "; ".join(f"{v.written} ({v.where})" for v in other))
        elif other := measures_disagreeing(corpus, q, golds, present):
            f.fail("several_values", f"{q.answer} vs " + "; ".join(other))
    return f


def asserts(corpus: Corpus, path: str, golds: list[str]) -> bool:
    """Some line of the file states a gold, not only denies it ("38.4 metres, not 41 metres" denies 41 metres), as the grader's
    primary grade reads a claim."""
    from ..grading.correct import verdict
    from ..grading.normalize import contains

    for line in corpus.texts.get(path, "").splitlines():
        if line.strip() and contains(line, golds) == 1.0:
            v = verdict(line, golds)
            if not v.denied or any(contains(a, golds) == 1.0 for a in v.asserted) or not any(contains(d, golds) == 1.0 for d in v.denied):
                return True
    return False


def measures_disagreeing(corpus: Corpus, q: AuditedQuestion, golds: list[str], files: list[str]) -> list[str]:
    """A measurement answer (a number and a unit): other amounts in that unit that sentences of the gold files about the
    question's subject state ("41 metres" in a guidebook against a survey's "38.4 metres")."""
    gold = tokens(q.answer)
    if len(gold) != 2 or not re.fullmatch(r"-?\d+(?:\.\d+)?", gold[0]):
        return []
    names = [e for e in entities(q.question)]
    out = []
    for path in files:
        body = FRONT_MATTER.sub("", corpus.texts.get(path, ""), count=1)
        for sentence in (s for ln in body.splitlines() for s in SENTENCE.split(ln)):
            if occurs_in(sentence, golds) or not (names and occurs_in(sentence, names)):
                continue  # a sentence that states the answer (or denies others beside it), or is about something else
            toks = tokens(sentence)
            out += [f"{a} {u} ({path})" for a, u in zip(toks, toks[1:]) if u == gold[1] and a != gold[0] and re.fullmatch(r"-?\d+(?:\.\d+)?", a)]
    return list(dict.fromkeys(out))


def span_problems(q: AuditedQuestion, corpus: Corpus) -> list[tuple[str, str]]:
    """What is wrong with a question's `evidence` spans (grading reads them as its answer-bearing passages): a span's file
    is not in the corpus, its text does not stand in that file verbatim (whitespace collapsed, as evidence compares), or
    none of the spans holds the gold (a span without the gold is a bridge passage, one of them must bear the answer), unless
    the answer is worked out rather than stated (a comparison's or a yes/no question's: its spans are the facts compared)."""
    spans = [e for e in getattr(q, "evidence", None) or [] if isinstance(e, dict)]
    if not spans:
        return []
    out: list[tuple[str, str]] = []
    squash = lambda text: " ".join(str(text).split())  # noqa: E731
    golds = [g for g in [q.answer, *q.aliases] if g and tokens(g)]
    missing = sorted({e["file"] for e in spans if e.get("file") not in corpus.texts})
    if missing:
        out.append(("evidence_file_missing", ", ".join(missing)))
    absent = [e for e in spans if e.get("file") in corpus.texts and squash(e.get("text")) not in squash(corpus.texts[e["file"]])]
    if absent:
        out.append(("evidence_not_in_file", "; ".join(f"{e['file']}: {squash(e.get('text'))[:60]!r}" for e in absent)))
    derived = type_class(q.type) in DERIVED or set(tokens(q.answer)) in POLAR  # "yes" is worked out, never quoted
    if golds and not derived and not any(occurs_in(squash(e.get("text")), golds) for e in spans):
        out.append(("evidence_without_gold", f"{len(spans)} span(s), none holds {q.answer!r}"))
    return out


def audit(questions: list[AuditedQuestion], corpus: Corpus) -> list[Finding]:
    """A finding per question, in file order."""
    seen: set[str] = set()
    out = []
    for q in questions:
        f = audit_one(q, corpus)
        for reason, detail in span_problems(q, corpus):
            f.fail(reason, detail)
        if q.id in seen:
            f.fail("duplicate_id")
        seen.add(q.id)
        out.append(f)
    return out


def report(findings: list[Finding], questions: Optional[list[AuditedQuestion]] = None) -> str:
    """The audit as people read it: a table of checks, each failing question with its reasons, how many distinct facts the
    questions ask (questions/facts.py: reports resample facts), and a one-line verdict."""
    kinds = sorted({f.type or "-" for f in findings})
    rows = [("check", *kinds, "meaning")]
    for reason, meaning in REASONS.items():
        rows.append((reason, *(str(sum(reason in f.reasons and (f.type or "-") == k for f in findings)) for k in kinds), meaning))
    rows.append(("questions", *(str(sum((f.type or "-") == k for f in findings)) for k in kinds), ""))
    rows.append(("pass", *(str(sum(f.ok and (f.type or "-") == k for f in findings)) for k in kinds), ""))
    if questions:
        rows.append(("distinct facts", *(str(facts.count(q for q in questions if (q.type or "-") == k)[1]) for k in kinds),
                     "questions that ask one fact (answer file, normalised gold) count once in a report's CIs"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    failing = [f for f in findings if not f.ok]
    if failing:
        lines += ["", "failing questions:"]
        lines += [str(f) for f in failing]
    if any((f.type or "-") in DERIVED for f in findings):
        lines += ["", f"({', '.join(sorted(DERIVED))} answers are worked out from the files, not looked for in them)"]
    if questions:
        lines += ["", facts_line(questions)]
    lines += ["", verdict(findings)]
    return "\n".join(lines)


def facts_line(questions: list[AuditedQuestion]) -> str:
    """"N questions, M distinct facts", by type where a type shares facts, and the fact most asked."""
    n, m, per = facts.count(questions)
    kinds = sorted({q.type or "-" for q in questions})
    shared = [f"{k}: {a} questions, {b} facts" for k in kinds for a, b, _ in [facts.count(q for q in questions if (q.type or "-") == k)] if a != b]
    top, times = per.most_common(1)[0] if per else ("", 0)
    return (f"{n} questions, {m} distinct facts" + (f" ({'; '.join(shared)})" if shared else "")
            + (f"; the most asked, {top!r}, by {times} questions" if times > 1 else "") + ".")


def verdict(findings: list[Finding]) -> str:
    failing = [f for f in findings if not f.ok]
    if not failing:
        return f"audit passed: all {len(findings)} questions"
    return f"audit failed: {len(failing)} of {len(findings)} questions ({', '.join(f.id for f in failing[:12])}{', ...' if len(failing) > 12 else ''})"
