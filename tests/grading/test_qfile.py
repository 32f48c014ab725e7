"""Question files are untrusted: every bad shape is one ConfigError naming the file and line, in both readers."""

from __future__ import annotations

import json
import os
import time

import pytest

from searchbox.errors import ConfigError
from searchbox.grading import load_questions
from searchbox.grading.qfile import MAX_GOLD_CHARS, read_bounded
from searchbox.questions.build import load as audit_load

GOOD = {"id": "a", "question": "How tall is Gannet Rock?", "answer": "38.4 metres", "aliases": ["38.4 m"], "gold_files": ["g.md"]}


def write(tmp_path, *lines, raw: bytes | None = None):
    p = tmp_path / "q.jsonl"
    if raw is not None:
        p.write_bytes(raw)
    else:
        p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return p


def refused(path, needle: str):
    for reader in (load_questions, audit_load):
        t = time.monotonic()
        with pytest.raises(ConfigError) as exc:
            reader(path)
        assert time.monotonic() - t < 5
        assert needle in str(exc.value) and "\n" not in str(exc.value), (reader, str(exc.value))


@pytest.mark.parametrize("line,needle", [
    ({**GOOD, "aliases": "12"}, "'aliases' must be a list"),  # never read as the aliases "1" and "2"
    ({**GOOD, "gold_files": "g.md"}, "'gold_files' must be a list"),
    ({**GOOD, "question": 42}, "'question' must be a string"),
    ({**GOOD, "question": ""}, "'question' is empty"),
    ({**GOOD, "aliases": [{"x": 1}]}, "'aliases' must be a string or number"),
    ({**GOOD, "id": True}, "'id' must be"),
    ({**GOOD, "evidence": ["g.md"]}, "'evidence' must be a list of"),
    ({**GOOD, "aliases": ["x" * (MAX_GOLD_CHARS + 1)]}, "'aliases' of 1001 characters"),
    ('{"id": "a", "question": "q?", "answer": ' + "9" * 5000 + "}", "digits"),
    ('{"id": "a", "question": "q?", "x": ' + "[" * 100000 + "]" * 100000 + "}", "nested deeper"),
    ("42", "a question line is a JSON object, not int"),
    ('"How tall?"', "not str"),
    ('{"id": "a", "question": "q?", "answer": NaN}', "NaN is not a number"),
])
def test_a_bad_line_is_one_error_naming_its_line(tmp_path, line, needle):
    p = write(tmp_path, GOOD if not isinstance(line, dict) else {**GOOD, "id": "first"}, line)
    refused(p, needle)
    refused(p, "q.jsonl:2:")


def test_a_duplicate_id_is_refused_where_questions_are_graded(tmp_path):
    p = write(tmp_path, GOOD, {**GOOD, "answer": "41 metres"})
    with pytest.raises(ConfigError, match=r"q.jsonl:2: duplicate question id 'a' \(first on line 1\)"):
        load_questions(p)
    assert [q.id for q in audit_load(p)] == ["a", "a"]  # the audit reads on, and reports duplicate_id itself


def test_invalid_utf8_names_its_line(tmp_path):
    p = write(tmp_path, raw=(json.dumps(GOOD) + "\n").encode() + b'{"id": "b", "question": "\xff?"}\n')
    refused(p, "q.jsonl:2: not UTF-8")


def test_only_regular_files_of_bounded_size(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    refused(fifo, "not a regular file")  # would block forever on open or read
    refused("/dev/zero", "not a regular file")
    refused(tmp_path, "not a regular file")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(ConfigError, match="over the 1000-byte cap"):
        read_bounded(big, 1000)


def test_a_good_file_reads_the_same_through_both(tmp_path):
    p = write(tmp_path, GOOD, {"id": 7, "question": "Year?", "answer": 2024, "aliases": [2024.0]})
    qs = load_questions(p)
    assert [(q.id, q.answer, q.aliases) for q in qs] == [("a", "38.4 metres", ["38.4 m"]), ("7", "2024", ["2024.0"])]
    assert [(b.id, b.answer) for b in audit_load(p)] == [("a", "38.4 metres"), ("7", "2024")]
