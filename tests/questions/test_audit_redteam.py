"""The question audit, attacked by a reviewer (issue 19) on a corpus of another shape (a lighthouse archive, no front matter):
holes found in searchbox/questions_audit.py, each a test (they were strict xfails until the audit closed them).
"""

from __future__ import annotations

import json

from searchbox.questions.build import main

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


def test_two_gold_files_that_disagree_fail(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "h1", "question": "How tall is the Gannet Rock lighthouse?", "answer": "38.4 metres",
                                           "gold_files": ["survey.md", "guidebook.md"]})
    assert code == 1 and "several_values" in out


def test_a_multi_hop_answer_file_naming_a_plain_name_fails(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "mh", "question": "Who restored the lighthouse that replaced Skerrow Point?",
                                           "answer": "Tobias Wren", "gold_files": ["skerrow.md", "vell.md"], "type": "multi-hop"})
    assert code == 1 and "answer_file_names_entity" in out


def test_a_yes_no_question_is_not_failed_for_its_answer_word(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "yn", "question": "Is the Gannet Rock lighthouse taller than 40 metres?", "answer": "no",
                                           "gold_files": ["survey.md"], "type": "yes-no"})
    assert code == 0, out


def test_a_gold_its_file_denies_fails(tmp_path, capsys):
    code, out = audited(tmp_path, capsys, {"id": "neg", "question": "How tall is the Gannet Rock lighthouse?", "answer": "41 metres",
                                           "gold_files": ["denial.md"]})
    assert code == 1 and "gold_not_in_files" in out


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
