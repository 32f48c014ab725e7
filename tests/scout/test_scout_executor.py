"""The scout executor refuses links, escapes, hidden and oversized files, runaway regexes, and unverifiable finishes."""

from __future__ import annotations

import os
import random

import pytest

from searchbox.scout.config import ExecutorLimits
from searchbox.scout.executor import Executor, split_lines


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("".join(f"line {n}\n" for n in range(1, 201)) + "def target():\n    return 42\n")
    (root / "pkg" / "util.py").write_text("def helper():\n    return 'secret-free'\n")
    (root / ".env").write_text("TOKEN=hidden-value\n")
    (root / "pkg" / ".cache").mkdir()
    (root / "pkg" / ".cache" / "x.py").write_text("hidden-value\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside-value\n")
    os.symlink(outside, root / "escape.txt")
    os.symlink(root / "pkg", root / "linkdir")
    os.symlink(root / "pkg" / "util.py", root / "pkg" / "alias.py")
    return root


def run(ex, action, **args):
    return ex.execute(action, args)


def test_reads_and_cites_lines_it_read(repo):
    ex = Executor(repo)
    res = run(ex, "read", path="pkg/core.py", start=195, end=202)
    assert res.ok and "  201  def target():" in res.text
    ok = run(ex, "finish", path="pkg/core.py", start=201, end=202)
    assert ok.ok and ok.data.start_line == 201 and len(ok.data.sha256) == 64


@pytest.mark.parametrize("path, message", [
    ("escape.txt", "is a symbolic link"),
    ("linkdir/util.py", "linkdir is a symbolic link"),
    ("pkg/alias.py", "is a symbolic link"),
])
def test_symlinks_refused(repo, path, message):
    res = run(Executor(repo), "read", path=path)
    assert not res.ok and message in res.error and "links are not followed" in res.error


def test_links_invisible_to_files_and_grep(repo):
    ex = Executor(repo)
    listing = run(ex, "files").data
    assert listing == ["pkg/core.py", "pkg/util.py"]
    assert run(ex, "grep", pattern="outside-value").text == "no matches"


@pytest.mark.parametrize("path, message", [
    ("../outside.txt", "leaves its root"),
    ("pkg/../../outside.txt", "leaves its root"),
    ("/etc/passwd", "absolute path"),
])
def test_escaping_paths_refused(repo, path, message):
    res = run(Executor(repo), "read", path=path)
    assert not res.ok and message in res.error


def test_escaping_glob_refused(repo):
    res = run(Executor(repo), "grep", pattern="x", glob="../*")
    assert not res.ok and "leaves the repository" in res.error


@pytest.mark.parametrize("path", [".env", "pkg/.cache/x.py", "./.env"])
def test_hidden_paths_refused(repo, path):
    res = run(Executor(repo), "read", path=path)
    assert not res.ok and "hidden paths" in res.error


def test_hidden_files_not_searched(repo):
    ex = Executor(repo)
    assert run(ex, "grep", pattern="hidden-value").text == "no matches"
    assert run(ex, "files", glob=".env").text.startswith("no files match")


def test_file_over_one_megabyte_refused(repo):
    big = repo / "pkg" / "big.py"
    big.write_bytes(b"needle_in_big = 1\n" + b"x" * 1_000_001)
    ex = Executor(repo)
    res = run(ex, "read", path="pkg/big.py")
    assert not res.ok and "files over 1000000 bytes are refused" in res.error
    assert run(ex, "grep", pattern="needle_in_big").text == "no matches"
    assert "pkg/big.py" not in run(ex, "files").data


def test_special_file_refused_without_blocking(repo):
    os.mkfifo(repo / "pkg" / "pipe.py")
    ex = Executor(repo, ExecutorLimits(grep_timeout_s=10))
    res = run(ex, "read", path="pkg/pipe.py")
    assert not res.ok and "not a regular file" in res.error
    assert run(ex, "grep", pattern="helper").ok  # ripgrep skips the FIFO instead of blocking on it


