"""Question sets built from a corpus's front matter, and audited: `python -m searchbox.questions build|audit`.

    python -m searchbox.questions build CORPUS.zip --out Q.jsonl
    python -m searchbox.questions audit Q.jsonl CORPUS.zip

Single-hop questions ask one front-matter fact of one document. Multi-hop questions chain two
documents: the entity named in the question lives in one, the fact that answers it in the other
(a model card links the blog post that announced it; a post announces a model whose card holds the
fact; a card names the model that superseded it). Each answer comes with aliases in the formats the
corpus writes it (a date as written in the front matter and in words, a license's SPDX id and long
names, a number as the gold file writes it). The builder keeps only questions that pass the audit
(searchbox.questions.audit), so a built set audits clean; the output is deterministic for a given corpus.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

import yaml

from ..errors import ArgParser, SearchboxError, cli
from ..corpus.dataroom import corpus_texts
from ..grading.qfile import records
from .audit import Corpus, Finding, audit, audit_one, report

FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)
SHUFFLE_SEED = 20260101  # fixed: any prefix of the file (questions.limit=N) mixes single- and multi-hop
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")


@dataclass(frozen=True)
class Doc:
    """One corpus file: its dataroom-relative path, parsed front matter and full text."""

    path: str
    meta: dict
    text: str

    @property
    def is_card(self) -> bool:
        return "model_name" in self.meta

    @property
    def is_post(self) -> bool:
        return "title" in self.meta and not self.is_card


@dataclass
class Built:
    """One line of a question file (the shape searchbox.grading.load_questions reads)."""

    id: str
    question: str
    answer: str
    aliases: list[str] = field(default_factory=list)
    gold_files: list[str] = field(default_factory=list)
    type: str = "single-hop"  # single-hop | multi-hop
    template: str = ""  # which generator made it (for analysis by question kind)
    # the answer-bearing passages, as grading reads them (grading/qfile.py): [{"file": gold file, "text": its line that
    # states the fact, verbatim}]; evidence_recall counts these reaching the agent (grading/evidence.py)
    evidence: list[dict] = field(default_factory=list)


# ---- reading a corpus ------------------------------------------------------------------------
def read_corpus(source: Path) -> list[Doc]:
    """Markdown documents with front matter, keyed as the dataroom will show them."""
    docs = []
    for name, text in corpus_texts(source).items():
        if not name.endswith(".md"):
            continue
        match = FRONT_MATTER.match(text)
        if not match:
            continue
        try:
            meta = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            continue  # a document whose front matter is not YAML yields no questions
        if isinstance(meta, dict):
            docs.append(Doc(name, meta, text))
    return docs


# ---- value formatting ------------------------------------------------------------------------
def _scalar(value) -> Optional[str]:
    """A front-matter value as answer text, or None when it is missing or not a single value."""
    if value is None or isinstance(value, (list, dict, bool)):
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()[:10]
    text = str(value).strip()
    return text or None


def _date(value) -> Optional[str]:
    text = _scalar(value)
    return text[:10] if text and re.match(r"\d{4}-\d{2}-\d{2}", text) else None


def _date_aliases(iso: str) -> list[str]:
    y, m, d = (int(p) for p in iso.split("-"))
    month = MONTHS[m - 1]
    return [f"{month} {d}, {y}", f"{d} {month} {y}"]


# SPDX id -> the long names people write; the grader reads these too, the aliases make a set graded the same by any grader
LICENSE_NAMES = {
    "Apache-2.0": ["Apache License 2.0", "Apache License, Version 2.0", "Apache 2.0"],
    "MIT": ["MIT License"],
    "CC-BY-4.0": ["CC BY 4.0", "Creative Commons Attribution 4.0", "Creative Commons Attribution 4.0 International"],
    "CC-BY-NC-4.0": ["CC BY-NC 4.0", "Creative Commons Attribution-NonCommercial 4.0",
                     "Creative Commons Attribution-NonCommercial 4.0 International"],
    "CC-BY-SA-4.0": ["CC BY-SA 4.0", "Creative Commons Attribution-ShareAlike 4.0"],
    "CC-BY-NC-SA-4.0": ["CC BY-NC-SA 4.0", "Creative Commons Attribution-NonCommercial-ShareAlike 4.0"],
}
NUMBER_AS_WRITTEN = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\d,])|(?<![\w.])\d+(?:\.\d+)?(?:\s?(?:[KMBk]\b|thousand\b|million\b|billion\b))?")


def _written(doc: Doc, key: str) -> Optional[str]:
    """A front-matter value exactly as the file writes it (a timestamp with its time and zone), quotes removed."""
    front = FRONT_MATTER.match(doc.text)
    m = re.search(rf"^{re.escape(key)}:[ \t]*(.+?)[ \t]*$", front.group(1), re.MULTILINE) if front else None
    return m.group(1).strip("\"'") if m else None


def _number_aliases(answer: str, text: str) -> list[str]:
    """The answer's number in the other ways the gold file writes it: "137 million" for 137M, "8,192" for 8K (K of tokens)."""
    from ..grading.normalize import tokens

    want = [tokens(answer)]
    kilo = re.fullmatch(r"(\d+)\s?[Kk]", answer.strip())
    if kilo:
        want.append([str(int(kilo[1]) * 1024)])  # token lengths: "8K" is 8,192 tokens
    found = [m[0] for m in NUMBER_AS_WRITTEN.finditer(text)]
    return [w for w in dict.fromkeys(found) if w != answer and tokens(w) in want]


