"""The question builder: valid questions whose gold answers occur in their gold files, deterministic, strict input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections import Counter

import pytest

from searchbox.corpus.dataroom import open_workspace
from searchbox.grading import load_questions
from searchbox.corpus.dataroom import corpus_texts
from searchbox.questions.build import Built, build, build_audited, builtin_questions, dumps, load, main
from searchbox.questions.audit import Corpus, audit, audit_one

CORPUS = builtin_questions().with_name("jina-corpus.zip")


@pytest.fixture(scope="module")
def built():
    return build(CORPUS, "jq")


def test_questions_are_valid_and_answered_by_their_gold_files(built, tmp_path):
    ws = open_workspace(tmp_path / "run", CORPUS)  # the dataroom exactly as a run sees it
    assert len(built) > 300
    kinds = Counter(q.type for q in built)
    assert not {q.template for q in built} & {"card_to_post_date", "card_to_post_author"}  # every release post names its model
    # 18 multi-hop since the shortcut check reads front matter (issue 29): 39 successors' cards name their predecessor
    assert set(kinds) == {"single-hop", "multi-hop"} and kinds["multi-hop"] >= 15
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
    chains = [q for q in built if q.template.startswith("successor_")]
    assert len(chains) >= 5  # most successors' cards list their predecessor in related_models: a shortcut, dropped
    for q in chains:
        card, successor = ((ws.dataroom / g).read_text(encoding="utf-8") for g in q.gold_files)
        name = successor.split("model_name:", 1)[1].split("\n", 1)[0].strip().strip('"')
        assert name in card.split("deprecated_by:", 1)[1][:200]  # the card names its successor ...
        assert q.answer in successor and q.answer not in card  # ... and only the successor holds the answer: no one-hop shortcut


STALE_SET = ("the packaged set predates the audit's front-matter reading (issue 29): 39 of its 57 multi-hop questions name their "
             "entity in the answer file's front matter; it is not rebuilt, since committed results depend on its ids")


@pytest.mark.xfail(strict=True, reason=STALE_SET)
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


# ---- the audit --------------------------------------------------------------------------------------
@pytest.mark.xfail(strict=True, reason=STALE_SET)
def test_the_packaged_set_audits_clean(capsys):
    assert main(["audit", str(builtin_questions()), str(CORPUS)]) == 0
    assert capsys.readouterr().out.strip().endswith("audit passed: all 397 questions")


def test_the_packaged_set_fails_only_for_its_front_matter_shortcuts(capsys):
    """What the audit says of the packaged set now: 39 multi-hop questions reachable past their bridge, nothing else."""
    assert main(["audit", str(builtin_questions()), str(CORPUS)]) == 1
    out = capsys.readouterr().out
    failing = out.split("failing questions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(failing) == 39 and all(": answer_file_names_entity (" in ln and ";" not in ln for ln in failing)
    assert out.strip().splitlines()[-1].startswith("audit failed: 39 of 397 questions")
    assert "397 questions, 340 distinct facts (multi-hop: 57 questions, 35 facts)" in out  # issue 29: 57 questions, 35 facts


def test_the_tiny_packaged_set_audits_clean():
    tiny = builtin_questions().with_name("questions.jsonl")
    assert main(["audit", str(tiny), str(tiny.with_name("dataroom"))]) == 0


def small_corpus(root):
    """Two cards (jx-one superseded by jx-two-1.5b) and jx-one's release post, with the defects the audit must catch planted in them."""
    root.mkdir()
    (root / "jx-one.md").write_text(
        '---\nmodel_name: "jx-one"\nlicense: "Apache-2.0"\nparameter_size: "137M"\ntoken_length: 8K\nrelease_date: "2024-01-02"\n'
        'release_blog: "/news/jx-one-launch"\ndeprecated_by:\n  - jx-two-1.5b\n---\n# jx-one\n\njx-one has 161 million parameters. It reads 8,192 tokens.\n')
    (root / "jx-two-1.5b.md").write_text(
        '---\nmodel_name: "jx-two-1.5b"\nlicense: "CC-BY-NC-4.0"\nparameter_size: "1.5B"\nrelease_date: "2024-03-04"\n---\n'
        "# jx-two-1.5b\n\nThe new model.\n")
    (root / "jx-one-launch.md").write_text(
        '---\ntitle: "Meet jx-one"\nslug: jx-one-launch\npublished_at: 2024-01-05T10:00:00.000+01:00\nauthors: "Ann Writer"\n---\n'
        "# Meet jx-one\n\nToday we release jx-one, under the Apache 2.0 license.\n")
    return root