def test_long_running_regex_cut_by_deadline(tmp_path):
    # Unicode word boundaries over non-ASCII text force ripgrep off its fast engine: seconds of work per file.
    root = tmp_path / "slow"
    root.mkdir()
    rng = random.Random(0)
    words = ["alpha", "béta", "gamma", "délta", "x1", "foo_bar", "Baz"]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(11000)).encode()[:900_000]
    for i in range(12):  # about 5 s of ripgrep work on a 2-core VM: 25x the deadline
        (root / f"f{i}.txt").write_bytes(text)
    ex = Executor(root, ExecutorLimits(grep_timeout_s=0.2))
    res = run(ex, "grep", pattern=r"(?:\b\w+\b\s*){30}\d")
    assert not res.ok and "deadline" in res.error and "too expensive" in res.error


def test_grep_output_capped(repo):
    (repo / "pkg" / "many.py").write_text("".join(f"match_me {n}\n" for n in range(5000)))
    ex = Executor(repo, ExecutorLimits(grep_max_per_file=5000, grep_output_bytes=2000))
    res = run(ex, "grep", pattern="match_me")
    assert res.ok and "results are incomplete" in res.text
    assert len(res.data) < 200 and res.data[0].line == 1


def test_bad_regex_is_a_clear_error(repo):
    res = run(Executor(repo), "grep", pattern="(unclosed")
    assert not res.ok and "ripgrep refused" in res.error and "unclosed" in res.error


def test_finish_outside_lines_read_refused(repo):
    ex = Executor(repo)
    unread = run(ex, "finish", path="pkg/util.py", start=1, end=2)
    assert not unread.ok and "you have not read pkg/util.py" in unread.error
    run(ex, "read", path="pkg/core.py", start=10, end=20)
    run(ex, "read", path="pkg/core.py", start=21, end=30)
    assert run(ex, "finish", path="pkg/core.py", start=12, end=28).ok  # two adjacent reads cover it
    res = run(ex, "finish", path="pkg/core.py", start=25, end=35)
    assert not res.ok and "lie outside the lines you read (10-30)" in res.error
    bad = run(ex, "finish", path="pkg/core.py", start=20, end=12)
    assert not bad.ok and "not a range" in bad.error


def test_read_is_capped_and_only_shown_lines_count(repo):
    ex = Executor(repo, ExecutorLimits(read_max_lines=50))
    res = run(ex, "read", path="pkg/core.py", start=1, end=202)
    assert res.ok and "lines 1-50 of 202" in res.text and "read on with start=51" in res.text
    res = run(ex, "finish", path="pkg/core.py", start=40, end=60)
    assert not res.ok and "outside the lines you read (1-50)" in res.error


def test_file_changed_between_read_and_finish_refused(repo):
    ex = Executor(repo)
    assert run(ex, "read", path="pkg/util.py").ok
    (repo / "pkg" / "util.py").write_text("def helper():\n    return 'tampered'\n")
    res = run(ex, "finish", path="pkg/util.py", start=1, end=2)
    assert not res.ok and "changed since you read it" in res.error and "read it again" in res.error
    # reading the new version makes it citable again, with the new hash
    assert run(ex, "read", path="pkg/util.py").ok
    assert run(ex, "finish", path="pkg/util.py", start=1, end=2).ok


def test_binary_and_unknown_actions(repo):
    (repo / "pkg" / "blob.py").write_bytes(b"\x00\x01binary")
    ex = Executor(repo)
    assert "binary file" in run(ex, "read", path="pkg/blob.py").error
    assert "unknown action 'shell'" in run(ex, "shell", command="ls").error
    assert "bad arguments for read" in run(ex, "read", path="pkg/util.py", bogus=1).error


def test_line_numbers_match_editors():
    assert split_lines(b"a\r\nb\x0cc\n\nlast") == ["a", "b\x0cc", "", "last"]
