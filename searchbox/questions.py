"""Question sets built from a corpus's front matter: `python -m searchbox.questions build CORPUS.zip --out Q.jsonl`.

Single-hop questions ask one front-matter fact of one document. Multi-hop questions chain two
documents: the entity named in the question lives in one, the fact that answers it in the other
(a model card links the blog post that announced it; a post announces a model whose card holds the
fact; a card names the model that superseded it). Every gold answer is checked to occur verbatim in
its gold files, and the output is deterministic for a given corpus.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sys
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, Optional

import yaml

from .errors import SearchboxError, cli

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


# ---- reading a corpus ------------------------------------------------------------------------
def read_corpus(source: Path) -> list[Doc]:
    """Markdown documents with front matter, keyed as the dataroom will show them (wrapper folder stripped)."""
    from .dataroom import _wrapper_prefix  # the one rule for stripping a single top folder

    source = Path(source)
    if source.is_dir():
        raw = {p.relative_to(source).as_posix(): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file() and not p.is_symlink()}
        strip = 0
    elif zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as zf:
            raw = {i.filename: zf.read(i) for i in zf.infolist() if not i.is_dir()}
        strip = _wrapper_prefix([tuple(PurePosixPath(n).parts) for n in raw])
    elif source.exists():
        raise SearchboxError(f"{source}: not a zip archive or a folder")
    else:
        raise SearchboxError(f"{source}: no such file")
    docs = []
    for name, data in sorted(raw.items()):
        if not name.endswith(".md"):
            continue
        text = data.decode("utf-8", errors="replace")
        match = FRONT_MATTER.match(text)
        if not match:
            continue
        try:
            meta = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            continue  # a document whose front matter is not YAML yields no questions
        if isinstance(meta, dict):
            docs.append(Doc("/".join(PurePosixPath(name).parts[strip:]), meta, text))
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
                    aliases = _date_aliases(answer) if key == "release_date" else []
                    yield Built("", question.format(model=model), answer, aliases, [doc.path], "single-hop", template)
        elif doc.is_post:
            title = _scalar(doc.meta["title"])
            if not title:
                continue
            published = _date(doc.meta.get("published_at"))
            if published:
                yield Built("", f"On what date was the article {_quoted(title)} published?", published, _date_aliases(published),
                            [doc.path], "single-hop", "post_date")
            author = _single_author(doc.meta)
            if author:
                yield Built("", f"Who is the author of the article {_quoted(title)}?", author, [], [doc.path], "single-hop", "post_author")


def multi_hop(docs: list[Doc]) -> Iterator[Built]:
    posts = {_scalar(d.meta.get("slug")): d for d in docs if d.is_post and _scalar(d.meta.get("slug"))}
    cards = {_scalar(d.meta["model_name"]): d for d in docs if d.is_card and _scalar(d.meta["model_name"])}
    announced: dict[str, list[Doc]] = {}  # post path -> cards whose release blog it is
    for model, card in sorted(cards.items()):
        post = posts.get(_slug(card.meta.get("release_blog")))
        if post is None or model not in post.text:
            continue  # the chain must be followable: the post has to name the model
        announced.setdefault(post.path, []).append(card)
        # entity in the card (its release blog), fact in the post
        published = _date(post.meta.get("published_at"))
        if published:
            yield Built("", f"On what date was the blog post that announced {model} published?", published, _date_aliases(published),
                        [card.path, post.path], "multi-hop", "card_to_post_date")
        author = _single_author(post.meta)
        if author:
            yield Built("", f"Who wrote the blog post that announced {model}?", author, [], [card.path, post.path], "multi-hop", "card_to_post_author")
    by_path = {d.path: d for d in docs}
    for post_path, its_cards in sorted(announced.items()):
        if len(its_cards) != 1:
            continue  # a post announcing several models makes "that model" ambiguous
        post, card = by_path[post_path], its_cards[0]
        title = _scalar(post.meta["title"])
        for key, template, phrase in (("parameter_size", "post_to_card_parameters", "What is that model's parameter count?"),
                                      ("license", "post_to_card_license", "What license is that model distributed under?")):
            answer = _card_fact(card, key)
            if title and answer:
                yield Built("", f"The article {_quoted(title)} announces a model. {phrase}", answer, [], [post.path, card.path], "multi-hop", template)
    for model, card in sorted(cards.items()):
        named = card.meta.get("deprecated_by")
        named = named if isinstance(named, list) else [named]
        if len(named) != 1:
            continue  # several successors make "the model that superseded it" ambiguous
        successor = cards.get(_scalar(named[0]))
        if successor is None or successor is card:
            continue
        for key, template, phrase in (("parameter_size", "successor_parameters", "What is the parameter count of the model that superseded it?"),
                                      ("release_date", "successor_release_date", "On what date was the model that superseded it released?")):
            answer = _card_fact(successor, key)
            if answer:
                aliases = _date_aliases(answer) if key == "release_date" else []
                yield Built("", f"The model {model} has been superseded. {phrase}", answer, aliases, [card.path, successor.path], "multi-hop", template)


# ---- the builder ----------------------------------------------------------------------------------
def answer_in_gold(q: Built, texts: dict[str, str]) -> bool:
    """The gold answer occurs verbatim in one of the question's gold files."""
    return any(q.answer in texts.get(path, "") for path in q.gold_files)


def needs_both_hops(q: Built, texts: dict[str, str]) -> bool:
    """A multi-hop question whose answer already sits in its first (entity) document is a shortcut, not two hops."""
    return q.type != "multi-hop" or q.answer not in texts.get(q.gold_files[0], "")


def build(source: Path, prefix: str = "q") -> list[Built]:
    """All questions of a corpus: validated, de-duplicated, shuffled with a fixed seed and numbered."""
    docs = read_corpus(source)
    if not docs:
        raise SearchboxError(f"{source}: no markdown documents with front matter to build questions from")
    texts = {d.path: d.text for d in docs}
    seen: set[str] = set()
    out = []
    for q in [*single_hop(docs), *multi_hop(docs)]:
        if q.question in seen or not answer_in_gold(q, texts) or not needs_both_hops(q, texts):
            continue
        seen.add(q.question)
        out.append(q)
    random.Random(SHUFFLE_SEED).shuffle(out)
    for n, q in enumerate(out, 1):
        q.id = f"{prefix}{n:03d}"
    return out


def dumps(questions: Iterable[Built]) -> str:
    return "".join(json.dumps(asdict(q), ensure_ascii=False) + "\n" for q in questions)


def builtin_questions() -> Path:
    """The question set built from the packaged default corpus (searchbox/builtin/jina-questions.jsonl)."""
    from importlib import resources

    return Path(str(resources.files("searchbox") / "builtin" / "jina-questions.jsonl"))


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.questions", description="Build question sets from a corpus.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="derive single-hop and two-hop questions from the documents' front matter")
    b.add_argument("corpus", type=Path, help="zip or folder of markdown documents with YAML front matter")
    b.add_argument("--out", type=Path, required=True, help="question file to write (jsonl)")
    b.add_argument("--prefix", default="q", help="question id prefix")
    args = parser.parse_args(argv)
    questions = build(args.corpus, args.prefix)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps(questions), encoding="utf-8")
    except OSError as exc:
        raise SearchboxError(f"{args.out}: cannot write ({exc.strerror or exc})") from exc
    kinds = {t: sum(q.type == t for q in questions) for t in ("single-hop", "multi-hop")}
    print(f"{len(questions)} questions ({kinds['single-hop']} single-hop, {kinds['multi-hop']} multi-hop) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