def aliases_for(key: str, answer: str, doc: Doc) -> list[str]:
    """The other ways the corpus writes one answer, for a question about front-matter field `key` of `doc`."""
    if key in ("release_date", "published_at"):
        written = _written(doc, key)
        return list(dict.fromkeys([*_date_aliases(answer), *([written] if written and written != answer else [])]))
    if key == "license":
        return list(LICENSE_NAMES.get(answer, []))
    if key in ("parameter_size", "token_length", "output_dimension"):
        return _number_aliases(answer, doc.text)
    return []


def _single_author(meta: dict, organisation: str = "Jina AI") -> Optional[str]:
    """The post's author when there is exactly one person (an organisation byline is too easy to guess)."""
    authors = _scalar(meta.get("authors"))
    if not authors or "," in authors or " and " in authors or authors == organisation:
        return None
    return authors


def _slug(link) -> Optional[str]:
    text = _scalar(link)
    return text.rstrip("/").rsplit("/", 1)[-1] if text else None


def _quoted(title: str) -> str:
    return f"'{title}'" if '"' in title else f'"{title}"'


# ---- generators --------------------------------------------------------------------------------
CARD_FACTS = (  # (field, template, question)
    ("release_date", "card_release_date", "What is the release date of the model {model}?"),
    ("parameter_size", "card_parameters", "What is the parameter count of the model {model}?"),
    ("license", "card_license", "What license is the model {model} distributed under?"),
    ("token_length", "card_input_length", "What is the maximum input length, in tokens, of {model}?"),
    ("output_dimension", "card_dimension", "What is the dimension of the embeddings that {model} outputs?"),
)


def _card_fact(card: Doc, key: str) -> Optional[str]:
    return _date(card.meta.get(key)) if key == "release_date" else _scalar(card.meta.get(key))


def single_hop(docs: list[Doc]) -> Iterator[Built]:
    for doc in docs:
        if doc.is_card:
            model = _scalar(doc.meta["model_name"])
            for key, template, question in CARD_FACTS:
                answer = _card_fact(doc, key)
                if model and answer:
                    yield Built("", question.format(model=model), answer, aliases_for(key, answer, doc), [doc.path], "single-hop", template)
        elif doc.is_post:
            title = _scalar(doc.meta["title"])
            if not title:
                continue
            published = _date(doc.meta.get("published_at"))
            if published:
                yield Built("", f"On what date was the article {_quoted(title)} published?", published,
                            aliases_for("published_at", published, doc), [doc.path], "single-hop", "post_date")
            author = _single_author(doc.meta)
            if author:
                yield Built("", f"Who is the author of the article {_quoted(title)}?", author, [], [doc.path], "single-hop", "post_author")


