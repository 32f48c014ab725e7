"""Built-in tools: confinement to work/, read-only dataroom, no network, timeouts and caps; the catalog's selection."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from searchbox.config import HarnessConfig
from searchbox.dataroom import open_workspace
from searchbox.errors import ConfigError
from searchbox.tools import ToolContext, Toolset, select
from searchbox.tools.catalog import CATALOG, describe
from searchbox.tools.sandbox import bwrap_works, programs

needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap unavailable (apt-get install bubblewrap)")


@pytest.fixture
def toolset(tmp_path):
    ws = open_workspace(tmp_path / "run", None)
    harness = HarnessConfig(bash_timeout_s=5, output_cap_chars=2000)
    return Toolset(select("none"), ToolContext(work=ws.work, harness=harness, sandbox_mode="bwrap"))


def call(ts, name, **args):
    return ts.call(name, json.dumps(args))


def test_read_grep_find_ls(toolset):
    out = call(toolset, "read", path="dataroom/reports/gannet-rock-survey.md")
    assert out.ok and "38.4 metres" in out.output and out.paths == ["dataroom/reports/gannet-rock-survey.md"]
    out = call(toolset, "grep", pattern="Tobias", path="dataroom")
    assert out.ok and "dataroom/people/staff.md:" in out.output
    out = call(toolset, "find", pattern="*.csv")
    assert out.output.strip() == "dataroom/reports/lighthouses.csv"
    out = call(toolset, "ls", path="dataroom")
    assert "reports/" in out.output and "README.md" in out.output


def test_paths_cannot_escape(toolset, tmp_path):
    for name, args in [("read", {"path": "../../../etc/passwd"}), ("read", {"path": "/etc/passwd"}),
                       ("ls", {"path": ".."}), ("write", {"path": "../escape.txt", "content": "x"}),
                       ("grep", {"pattern": "root", "path": "/etc"})]:
        out = call(toolset, name, **args)
        assert not out.ok and "outside the working directory" in out.error, (name, out.error)
    (toolset.ctx.work / "sneaky").symlink_to("/etc")
    out = call(toolset, "read", path="sneaky/passwd")
    assert not out.ok and "outside" in out.error
    assert not (tmp_path / "run" / "escape.txt").exists()


def test_dataroom_read_only_for_write_and_edit(toolset):
    out = call(toolset, "write", path="dataroom/new.md", content="x")
    assert not out.ok and "read-only" in out.error
    out = call(toolset, "edit", path="dataroom/README.md", old="Trust", new="Cult")
    assert not out.ok and "read-only" in out.error
    assert call(toolset, "write", path="notes/a.md", content="hello world").ok
    assert call(toolset, "edit", path="notes/a.md", old="world", new="there").ok
    assert (toolset.ctx.work / "notes/a.md").read_text() == "hello there"


@needs_bwrap
def test_bash_cannot_write_outside_work(toolset, tmp_path):
    target = tmp_path / "outside.txt"
    out = call(toolset, "bash", command=f"echo pwned > {target}; echo inside > inside.txt; touch dataroom/x; echo done")
    assert out.ok and "done" in out.output
    assert not target.exists()
    assert (toolset.ctx.work / "inside.txt").read_text() == "inside\n"
    assert not (toolset.ctx.dataroom / "x").exists()
    assert out.programs == ["echo", "echo", "touch", "echo"]


@needs_bwrap
def test_bash_has_no_network(toolset):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    accepted = []
    srv.settimeout(6)

    def accept():
        try:
            conn, _ = srv.accept()
            accepted.append(conn)
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    out = call(toolset, "bash", command=f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\" && echo CONNECTED || echo REFUSED")
    t.join()
    srv.close()
    assert "REFUSED" in out.output and "CONNECTED" not in out.output
    assert accepted == []


@needs_bwrap
def test_bash_timeout_kills_process_group(toolset):
    start = time.monotonic()
    out = call(toolset, "bash", command="sleep 60 & sleep 60; echo never", timeout=1)
    assert not out.ok and "timed out" in out.error
    assert time.monotonic() - start < 15


@needs_bwrap
def test_bash_output_is_capped(toolset):
    out = call(toolset, "bash", command="yes | head -c 1000000")
    assert len(out.output) < 3000 and "truncated" in out.output
    assert out.output_chars < 20000


def test_programs_parsing():
    assert programs("cat a.txt | grep -i x && wc -l; FOO=1 python3 s.py") == ["cat", "grep", "wc", "python3"]
    assert programs("timeout 5 rg foo dataroom > out.txt") == ["rg"]
    assert programs("sudo /usr/bin/find . -name '*.md' | xargs head") == ["find", "xargs"]
    assert programs("echo 'a | b'") == ["echo"]


def test_selection_semantics():
    builtin = {s.name for s in CATALOG if s.tier == "builtin"}
    names = lambda sel: {s.name for s in select(sel)}
    assert names("none") == builtin == names([]) == names("")
    assert names("high") == builtin | {"search_dataroom", "answer_question"}
    assert names("low") == builtin | {"embed_texts", "rerank", "similarity", "classify", "cluster", "select_diverse"}
    assert names("all") == {s.name for s in CATALOG}
    assert names(None) == builtin | {s.name for s in CATALOG if s.default}
    assert names(["rerank", "similarity"]) == builtin | {"rerank", "similarity"}
    assert names("rerank,high") >= {"rerank", "search_dataroom"}
    with pytest.raises(ConfigError, match="unknown tool 'grepp'"):
        select(["grepp"])


def test_catalog_is_the_single_source():
    table = describe()
    for spec in CATALOG:
        assert f"`{spec.name}`" in table
        assert spec.parameters["type"] == "object"
        assert spec.tier in ("builtin", "high", "low")


def test_grep_reports_bad_patterns_and_falls_back_without_ripgrep(toolset, monkeypatch):
    out = call(toolset, "grep", pattern="(unclosed", path="dataroom")
    assert not out.ok and "regex" in out.error.lower()
    monkeypatch.setattr("shutil.which", lambda name: None)
    out = call(toolset, "grep", pattern="Tob[i]as", path="dataroom")
    assert out.ok and "dataroom/people/staff.md:" in out.output
