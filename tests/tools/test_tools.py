"""Built-in tools: confinement to work/, read-only dataroom, no network, timeouts and caps; the catalog's selection."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from searchbox.config import HarnessConfig
from searchbox.corpus.dataroom import open_workspace
from searchbox.errors import ConfigError
from searchbox.tools import ToolContext, Toolset, select
from searchbox.tools.catalog import CATALOG, describe
from searchbox.errors import SandboxError
from searchbox.tools import sandbox
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
    assert not out.ok and "symbolic link" in out.error and "root:" not in out.output
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


def test_grep_on_one_file_names_the_file(toolset):
    """rg without --with-filename prints `12:text` for a single file; the line number was then noted as a path."""
    out = call(toolset, "grep", pattern="granite", path="dataroom/reports/gannet-rock-survey.md")
    assert out.ok and out.output.startswith("dataroom/reports/gannet-rock-survey.md:")
    assert all(line.split(":")[1].isdigit() for line in out.output.splitlines())
    assert out.paths == ["dataroom/reports/gannet-rock-survey.md"]
    out = call(toolset, "grep", pattern="granite", path=str(toolset.ctx.work / "dataroom/reports/gannet-rock-survey.md"))
    assert out.paths == ["dataroom/reports/gannet-rock-survey.md"]


@pytest.mark.parametrize("ripgrep", [True, False])
def test_grep_lists_files_in_path_order_every_time(toolset, monkeypatch, ripgrep):
    """ripgrep's threads printed files in the order they finished: the same call could list (and, under the cap,
    keep) other matches on a rerun (tests/test_reproducible caught a run diverging at its first grep)."""
    many = toolset.ctx.dataroom / "many"
    many.mkdir()
    for n in range(60):
        (many / f"f{n:02d}" ).mkdir()
        (many / f"f{n:02d}" / "note.md").write_text("needle here\n" + "hay\n" * (n * 50) + "needle again\n")
    if not ripgrep:
        monkeypatch.setattr("shutil.which", lambda name: None)
    outs = {call(toolset, "grep", pattern="needle", path="dataroom/many").output for _ in range(5)}
    assert len(outs) == 1
    paths = [line.split(":")[0] for line in outs.pop().splitlines() if line.startswith("dataroom/")]
    assert paths == sorted(paths) and len(paths) > 20


@needs_bwrap
def test_ripgrep_in_bash_lists_files_in_path_order(toolset):
    many = toolset.ctx.dataroom / "many"
    many.mkdir()
    for n in range(60):
        (many / f"f{n:02d}").mkdir()
        (many / f"f{n:02d}" / "note.md").write_text("needle\n" + "hay\n" * (n * 50))
    outs = {call(toolset, "bash", command="rg -l needle dataroom/many").output for _ in range(5)}
    assert len(outs) == 1
    paths = outs.pop().split()
    assert paths == sorted(paths) and len(paths) == 60


def test_grep_without_ripgrep_has_the_same_shape(toolset, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    out = call(toolset, "grep", pattern="granite", path="dataroom/reports/gannet-rock-survey.md")
    assert out.ok and out.output.startswith("dataroom/reports/gannet-rock-survey.md:")
    assert out.paths == ["dataroom/reports/gannet-rock-survey.md"]


@needs_bwrap
def test_box_runs_unprivileged_with_limits(toolset):
    out = call(toolset, "bash", command="id -u; ulimit -u; ulimit -v; ulimit -f; ulimit -t; echo $HOME; env | cut -d= -f1 | sort | tr '\\n' ' '")
    lines = out.output.splitlines()
    limits = sandbox.Limits()
    assert lines[:4] == ["65534", str(limits.processes), str(limits.memory_bytes // 1024), str(limits.file_bytes // 1024)]
    assert lines[4].isdigit() and lines[5] == str(toolset.ctx.work.resolve())
    assert set(lines[6].split()) <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "TERM", "TMPDIR", "RIPGREP_CONFIG_PATH", "_"}


@needs_bwrap
def test_installed_package_is_hidden_in_the_box(toolset, monkeypatch):
    """A searchbox installed under /usr ships builtin/questions.jsonl (gold answers): the box masks it."""
    fake_pkg = Path("/usr/share")  # stands in for site-packages/searchbox: a folder under /usr with content
    monkeypatch.setattr(sandbox, "_package_dir", lambda: fake_pkg)
    out = call(toolset, "bash", command="ls -A /usr/share | wc -l; ls /usr/bin | wc -l")
    hidden, visible = (int(x) for x in out.output.split())
    assert hidden == 0 and visible > 10


def test_missing_bubblewrap_is_a_clear_error(monkeypatch):
    sandbox.probe_failure.cache_clear()
    sandbox.quota_failure.cache_clear()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    try:
        with pytest.raises(SandboxError, match="bubblewrap"):
            sandbox.resolve_mode("auto")
        assert sandbox.resolve_mode("none") == "none"
    finally:
        sandbox.probe_failure.cache_clear()
        sandbox.quota_failure.cache_clear()


BOX_MODULES = ("errors.py", "config.py", "corpus/safefs.py", "tools/context.py", "tools/sandbox.py", "tools/seccomp.py", "tools/boxwork.py",
               "tools/opens.py")  # what the box needs (a normal user's python has no jsonschema)


def _python_for(uid: int) -> str | None:
    """A python3 the given uid can run (the venv's may sit under /root)."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(cand):
            probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", cand, "-c", "pass"], capture_output=True)
            if probe.returncode == 0:
                return cand
    return None


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="simulates a normal user's laptop from root")
def test_normal_user_path_runs_the_box_in_a_user_namespace(tmp_path_factory):
    """The harness run by a normal user: bwrap maps it to 65534 in a user namespace; limits still hold."""
    python = _python_for(12345)
    if python is None:
        pytest.skip("no system python3 an unprivileged uid can run")
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else tmp_path_factory.mktemp("u")
    root = Path(os.path.realpath(base)) / f"searchbox-user-{os.getpid()}"
    try:
        pkg = root / "pkg" / "searchbox"
        (pkg / "tools").mkdir(parents=True)
        (pkg / "corpus").mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "tools" / "__init__.py").write_text("")
        (pkg / "corpus" / "__init__.py").write_text("")
        src = Path(sandbox.__file__).resolve().parents[1]
        for name in BOX_MODULES:
            shutil.copy(src / name, pkg / name)
        work = root / "run" / "work"
        (work / "dataroom").mkdir(parents=True)
        (work / "dataroom" / "a.txt").write_text("hello\n")
        (root / "secret.txt").write_text("HOST-SECRET\n")
        for p in [root, *root.rglob("*")]:
            os.chown(p, 12345, 12345)
        code = (
            "from pathlib import Path; from searchbox.tools import sandbox as s\n"
            "assert s.probe_failure() == '', s.probe_failure()\n"
            f"w = Path({str(work)!r})\n"
            "r = s.run_shell('id -u; cat dataroom/a.txt; touch dataroom/x 2>&1 | grep -c Read-only; echo hi > mine.txt; "
            "cat ../../secret.txt 2>&1 | grep -c SECRET; unshare -U -r true 2>&1 | grep -c Operation.not.permitted; "
            "grep Seccomp: /proc/self/status; :(){ :|:& };: ; sleep 1; ls /proc | grep -c [0-9]', w, [w / 'dataroom'], 'bwrap', 8, 100000)\n"
            "print(r.output)\n"
            "q = s.run_shell('df -P . | tail -1 | cut -d\" \" -f1; head -c 40M /dev/zero > big; for i in $(seq 300); do : > f$i; done 2>/dev/null', "
            "w, [w / 'dataroom'], 'bwrap', 20, 100000, s.Limits(work_bytes=16 << 20, work_files=100))\n"
            "print('QUOTA', q.output.split()[0], bool(q.full))\n"
            "o = s.run_shell('cat dataroom/a.txt mine.txt', w, [w / 'dataroom'], 'bwrap', 8, 100000, observe_opens=True)\n"
            "print('OPENED', o.opened if s.opens.unavailable() == '' else 'unavailable')\n"
        )
        proc = subprocess.run(["setpriv", "--reuid=12345", "--regid=12345", "--clear-groups", python, "-c", code],
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "pkg")}, cwd=root, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stdout.splitlines()
        assert lines[:6] == ["65534", "hello", "1", "0", "1", "Seccomp:\t2"], proc.stdout[-2000:]
        assert (work / "mine.txt").read_text() == "hi\n"
        assert lines[-2] == "QUOTA searchbox-work True", proc.stdout[-2000:]  # work/ was the sized tmpfs, and it filled
        assert lines[-1] in ("OPENED ['dataroom/a.txt', 'mine.txt']", "OPENED unavailable"), proc.stdout[-2000:]  # traced in a user namespace
        assert (work / "big").stat().st_size <= 16 << 20 and len(list(work.glob("f*"))) < 100
        survivors = subprocess.run(["ps", "-o", "stat=", "-u", "12345"], capture_output=True, text=True).stdout.split()
        survivors = [s for s in survivors if not s.startswith("Z")]  # a zombie is dead, only not yet reaped
        assert survivors == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ignoring_toolset(tmp_path):
    """A dataroom whose ignore files name gannet.md (every kind ripgrep reads), with hidden files and folders."""
    src = tmp_path / "src"
    (src / ".hidden-dir").mkdir(parents=True)
    (src / "sub").mkdir()
    (src / "gannet.md").write_text("Gannet Rock is 38.4 metres tall.\n")
    (src / ".secret-notes.md").write_text("Gannet notes, hidden file.\n")
    (src / ".hidden-dir" / "inside.md").write_text("Gannet inside a hidden folder.\n")
    (src / "sub" / "deep.md").write_text("Gannet below an ignored folder.\n")
    for name in (".ignore", ".gitignore", ".rgignore"):
        (src / name).write_text("gannet.md\nsub/\n.secret-notes.md\n")
    ws = open_workspace(tmp_path / "run", src)
    (ws.work / ".config" / "git").mkdir(parents=True)  # git's global excludes under the box's $HOME (= work/)
    (ws.work / ".config" / "git" / "ignore").write_text("*.md\n")
    (ws.work / ".gitignore").write_text("dataroom/\n")
    harness = HarnessConfig(bash_timeout_s=5, output_cap_chars=4000)
    return Toolset(select("none"), ToolContext(work=ws.work, harness=harness, sandbox_mode="bwrap"))


