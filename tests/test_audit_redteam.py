"""The question audit, attacked by a reviewer (issue 19) on a corpus of another shape (a lighthouse archive, no front matter):
holes in searchbox/questions_audit.py, each a strict xfail with its reason, for the audit's owner.

A hole that gets fixed turns its test into an XPASS, which strict mode reports as a failure: then drop the marker.
"""

from __future__ import annotations

import json

import pytest

from searchbox.questions import main

FILES = {
    "survey.md": "# Gannet Rock structural survey (2022)\n\nThe tower of Gannet Rock stands 38.4 metres from base to the top of the lantern.\n",
    "guidebook.md": "# Guidebook\n\nGannet Rock lighthouse is 41 metres tall.\n",
    "denial.md": "# Survey notes\n\nThe tower stands 38.4 metres, not 41 metres as stated in earlier guidebooks.\n",
    "skerrow.md": "# Skerrow Point\n\nSkerrow Point lighthouse was closed in 1902 and replaced by Little Vell.\n",
    "vell.md": "# Little Vell\n\nLittle Vell lighthouse was restored by Tobias Wren. It replaced Skerrow Point.\n",
}


def audited(tmp_path, capsys, *questions) -> tuple[int, str]:
    room = tmp_path / "room"
    room.mkdir(exist_ok=True)
    for name, text in FILES.items():
        (room / name).write_text(text)
    q = tmp_path / "q.jsonl"
    q.write_text("".join(json.dumps({"type": "single-hop", **x}) + "\n" for x in questions))
    capsys.readouterr()
    code = main(["audit", str(q), str(room)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.xfail(strict=True, reason="one value per field is checked only for release_date and parameter_size of model cards: two gold "
                                       "files giving a tower two heights (38.4 vs 41 metres) pass")
def test_two_gold_files_that_disagree_fail(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "h1", "question": "How tall is the Gannet Rock lighthouse?", "answer": "38.4 metres",
                                           "gold_files": ["survey.md", "guidebook.md"]})
    assert code == 1 and "several_values" in out


@pytest.mark.xfail(strict=True, reason="the shortcut check knows only quoted titles and identifier-like words as the question's "
                                       "entities: the answer file names 'Skerrow Point' (one grep away) and the multi-hop question passes")
def test_a_multi_hop_answer_file_naming_a_plain_name_fails(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "mh", "question": "Who restored the lighthouse that replaced Skerrow Point?",
                                           "answer": "Tobias Wren", "gold_files": ["skerrow.md", "vell.md"], "type": "multi-hop"})
    assert code == 1 and "answer_file_names_entity" in out


@pytest.mark.xfail(strict=True, reason="a yes/no answer is worked out, not looked up, but only aggregate/aggregation/count/comparison "
                                       "are exempt: 'no' fails gold_not_in_files (and would pass wherever the word 'no' happens to occur)")
def test_a_yes_no_question_is_not_failed_for_its_answer_word(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "yn", "question": "Is the Gannet Rock lighthouse taller than 40 metres?", "answer": "no",
                                           "gold_files": ["survey.md"], "type": "yes-no"})
    assert code == 0, out


@pytest.mark.xfail(strict=True, reason="'the gold occurs in its gold files' is the lenient contains: a gold the file denies "
                                       "('not 41 metres') passes")
def test_a_gold_its_file_denies_fails(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "neg", "question": "How tall is the Gannet Rock lighthouse?", "answer": "41 metres",
                                           "gold_files": ["denial.md"]})
    assert code == 1 and "gold_not_in_files" in out


@pytest.mark.xfail(strict=True, reason="a question line whose gold_files is a string, not a list, is read letter by letter "
                                       "(missing_gold_file: s, u, r, v, ...) and exits 1, not 2 with one line on bad input")
def test_gold_files_as_a_string_is_bad_input(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "bad", "question": "How tall?", "answer": "38.4 metres", "gold_files": "survey.md"})
    assert code == 2 and out.strip().count("\n") == 0


def test_what_the_audit_gets_right_on_this_corpus(tmp_path, capsys):
    """Not a hole: a clean single-hop question passes; the answer in both hops fails."""
    assert audited(tmp_path, capsys, {"id": "ok", "question": "In what year was Skerrow Point closed?", "answer": "1902",
                                      "gold_files": ["skerrow.md"]})[0] == 0
    code, out = audited(tmp_path, capsys, {"id": "both", "question": "Which lighthouse replaced the one that closed in 1902?",
                                           "answer": "Little Vell", "gold_files": ["skerrow.md", "vell.md"], "type": "multi-hop"})
    assert code == 1 and "answer_in_both_hops" in out
