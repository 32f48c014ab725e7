"""The question builder: valid questions whose gold answers occur in their gold files, deterministic, strict input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections import Counter

import pytest

from searchbox.dataroom import open_workspace
from searchbox.grading import load_questions
from searchbox.questions import build, builtin_questions, dumps, main

CORPUS = builtin_questions().with_name("jina-corpus.zip")


@pytest.fixture(scope="module")
def built():
    return build(CORPUS, "jq")


def test_questions_are_valid_and_answered_by_their_gold_files(built, tmp_path):
    ws = open_workspace(tmp_path / "run", CORPUS)  # the dataroom exactly as a run sees it
    assert len(built) > 300
    kinds = Counter(q.type for q in built)
    assert set(kinds) == {"single-hop", "multi-hop"} and kinds["multi-hop"] >= 50
    assert len({q.id for q in built}) == len(built) == len({q.question for q in built})
    for q in built:
        assert q.question.endswith("?") and q.answer
        assert len(q.gold_files) == (1 if q.type == "single-hop" else 2)
        texts = [(ws.dataroom / g).read_text(encoding="utf-8") for g in q.gold_files]  # gold paths exist in the dataroom
        assert any(q.answer in t for t in texts), q
    for q in (q for q in built if q.type == "multi-hop"):
        first, second = q.gold_files
        assert first != second
        assert q.answer not in (ws.dataroom / first).read_text(encoding="utf-8")  # the entity document alone does not answer


def test_multi_hop_chains_two_documents(built, tmp_path):
    ws = open_workspace(tmp_path / "run", CORPUS)
    chains = [q for q in built if q.template == "card_to_post_date"]
    assert chains
    for q in chains:
        card, post = ((ws.dataroom / g).read_text(encoding="utf-8") for g in q.gold_files)
        slug = post.split("slug:", 1)[1].split()[0]
        assert slug in card  # the card links the post ...
        assert q.answer in post and q.answer not in card  # ... and only the post holds the answer: no one-hop shortcut


def test_shipped_file_is_what_the_builder_makes(built):
    shipped = builtin_questions().read_text(encoding="utf-8")
    assert shipped == dumps(built)  # deterministic: rebuilding reproduces the committed file byte for byte
    assert dumps(build(CORPUS, "jq")) == shipped
    loaded = load_questions(builtin_questions())
    assert len(loaded) == len(built) and {q.type for q in loaded} == {"single-hop", "multi-hop"}


def test_never_a_copy_of_the_seed_questions(built, shared_data):
    seed = {json.loads(line)["question"] for line in (shared_data / "jina-qa.jsonl").read_text().splitlines() if line.strip()}
    assert not seed & {q.question for q in built}


def test_cli_builds_a_folder_and_refuses_a_non_zip(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "m.md").write_text('---\nmodel_name: "m-1"\nlicense: "MIT"\nparameter_size: "7B"\n---\nm-1 is a model.\n')
    out = tmp_path / "q.jsonl"
    assert main(["build", str(folder), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["answer"] for r in rows} == {"MIT", "7B"} and all(r["gold_files"] == ["m.md"] for r in rows)
    bad = tmp_path / "notes.txt"
    bad.write_text("not a zip")
    proc = subprocess.run([sys.executable, "-m", "searchbox.questions", "build", str(bad), "--out", str(tmp_path / "x.jsonl")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"searchbox: {bad}: not a zip archive or a folder"
    assert not (tmp_path / "x.jsonl").exists()


def test_zip_without_front_matter_is_a_one_line_error(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("top/readme.md", "no front matter here")
    path = tmp_path / "c.zip"
    path.write_bytes(buf.getvalue())
    assert main(["build", str(path), "--out", str(tmp_path / "q.jsonl")]) == 2
