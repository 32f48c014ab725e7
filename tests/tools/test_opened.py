"""Issue 29.2: a bash call's tool row records the files its box opened to read, observed by strace around real bwrap
(tools.opens), with the log out of the box's reach; not observed (None, never []) without a box or without strace."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from searchbox.config import HarnessConfig
from searchbox.record.record import TOOL_SCHEMA, ToolRow, read_rows, stored_row, write_table
from searchbox.tools import ToolContext, Toolset, opens, sandbox, select

GOLD = "Curator: Dana Whitfield, head of the maritime collection since 1998.\n"
B64 = "RGFuYSBXaGl0ZmllbGQ="  # "Dana Whitfield"

needs_box = pytest.mark.skipif(not (sandbox.bwrap_works() and not opens.unavailable()),
                               reason="needs bubblewrap and a strace that can trace")


@pytest.fixture
def work():
    base = "/var/tmp" if Path("/var/tmp").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="searchbox-opened-", dir=base))
    w = root / "work"
    (w / "dataroom" / "sub").mkdir(parents=True)
    (w / "dataroom" / "gold.md").write_text(GOLD)
    (w / "dataroom" / "sub" / "other.md").write_text("Nothing here.\n")
    (w / "dataroom" / "é ü>x.md").write_text("odd name\n")
    (w / "notes.md").write_text("mine\n")
    yield w
    from searchbox.corpus.dataroom import make_writable

    make_writable(root)
    shutil.rmtree(root, ignore_errors=True)


def _toolset(work: Path, mb: int = 0, inside: str | None = None, mode: str = "bwrap") -> Toolset:
    harness = HarnessConfig(bash_timeout_s=20, output_cap_chars=4000, work_quota_mb=mb, work_quota_files=500)
    return Toolset(select("none"), ToolContext(work=work, harness=harness, sandbox_mode=mode, inside=inside))


CASES = {  # command -> the dataroom files it read
    "cat dataroom/gold.md": ["dataroom/gold.md"],
    "fold -w 40 dataroom/gold.md": ["dataroom/gold.md"],
    "tr a-z A-Z < dataroom/gold.md": ["dataroom/gold.md"],
    f"cd dataroom && echo {B64} | base64 -d": [],
    "echo Dana Whitfield; ls dataroom": [],
    f"python3 -c 'import os, base64; print(os.listdir(\"dataroom\")); print(base64.b64decode(\"{B64}\").decode())'": [],
    "grep -rl Whitfield dataroom": ["dataroom/gold.md", "dataroom/sub/other.md", "dataroom/é ü>x.md"],
    "cat 'dataroom/é ü>x.md' notes.md": ["dataroom/é ü>x.md", "notes.md"],
}


@needs_box
@pytest.mark.parametrize("mb,inside", [(0, None), (64, None), (64, "/work")])
@pytest.mark.parametrize("command", CASES)
def test_the_call_records_what_its_box_opened_to_read(work, mb, inside, command):
    out = _toolset(work, mb, inside).call("bash", {"command": command})
    assert out.ok, out.output
    assert sorted(p for p in out.opened if p.startswith("dataroom/") or p == "notes.md") == sorted(CASES[command]), out.opened
    assert "strace" not in out.output  # the tracer says nothing into the command's output


@needs_box
def test_the_opens_reach_the_tool_row_and_back(work, tmp_path):
    toolset = _toolset(work)
    seen = toolset.call("bash", {"command": "cat dataroom/gold.md"})
    none = toolset.call("bash", {"command": "echo hi"})
    rows = [ToolRow(1, i, f"c{i}", o.tool, o.arguments, o.programs, o.paths, 0.0, 0.0, o.ok, o.error, o.output_chars, "", False, o.opened)
            for i, o in enumerate((seen, none))]
    rows.append(ToolRow(1, 2, "c2", "read", "{}", [], [], 0.0, 0.0, True, "", 0, "", False))  # no observation
    write_table(rows, TOOL_SCHEMA, tmp_path / "tool_calls.parquet", "r")
    back = read_rows(tmp_path / "tool_calls.parquet", ToolRow)
    assert [r.opened for r in back] == [["dataroom/gold.md"], [], None]
    assert stored_row(ToolRow, {"turn": 1, "tool": "bash"}).opened is None  # a table from before the column: not observed


@needs_box
def test_the_log_is_out_of_the_box_s_reach_and_removed(work, monkeypatch):
    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    out = _toolset(work, 64).call("bash", {"command": "ls -a /tmp /var/tmp 2>&1; find / -name 'opens.log' 2>/dev/null; echo done"})
    assert made and "searchbox-opens-" in made[0] and not Path(made[0]).exists()
    assert "opens.log" not in out.output and "searchbox-opens" not in out.output and out.output.rstrip().endswith("done")


@needs_box
def test_exit_codes_timeouts_and_background_children_are_as_untraced(work):
    toolset = _toolset(work)
    assert toolset.call("bash", {"command": "exit 3"}).output.endswith("[exit code 3]")
    start = time.monotonic()
    out = toolset.call("bash", {"command": "sleep 60 & cat dataroom/gold.md"})
    assert out.ok and time.monotonic() - start < 10 and out.opened == ["dataroom/gold.md"]
    out = toolset.call("bash", {"command": "cat dataroom/gold.md; sleep 60", "timeout": 2})
    assert not out.ok and "timed out" in out.output and out.opened == ["dataroom/gold.md"]


def test_without_a_box_opens_are_not_observed(work):
    out = _toolset(work, mode="none").call("bash", {"command": "cat dataroom/gold.md"})
    assert out.ok and out.opened is None


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="needs bubblewrap")
def test_without_strace_opens_are_not_observed_and_the_call_still_runs(work, monkeypatch):
    monkeypatch.setattr(opens, "unavailable", lambda: "strace not found")
    out = _toolset(work).call("bash", {"command": "cat dataroom/gold.md"})
    assert out.ok and out.output.startswith("Curator") and out.opened is None


def test_other_tools_observe_no_opens(work):
    out = _toolset(work, mode="none").call("read", {"path": "dataroom/gold.md"})
    assert out.ok and out.opened is None


def test_unavailable_names_a_missing_strace(monkeypatch):
    opens.unavailable.cache_clear()
    monkeypatch.setattr(opens.shutil, "which", lambda name: None)
    try:
        assert opens.unavailable() == "strace not found"
    finally:
        opens.unavailable.cache_clear()


def test_a_strace_that_cannot_trace_or_is_not_silent_is_unavailable(monkeypatch):
    fake = 'echo "1 openat(AT_FDCWD, \\"/proc/self/stat\\", O_RDONLY) = 3</proc/self/stat>" > "$0"; echo "strace: warning" >&2; exec "$@"'
    for argv, said in (([shutil.which("false") or "false"], "strace cannot trace here (exit 1)"),
                       (["sh", "-c", fake], "strace is not silent here (strace: warning)")):
        opens.unavailable.cache_clear()
        monkeypatch.setattr(opens, "tracer_argv", lambda log, argv=argv: [*argv, log] if argv[0] == "sh" else argv)
        try:
            assert opens.unavailable() == said
        finally:
            opens.unavailable.cache_clear()


def test_the_host_side_process_and_escaped_names():
    log = ('100 openat(AT_FDCWD</>, "/work/x/pyvenv.cfg", O_RDONLY) = 3</work/x/pyvenv.cfg>\n'
           '101 openat(AT_FDCWD</work>, "dataroom/\\303\\251 \\303\\274\\76x.md", O_RDONLY) = 3</work/dataroom/\\303\\251 \\303\\274\\76x.md>\n'
           '101 openat(AT_FDCWD</work>, "dataroom/O_DIRECTORY.md", O_RDONLY) = 3</work/dataroom/O_DIRECTORY.md>\n'
           '101 openat(AT_FDCWD</work>, "n.md", O_RDONLY) = 3</work/n.md>(deleted)\n'
           '101 openat(AT_FDCWD</work>, "dataroom/q\\"t\\\\b.md", O_RDONLY) = 3</work/dataroom/q\\"t\\\\b.md>\n')
    assert opens.reads_under(log, "/work") == ["dataroom/é ü>x.md", "dataroom/O_DIRECTORY.md", "n.md", 'dataroom/q"t\\b.md']
    assert opens.reads_under(log, "/work", outside=101) == ["x/pyvenv.cfg"]


def test_the_cap_is_what_a_row_keeps():
    from searchbox.record.record import ROW_LIST_CAP

    assert opens.OPENED_CAP == ROW_LIST_CAP


def test_a_log_past_the_caps_is_not_observed(tmp_path, monkeypatch):
    log = tmp_path / "log"
    log.write_text("".join(f'9 openat(AT_FDCWD</w>, "d/{i}", O_RDONLY) = 3</w/d/{i}>\n' for i in range(5)), encoding="utf-8")
    assert opens.read_log(str(log), "/w", outside=1) == [f"d/{i}" for i in range(5)]
    monkeypatch.setattr(opens, "OPENED_CAP", 4)
    assert opens.read_log(str(log), "/w", outside=1) is None
    assert opens.read_log(str(tmp_path / "gone"), "/w") is None