EXPECTED_GANNET = {"dataroom/gannet.md", "dataroom/.secret-notes.md", "dataroom/.hidden-dir/inside.md", "dataroom/sub/deep.md"}


def _grep_files(out) -> set[str]:
    return {line.split(":", 1)[0] for line in out.output.splitlines()} - {"dataroom/.ignore", "dataroom/.gitignore", "dataroom/.rgignore"}


@needs_bwrap
@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed")
def test_grep_honours_no_ignore_file_and_searches_hidden_files(ignoring_toolset):
    """Issue 20: a dataroom .ignore listing gannet.md made grep answer 'no matches' while bash's grep -r found it."""
    ts = ignoring_toolset
    out = call(ts, "grep", pattern="Gannet", path="dataroom")
    assert out.ok and _grep_files(out) == EXPECTED_GANNET, out.output
    out = call(ts, "grep", pattern="Gannet")  # from work/ itself, under its own .gitignore and the global excludes
    assert out.ok and _grep_files(out) == EXPECTED_GANNET, out.output
    bash = call(ts, "bash", command="grep -rl Gannet dataroom | sort")
    assert set(bash.output.split()) == EXPECTED_GANNET


def test_fallback_grep_sees_what_ripgrep_sees(ignoring_toolset, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    out = call(ignoring_toolset, "grep", pattern="Gannet", path="dataroom")
    assert out.ok and _grep_files(out) == EXPECTED_GANNET, out.output


def test_find_and_ls_show_hidden_entries(ignoring_toolset):
    ts = ignoring_toolset
    out = call(ts, "find", pattern="*.md", path="dataroom")
    assert set(out.output.splitlines()) == EXPECTED_GANNET
    out = call(ts, "ls", path="dataroom")
    assert {".hidden-dir/", ".ignore", ".secret-notes.md"} <= {row.split("\t")[0] for row in out.output.splitlines()}
    out = call(ts, "ls")
    assert {".config/", ".gitignore", "dataroom/"} <= {row.split("\t")[0] for row in out.output.splitlines()}


def test_fallback_grep_runs_under_the_deadline(toolset, monkeypatch):
    """Issue 20: without ripgrep, `(a+)+$` on 40 a's backtracked for ever inside the harness process."""
    monkeypatch.setattr("shutil.which", lambda name: None)
    safe_write = toolset.call("write", json.dumps({"path": "aaaa.txt", "content": "a" * 40 + "!\n"}))
    assert safe_write.ok
    toolset.ctx.harness.bash_timeout_s = 2
    start = time.monotonic()
    out = call(toolset, "grep", pattern="(a+)+$", path="aaaa.txt")
    assert not out.ok and "timed out after 2s" in out.error
    assert time.monotonic() - start < 30  # killed at the deadline, not left running


# ---- structured results: programs read data, the model reads text ----------------------------------
def test_tool_results_carry_data_beside_their_text(toolset, monkeypatch):
    from searchbox.tools import ToolResult, builtins

    monkeypatch.setattr(builtins, "ls", lambda ctx, path=".": ToolResult("two files", {"files": ["a", "b"]}))
    out = call(toolset, "ls", path=".")
    assert out.ok and out.output == "two files" and out.data == {"files": ["a", "b"]}
    monkeypatch.setattr(builtins, "find", lambda ctx, pattern, path=".": {"hits": [1, 2]})
    toolset._impls.clear()
    out = call(toolset, "find", pattern="*")
    assert json.loads(out.output) == {"hits": [1, 2]} and out.data == {"hits": [1, 2]}
    out = call(toolset, "write", path="notes.md", content="x")
    assert out.ok and out.data is None  # a plain string has no data
    out = call(toolset, "read", path="no-such-file")
    assert not out.ok and out.data is None


def test_a_delivered_result_shows_programs_only_what_the_model_saw(tmp_path, monkeypatch):
    from searchbox.tools import ToolResult, builtins

    ws = open_workspace(tmp_path / "run", None)
    ts = Toolset(select("none"), ToolContext(work=ws.work, harness=HarnessConfig(), sandbox_mode="bwrap"), delivery="file")
    monkeypatch.setattr(builtins, "ls", lambda ctx, path=".": ToolResult("secret listing", {"files": ["gold.md"]}))
    out = call(ts, "ls", path=".")
    assert out.delivered == "results/1-ls.txt" and out.data == {"delivered": "results/1-ls.txt", "chars": len("secret listing")}
    assert "gold.md" not in json.dumps(out.data) and "secret listing" not in out.output


# ---- anything the model sends is the model's: checked before any tool runs -------------------------
def _leaves(schema):
    if schema.get("type") == "object":
        for sub in schema["properties"].values():
            yield from _leaves(sub)
    elif schema.get("type") == "array":
        yield schema
        yield from _leaves(schema["items"])
    else:
        yield schema


def test_every_catalog_argument_is_bounded():
    """The catalog is the one source of the bounds (the constrained-JSON grammar derives from it): no open-ended value."""
    for spec in CATALOG:
        for leaf in _leaves(spec.parameters):
            kind = leaf.get("type")
            if kind == "string":
                assert "maxLength" in leaf, (spec.name, leaf)
            elif kind == "array":
                assert "maxItems" in leaf, (spec.name, leaf)
            elif kind in ("integer", "number"):
                assert "maximum" in leaf and "minimum" in leaf, (spec.name, leaf)
            else:
                assert kind == "boolean" or "enum" in leaf, (spec.name, leaf)


@pytest.mark.parametrize("name, arguments, needle", [
    ("read", '{"path": "a.md", "offset": 2.0}', "is not of type 'integer'"),
    ("read", '{"path": "a.md", "limit": 1e999}', "not a finite number"),
    ("bash", '{"command": "echo", "timeout": NaN}', "NaN is not a number JSON allows"),
    ("bash", '{"command": "echo", "timeout": Infinity}', "Infinity is not a number JSON allows"),
    ("bash", '{"command": "echo a\\u0000b"}', "command: contains a NUL character"),
    ("write", '{"path": "a.md", "content": "\\ud83d"}', "content: not valid Unicode"),
    ("write", '{"path": "a.md", "content": "x", "\\ud83d": 1}', "not valid Unicode"),
    ("ls", '{"path": ' + "[" * 20 + "]" * 20 + "}", "nested too deep"),
    ("ls", '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
    ("ls", "[1, 2]", "must be a JSON object"),
    ("ls", '{"path": "' + "a" * 5000 + '"}', "path: 5000 characters, more than the 4096 allowed"),
    ("find", '{"pattern": "*", "extra": 1}', "Additional properties"),
    ("ls", '{"path": 5}', "is not of type 'string'"),
])
def test_arguments_outside_the_schema_are_malformed_calls(toolset, name, arguments, needle):
    out = toolset.call(name, arguments)
    assert not out.ok and out.malformed and needle in out.error, out.error
    assert out.output.startswith("Error:") and len(out.error) < 2000


def test_a_call_the_model_cannot_make_is_malformed_but_a_refusal_is_not(toolset):
    assert toolset.call("teleport", "{}").malformed
    assert toolset.call(5, "{}").malformed and toolset.call(5, "{}").tool == "5"
    refused = call(toolset, "read", path="../../etc/passwd")
    assert not refused.ok and not refused.malformed  # a well-formed request the tool declines: an answer, not a malformed call
    assert call(toolset, "ls", path="dataroom").malformed is False


def test_invalid_call_found_by_a_tool_later_is_malformed(toolset, monkeypatch):
    from searchbox.tools import InvalidCall, builtins

    def refuse(ctx, command, timeout=None):
        raise InvalidCall("the command is too long for exec")

    monkeypatch.setattr(builtins, "bash", refuse)
    out = call(toolset, "bash", command="echo hi")
    assert not out.ok and out.malformed and "too long for exec" in out.output


def test_arguments_a_server_sent_parsed_are_checked_the_same(toolset):
    out = toolset.call("read", {"path": "dataroom/reports/gannet-rock-survey.md", "offset": 2})
    assert out.ok and json.loads(out.arguments)["offset"] == 2
    assert toolset.call("read", {"path": "dataroom/README.md", "offset": 2.0}).malformed


def test_the_model_sees_the_schemas_without_the_validation_limits():
    """Validation limits (a million-character write, a thousand-item list) are enforced on what the model sends but
    never shown to it: a capable model is asked what it was asked before the limits, and a llama.cpp grammar built
    from native tool schemas never meets a repeat count past its limit."""
    from searchbox.tools.catalog import CATALOG, LIMITS_KEY

    def keys(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                yield from keys(v)
        elif isinstance(node, list):
            for v in node:
                yield from keys(v)

    for spec in CATALOG:
        shown, checked = spec.schema()["parameters"], spec.schema(limits=True)["parameters"]
        assert LIMITS_KEY not in set(keys(shown)) | set(keys(checked))
        assert not {"maxLength", "maxItems"} & set(keys(shown)), spec.name
    bash = {s.name: s for s in CATALOG}["bash"].schema(limits=True)["parameters"]["properties"]
    assert bash["command"]["maxLength"] == 100_000 and bash["timeout"]["maximum"] == 3600
    assert {s.name: s for s in CATALOG}["read"].schema()["parameters"]["properties"]["offset"] == {"type": "integer", "minimum": 1}