BAD = {  # id -> (question, answer, gold files, type, the reasons the audit must give)
    "ok": ("What license is the model jx-two-1.5b distributed under?", "CC-BY-NC-4.0", ["jx-two-1.5b.md"], "single-hop", []),
    "nogold": ("What license is the model jx-one distributed under?", "Apache-2.0", [], "single-hop", ["no_gold_files"]),
    "missing": ("What license is the model jx-one distributed under?", "Apache-2.0", ["nope.md"], "single-hop", ["missing_gold_file"]),
    "notin": ("What license is the model jx-one distributed under?", "MIT", ["jx-one.md"], "single-hop", ["gold_not_in_files"]),
    "inq": ("What is the parameter count of the model jx-two-1.5b?", "1.5B", ["jx-two-1.5b.md"], "single-hop", ["answer_in_question"]),
    "onefile": ("Which license does the successor of jx-one have?", "CC-BY-NC-4.0", ["jx-two-1.5b.md"], "multi-hop", ["multi_hop_one_file"]),
    # jq301: the answer hides in the successor's name, which the first card spells
    "succ": ("The model jx-one has been superseded. What is the parameter count of the model that superseded it?", "1.5B",
             ["jx-one.md", "jx-two-1.5b.md"], "multi-hop", ["answer_in_both_hops"]),
    # "Apache 2.0" in the post is "Apache-2.0" to the grader: either document alone answers
    "both": ("The article 'Meet jx-one' announces a model. What license is that model distributed under?", "Apache-2.0",
             ["jx-one-launch.md", "jx-one.md"], "multi-hop", ["answer_in_both_hops"]),
    # the release post names the model: one grep for it reaches the post, the card is no hop
    "grep": ("On what date was the blog post that announced jx-one published?", "2024-01-05", ["jx-one.md", "jx-one-launch.md"], "multi-hop",
             ["answer_file_names_entity"]),
    "named": ("The article 'Meet jx-one' announces a model. What is that model's maximum input length, in tokens?", "8K",
              ["jx-one-launch.md", "jx-one.md"], "multi-hop", ["question_names_answer_file"]),
    "params": ("What is the parameter count of the model jx-one?", "137M", ["jx-one.md"], "single-hop", ["several_values"]),
    "date": ("What is the release date of the model jx-one?", "2024-01-02", ["jx-one.md"], "single-hop", ["several_values"]),
}


