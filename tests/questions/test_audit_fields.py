"""The audit reads front matter as a grep would, and checks that a gold is the value of what its question asks (issue 29.3):
defects planted in a small corpus, each with its own reason, beside clean questions that must pass."""

from __future__ import annotations

import time

import pytest

from searchbox.questions.audit import Corpus, audit_one
from searchbox.questions.build import Built
from searchbox.questions.fields import asked_field

FILES = {
    # a card and its successor; the successor's front matter names the card it replaces (the packaged set's related_models)
    "kx-one.md": '---\nmodel_name: "kx-one"\nlicense: "MIT"\nrelease_date: "2023-05-01"\ndeprecated_by:\n  - kx-two\n---\n# kx-one\n\nThe first.\n',
    "kx-two.md": ('---\nmodel_name: "kx-two"\nlicense: "Apache-2.0"\nrelease_date: "2024-01-02"\nupdated: "2024-06-01"\n'
                  'related_models:\n  - kx-one\n---\n# kx-two\n\nThe second model.\n'),
    "kx-three.md": '---\nmodel_name: "kx-three"\nlicense: "CC-BY-4.0"\n---\n# kx-three\n\nThe third.\n',
    "kx-four.md": '---\nmodel_name: "kx-four"\nlicense: "MIT"\ndeprecated_by:\n  - kx-three\n---\n# kx-four\n\nOld.\n',
    "paper.md": ('---\ntitle: "Sparse Lanterns"\nauthors:\n  - Ann Writer\n  - Bob Smith\n  - Cy Dee\n  - Dana Whit\n'
                 'published_at: 2024-02-03\n---\n# Sparse Lanterns\n\nA paper.\n'),
    "note.md": '---\ntitle: "Field Notes"\nauthors: "Ann Writer, Bob Smith, Cy Dee and Dana Whit"\n---\n# Field Notes\n\nNotes.\n',
    "solo.md": '---\ntitle: "Lone Post"\nauthors: "Eve Quill"\n---\n# Lone Post\n\nBy one hand.\n',
    "gannet.md": "# Gannet Rock\n\nGannet Rock lighthouse was first lit in 1856.\n",
    "vell.md": "# Little Vell\n\nLittle Vell lighthouse was restored in 1902 by Tobias Wren.\n",
    "staff.md": "# Staff and trustees\n\n- **Ines Calloway**, director since 2019.\n- **Tobias Wren**, head of conservation. He led the Skerrow Point restoration.\n",
    "tower.md": "# Gannet Rock survey\n\nSurveyed: 2022\n\nThe tower was found sound. Its lamp dates from 1856.\n",
    "keepers.md": ("# Gannet Rock keepers\n\nRobert Stevenson designed its lamp in 1861.\n\n"
                   "Nearby, Little Vell was restored in 1902.\n"),
}


@pytest.fixture(scope="module")
def corpus():
    return Corpus.of(FILES)


def q(question, answer, gold_files, type_="single-hop", template=""):
    return Built("x", question, answer, [], gold_files, type_, template)


def test_a_shortcut_in_front_matter_fails(corpus):
    """The answer file names the question's entity only in its front matter (`related_models: - kx-one`): one grep for
    kx-one lands on kx-two, past the bridge. The audit read bodies only and passed it (39 of 57 packaged multi-hop)."""
    shortcut = q("The model kx-one has been superseded. What license is the model that superseded it distributed under?", "Apache-2.0",
                 ["kx-one.md", "kx-two.md"], "multi-hop", "successor_license")
    assert audit_one(shortcut, corpus).reasons == ["answer_file_names_entity"]
    assert "kx-one" in audit_one(shortcut, corpus).details[0]
    clean = q("The model kx-four has been superseded. What license is the model that superseded it distributed under?", "CC-BY-4.0",
              ["kx-four.md", "kx-three.md"], "multi-hop", "successor_license")
    assert audit_one(clean, corpus).ok, audit_one(clean, corpus)


def test_a_gold_the_file_states_for_another_field_fails(corpus):
    found = audit_one(q("What is the release date of the model kx-two?", "2024-06-01", ["kx-two.md"], template="card_release_date"), corpus)
    assert found.reasons == ["gold_is_other_field"] and "updated" in found.details[0]
    # asked in words, no template: the same
    assert audit_one(q("When was kx-two released?", "2024-06-01", ["kx-two.md"]), corpus).reasons == ["gold_is_other_field"]
    assert audit_one(q("When was kx-two released?", "2024-01-02", ["kx-two.md"]), corpus).ok
    assert audit_one(q("When was kx-two last updated?", "2024-06-01", ["kx-two.md"]), corpus).ok


def test_one_of_four_authors_fails(corpus):
    for path, title in (("paper.md", "Sparse Lanterns"), ("note.md", "Field Notes")):  # a YAML list, and a list in text
        found = audit_one(q(f'Who wrote the article "{title}"?', "Bob Smith", [path]), corpus)
        assert found.reasons == ["gold_is_part_of_value"], (path, found)
        assert "4 items" in found.details[0]
    assert audit_one(q('Who wrote the article "Lone Post"?', "Eve Quill", ["solo.md"], template="post_author"), corpus).ok
    assert audit_one(q('Who is the author of the article "Field Notes"?', "Ann Writer, Bob Smith, Cy Dee and Dana Whit", ["note.md"]),
                     corpus).ok  # all four is the value