def multi_hop(docs: list[Doc]) -> Iterator[Built]:
    posts = {_scalar(d.meta.get("slug")): d for d in docs if d.is_post and _scalar(d.meta.get("slug"))}
    cards = {_scalar(d.meta["model_name"]): d for d in docs if d.is_card and _scalar(d.meta["model_name"])}
    announced: dict[str, list[Doc]] = {}  # post path -> cards whose release blog it is
    for model, card in sorted(cards.items()):
        post = posts.get(_slug(card.meta.get("release_blog")))
        if post is None:
            continue
        announced.setdefault(post.path, []).append(card)
        # entity in the card, fact in the post: the hop is the card's release_blog link (a post that names the model
        # too is reachable with one grep for the name; the audit drops those)
        published = _date(post.meta.get("published_at"))
        if published:
            yield Built("", f"On what date was the blog post that announced {model} published?", published,
                        aliases_for("published_at", published, post), [card.path, post.path], "multi-hop", "card_to_post_date")
        author = _single_author(post.meta)
        if author:
            yield Built("", f"Who wrote the blog post that announced {model}?", author, [], [card.path, post.path], "multi-hop", "card_to_post_author")
    by_path = {d.path: d for d in docs}
    for post_path, its_cards in sorted(announced.items()):
        post = by_path[post_path]
        if len(its_cards) != 1 or _scalar(its_cards[0].meta["model_name"]) not in post.text:
            continue  # "that model" must be the one model the post announces, and the post must name it: the hop is the name
        card, title = its_cards[0], _scalar(post.meta["title"])
        for key, template, phrase in (("parameter_size", "post_to_card_parameters", "What is that model's parameter count?"),
                                      ("license", "post_to_card_license", "What license is that model distributed under?"),
                                      ("token_length", "post_to_card_input_length", "What is that model's maximum input length, in tokens?"),
                                      ("output_dimension", "post_to_card_dimension", "What is the dimension of the embeddings that model outputs?")):
            answer = _card_fact(card, key)
            if title and answer:
                yield Built("", f"The article {_quoted(title)} announces a model. {phrase}", answer, aliases_for(key, answer, card),
                            [post.path, card.path], "multi-hop", template)
    for model, card in sorted(cards.items()):
        named = card.meta.get("deprecated_by")
        named = named if isinstance(named, list) else [named]
        if len(named) != 1:
            continue  # several successors make "the model that superseded it" ambiguous
        successor = cards.get(_scalar(named[0]))
        if successor is None or successor is card:
            continue
        for key, template, phrase in (("parameter_size", "successor_parameters", "What is the parameter count of the model that superseded it?"),
                                      ("release_date", "successor_release_date", "On what date was the model that superseded it released?"),
                                      ("license", "successor_license", "What license is the model that superseded it distributed under?"),
                                      ("token_length", "successor_input_length", "What is the maximum input length, in tokens, of the model that superseded it?"),
                                      ("output_dimension", "successor_dimension", "What is the dimension of the embeddings that the model that superseded it outputs?")):
            answer = _card_fact(successor, key)
            if answer:
                yield Built("", f"The model {model} has been superseded. {phrase}", answer, aliases_for(key, answer, successor),
                            [card.path, successor.path], "multi-hop", template)


TEMPLATE_FIELDS = {"date": ("published_at", "release_date"), "author": ("authors", "author"), "parameters": ("parameter_size",),
                   "license": ("license",), "input_length": ("token_length",), "dimension": ("output_dimension",)}


def stated_in(q: Built, docs: list[Doc]) -> list[dict]:
    """The passage of the answer's file that states the fact: its front-matter line of the template's field (the list
    item that holds the answer, for a list), verbatim; [] when none holds the answer (the audit then says why)."""
    from ..grading.normalize import contains

    by_path = {d.path: d for d in docs}
    doc = by_path.get(q.gold_files[-1]) if q.gold_files else None  # the last gold file is the one that answers
    front = FRONT_MATTER.match(doc.text) if doc else None
    keys = next((k for suffix, k in TEMPLATE_FIELDS.items() if q.template.endswith(suffix) or q.template.endswith(suffix + "s")), ())
    if not front or not keys:
        return []
    golds = [q.answer, *q.aliases]
    lines, out, inside = front.group(1).splitlines(), [], False
    for line in lines:
        if re.match(r"^[\w-]+:", line):
            inside = any(line.startswith(k + ":") for k in keys)
        if inside and line.strip() and contains(line, golds):
            out.append({"file": doc.path, "text": line.strip()})
    return out[:1]