def test_the_audit_gives_each_reason(tmp_path, capsys):
    corpus = small_corpus(tmp_path / "corpus")
    rows = [{"id": i, "question": q, "answer": a, "aliases": ["2024-01-05T10:00:00.000+01:00"] if i == "grep" else [],
             "gold_files": g, "type": t} for i, (q, a, g, t, _) in BAD.items()]
    rows.append({**rows[0]})  # a second "ok": a duplicate id
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = audit(load(path), Corpus.of(corpus_texts(corpus)))
    findings = {f.id: f for f in found[:-1]}
    for qid, (*_, reasons) in BAD.items():
        assert findings[qid].reasons == reasons, (qid, findings[qid])
    assert found[-1].id == "ok" and found[-1].reasons == ["duplicate_id"]  # the second of two
    assert main(["audit", str(path), str(corpus)]) == 1
    out = capsys.readouterr().out
    failing = out.split("failing questions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    lines = {ln.split(":", 1)[0]: ln for ln in failing if ln}
    for qid, (*_, reasons) in BAD.items():
        assert all(r in lines[qid] for r in reasons)
    assert lines["ok"] == "ok: duplicate_id" and len(lines) == 12
    assert "137M" in lines["params"] and "161 million" in lines["params"]  # says which values disagree
    assert out.strip().splitlines()[-1].startswith("audit failed: 12 of 13 questions")
    assert "13 questions, 11 distinct facts" in out  # the two "ok" and "onefile" ask jx-two-1.5b.md's license
    assert main(["audit", str(path), str(corpus)]) == 1


def test_the_audit_reads_formats_as_the_grader_does(tmp_path):
    corpus = Corpus.of(corpus_texts(small_corpus(tmp_path / "corpus")))
    q = Built("x", "What is the parameter count of the model jx-two-1.5b?", "1.5 billion", [], ["jx-two-1.5b.md"], "single-hop")
    assert audit_one(q, corpus).reasons == ["answer_in_question"]  # "1.5 billion" is the name's "1.5b"
    q = Built("y", "When was jx-two-1.5b released?", "March 4, 2024", [], ["jx-two-1.5b.md"], "single-hop")
    assert audit_one(q, corpus).ok  # the card writes "2024-03-04"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    corpus = small_corpus(tmp_path / "corpus")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q?"}\n{"id": "b"\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    empty.with_name("good.jsonl").write_text(json.dumps({"id": "a", "question": "q?", "gold_files": ["x.md"]}) + "\n")
    for argv, message in ((["audit", str(tmp_path / "none.jsonl"), str(corpus)], "none.jsonl: no such file"),
                          (["audit", str(bad), str(corpus)], "bad.jsonl:2: not a question line"),
                          (["audit", str(empty), str(corpus)], "empty.jsonl: no questions"),
                          (["audit", str(empty.with_name("good.jsonl")), str(tmp_path / "nothing")], "nothing: no such file"),
                          (["audit", str(bad)], "the following arguments are required: corpus")):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (argv, err)


def test_the_builder_writes_aliases_and_drops_what_the_audit_rejects(tmp_path):
    corpus = small_corpus(tmp_path / "corpus")
    built, dropped = build_audited(corpus, "t")
    by_template = {q.template: q for q in built}
    assert all(audit_one(q, Corpus.of(corpus_texts(corpus))).ok for q in built)
    post = by_template["post_date"]
    assert post.answer == "2024-01-05" and "2024-01-05T10:00:00.000+01:00" in post.aliases and "January 5, 2024" in post.aliases
    license_ = next(q for q in built if q.template == "card_license" and q.answer == "CC-BY-NC-4.0")
    assert "CC BY-NC 4.0" in license_.aliases and "Creative Commons Attribution-NonCommercial 4.0" in license_.aliases
    assert by_template["card_input_length"].answer == "8K" and by_template["card_input_length"].aliases == ["8,192"]
    gone = {r for f in dropped for r in f.reasons}
    assert {"several_values", "answer_file_names_entity", "answer_in_both_hops", "answer_in_question"} <= gone
    assert not any(q.template.startswith("card_to_post") for q in built)  # the post names jx-one
    assert not any(q.question == "What is the parameter count of the model jx-one?" for q in built)  # 137M vs 161 million


def test_the_seed_question_set_is_audited_too(shared_data, capsys):
    """A set this project did not build: its release-date questions meet the same card-vs-post ambiguity."""
    assert main(["audit", str(shared_data / "jina-qa.jsonl"), str(shared_data / "jina-corpus.zip")]) == 1
    out = capsys.readouterr().out
    assert "several_values" in out and out.strip().splitlines()[-1].startswith("audit failed:")


def test_the_audit_reads_its_corpus_through_the_dataroom_zip_checks(tmp_path, capsys):
    """A zip bomb given as the audit's corpus is refused in one line (it reached 6 GB RSS before)."""
    import zipfile

    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.md", b"\0" * (64 * 1024**2))
    good = tmp_path / "q.jsonl"
    good.write_text(json.dumps({"id": "a", "question": "q?", "answer": "x", "gold_files": ["a.md"]}) + "\n")
    assert main(["audit", str(good), str(bomb)]) == 2
    err = capsys.readouterr().err
    assert "zip bomb" in err and err.count("\n") == 1


def test_the_audit_refuses_an_unknown_type(tmp_path):
    """A type spelled `multihop` skipped every multi-hop check (issue 29)."""
    corpus = Corpus.of(corpus_texts(small_corpus(tmp_path / "corpus")))
    q = Built("x", "When was jx-two-1.5b released?", "March 4, 2024", [], ["jx-two-1.5b.md"], "multihop")
    f = audit_one(q, corpus)
    assert f.reasons == ["unknown_type"] and "'multihop'" in f.details[0]
    assert audit_one(Built("y", q.question, q.answer, [], q.gold_files, "single-hop"), corpus).ok