def test_a_gold_file_that_holds_the_value_by_accident_fails(corpus):
    """1902 is in vell.md, but about Little Vell's restoration, not about Gannet Rock; kx-three's card states a license, of
    another model than the one asked."""
    found = audit_one(q("In what year was the Gannet Rock lighthouse restored?", "1902", ["vell.md"]), corpus)
    assert found.reasons == ["gold_file_off_subject"], found
    found = audit_one(q("What license is the model kx-four distributed under?", "CC-BY-4.0", ["kx-three.md"], template="card_license"), corpus)
    assert found.reasons == ["gold_file_off_subject"], found
    # on subject: the sentence names it; a list item that names it; a file about it whose passage names nothing else
    assert audit_one(q("In what year was the Gannet Rock lighthouse first lit?", "1856", ["gannet.md"]), corpus).ok
    assert audit_one(q("Who led the restoration of Skerrow Point lighthouse?", "Tobias Wren", ["staff.md"]), corpus).ok
    assert audit_one(q("How old is the lamp of the Gannet Rock tower?", "1856", ["tower.md"]), corpus).ok
    # in a file about Gannet Rock: a person beside the date is no other subject; Little Vell, with a file of its own, is
    assert audit_one(q("When was the lamp of the Gannet Rock lighthouse designed?", "1861", ["keepers.md"]), corpus).ok
    found = audit_one(q("When was the Gannet Rock lighthouse restored?", "1902", ["keepers.md"]), corpus)
    assert found.reasons == ["gold_file_off_subject"], found
    assert audit_one(q("What license is the model kx-three distributed under?", "CC-BY-4.0", ["kx-three.md"], template="card_license"), corpus).ok


def test_the_field_asked_is_read_from_the_template_then_the_words():
    assert asked_field(q("Under which license is kx-one released?", "MIT", [])) == "license"
    assert asked_field(q("Who wrote the blog post that announced kx-one?", "A", [])) == "authors"
    assert asked_field(q("On what date was the blog post that announced kx-one published?", "A", [])) == "published_at"
    assert asked_field(q("On what date was the model that superseded it released?", "A", [])) == "release_date"
    assert asked_field(q("Anything?", "A", [], template="post_date")) == "published_at"
    assert asked_field(q("How tall is the Gannet Rock lighthouse?", "38.4 metres", [])) is None
    # a title's words ask nothing (the seed set's jq118, jq119 were read as asking a dimension)
    title = '"Does Subspace Cosine Similarity Imply High-Dimensional Cosine Similarity?"'
    assert asked_field(q(f"When was the article {title} first published? Give the date.", "A", [])) == "published_at"
    assert asked_field(q(f"Who wrote the article {title}?", "A", [])) == "authors"
    assert asked_field(q("What is the release date of jina-embeddings-8k-tokens?", "A", [])) == "release_date"


def test_the_field_checks_are_linear_on_a_big_file():
    """A gold file of 20,000 lines, each holding the gold off subject: judged in one pass, in seconds."""
    big = "# Little Vell\n\n" + "".join(f"Little Vell record {i}: restored in 1902.\n" for i in range(20_000))
    corpus = Corpus.of({"big.md": big})
    start = time.perf_counter()
    found = audit_one(q("In what year was the Gannet Rock lighthouse restored?", "1902", ["big.md"]), corpus)
    assert found.reasons == ["gold_file_off_subject"]
    assert time.perf_counter() - start < 30


def test_a_line_of_spaces_does_not_stall_the_field_checks():
    """A label line with 200,000 spaces before its end (a lazy `(.*?)\\s*$` backtracks on it quadratically)."""
    spaces = " " * 200_000
    text = f"---\ntitle: \"Gannet Rock\"{spaces}x\nreleased: 1902{spaces}x\n---\n# Gannet Rock{spaces}#x\n\nReleased: 1902{spaces}x\n"
    corpus = Corpus.of({"g.md": text})
    start = time.perf_counter()
    audit_one(q("When was the Gannet Rock lighthouse released?", "1902", ["g.md"]), corpus)
    assert time.perf_counter() - start < 20


@pytest.mark.parametrize("fmt, source", [("browsecomp-plus", "browsecomp-plus"), ("hotpotqa", "hotpotqa_distractor.json"),
                                         ("musique", "musique.jsonl"), ("longmemeval", "longmemeval_s.json"), ("beir", "beir")])
def test_the_importers_types_are_audited_by_their_class(tmp_path, fmt, source):
    """The importers write the data sets' own type names (MuSiQue's 2hop, LongMemEval's multi-session, ...): the audit reads
    each as its class of question instead of refusing every imported question as unknown_type; a typo is still refused."""
    from pathlib import Path

    from searchbox.datasets.cli import do_import
    from searchbox.questions.audit import type_class

    fixtures = Path(__file__).resolve().parents[1] / "datasets" / "fixtures"
    do_import(fmt, fixtures / source, tmp_path / "d")
    import json

    types = {json.loads(line)["type"] for line in (tmp_path / "d" / "questions.jsonl").read_text().splitlines() if line.strip()}
    assert types and all(type_class(t) is not None for t in types), types
    assert type_class("multihop") is None and type_class("3hop2") == "multi-hop" and type_class("temporal-reasoning") == "aggregate"