# ---- the builder ----------------------------------------------------------------------------------
def build(source: Path, prefix: str = "q") -> list[Built]:
    """All questions of a corpus that pass the audit: de-duplicated, shuffled with a fixed seed and numbered."""
    return build_audited(source, prefix)[0]


def build_audited(source: Path, prefix: str = "q") -> tuple[list[Built], list[Finding]]:
    """The questions that pass the audit, and the findings of those it dropped (ids are the candidates' own, `?N`)."""
    texts = corpus_texts(source)
    docs = read_corpus(source)
    if not docs:
        raise SearchboxError(f"{source}: no markdown documents with front matter to build questions from")
    corpus = Corpus.of(texts)
    seen: set[str] = set()
    out, dropped = [], []
    for n, q in enumerate([*single_hop(docs), *multi_hop(docs)], 1):
        if q.question in seen:
            continue
        seen.add(q.question)
        q.id = f"?{n}"
        q.evidence = stated_in(q, docs)
        finding = audit_one(q, corpus)
        (out if finding.ok else dropped).append(q if finding.ok else finding)
    random.Random(SHUFFLE_SEED).shuffle(out)
    for n, q in enumerate(out, 1):
        q.id = f"{prefix}{n:03d}"
    return out, dropped


def dumps(questions: Iterable[Built]) -> str:
    return "".join(json.dumps(asdict(q), ensure_ascii=False) + "\n" for q in questions)


def builtin_questions() -> Path:
    """The question set built from the packaged default corpus (searchbox/builtin/jina-questions.jsonl)."""
    from importlib import resources

    return Path(str(resources.files("searchbox") / "builtin" / "jina-questions.jsonl"))


def load(path: Path) -> list[Built]:
    """A question file as the audit reads it (the builder's `template` kept); checked as every reader checks it (grading/qfile.py)."""
    out = [Built(r["id"], r["question"], r["answer"], r["aliases"], r["gold_files"], r["type"], r["template"], r["evidence"])
           for r in records(path, duplicates=True)]
    if not out:
        raise SearchboxError(f"{path}: no questions")
    return out


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = ArgParser(prog="python -m searchbox.questions", description="Build question sets from a corpus, and audit them.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="derive single-hop and two-hop questions from the documents' front matter (audited)")
    b.add_argument("corpus", type=Path, help="zip or folder of markdown documents with YAML front matter")
    b.add_argument("--out", type=Path, required=True, help="question file to write (jsonl)")
    b.add_argument("--prefix", default="q", help="question id prefix")
    a = sub.add_parser("audit", help="check every question of a set against its corpus; exit 0 when all pass, 1 when any fails")
    a.add_argument("questions", type=Path, help="question file (jsonl)")
    a.add_argument("corpus", type=Path, help="zip or folder the questions are about")
    args = parser.parse_args(argv)
    if args.cmd == "audit":
        questions = load(args.questions)
        findings = audit(questions, Corpus.of(corpus_texts(args.corpus)))
        print(report(findings, questions))
        return 0 if all(f.ok for f in findings) else 1
    questions, dropped = build_audited(args.corpus, args.prefix)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps(questions), encoding="utf-8")
    except OSError as exc:
        raise SearchboxError(f"{args.out}: cannot write ({exc.strerror or exc})") from exc
    kinds = {t: sum(q.type == t for q in questions) for t in ("single-hop", "multi-hop")}
    reasons = Counter(r for f in dropped for r in f.reasons)
    why = f"; {len(dropped)} dropped by the audit ({', '.join(f'{r} {n}' for r, n in reasons.most_common())})" if dropped else ""
    print(f"{len(questions)} questions ({kinds['single-hop']} single-hop, {kinds['multi-hop']} multi-hop){why} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
