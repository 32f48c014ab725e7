"""Hostile battery, round two (services): attempts registered into tests.hostile_attempts.ATTEMPTS (imported at its end).

A second client, a scripted model or a crafted file against the services around a run: the web app, scout,
the MCP server, the persistent index, and the sweep directory under faults (a full disk, a second launch).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes.deep import deep_tree
from tests.hostile_attempts import ROOT, Unavailable, attempt, held

SWEEP = [sys.executable, "-m", "searchbox.sweep", "-m", "dataroom=tiny", "questions=tiny", "model=control-keyword", "tools=none",
         "harness.today=2026-01-01"]


# ---- web app -------------------------------------------------------------------------------------------
def _run_dir(out: Path) -> Path:
    run = out / "runs" / "x"
    (run / "work").mkdir(parents=True)
    (run / "run_meta.json").write_text('{"status": "complete", "stop_reason": "budget_spent"}')
    (run / "trace.jsonl").write_text("")
    return run


@attempt("web", "a job endpoint with a query string (or another internal URL) to make the run probe an internal service")
def web_endpoint_probe(tmp: Path) -> str:
    from tests.fakes.loopback import JsonHandler, Loopback
    from tests.fakes.webapp import LiveApp

    hits: list[str] = []

    class Admin(JsonHandler):
        def do_GET(self):
            hits.append(self.path)
            self._send(200, {"secret": "internal admin page"})

        do_POST = do_GET

    with Loopback(Admin) as admin, LiveApp(tmp / "out", "http://127.0.0.1:9") as app:
        statuses = {}
        for endpoint in (f"{admin.url}/internal/admin?x=1", f"{admin.url}/internal/admin", admin.url, f"http://u:p@{admin.url[7:]}",
                         f"{admin.url}#frag", "file:///etc/passwd"):
            resp = app.post("/api/jobs", data={"question": "q", "endpoint": endpoint})
            statuses[endpoint] = resp.status_code
            held(resp.status_code in (400, 403) and "\n" not in resp.json().get("error", ""),
                 f"endpoint {endpoint!r} accepted ({resp.status_code}: {resp.text[:200]})")
        time.sleep(0.5)
    held(hits == [], f"the internal service was reached: {hits}")
    return f"refused {sorted(set(statuses.values()))} for {len(statuses)} endpoints; the internal service saw no request"


@attempt("web", "a file name that is not UTF-8 in work/, then ask the web app for the file list and the file")
def web_non_utf8_name(tmp: Path) -> str:
    from tests.fakes.webapp import LiveApp

    run = _run_dir(tmp / "out")
    with open(os.fsencode(run / "work") + b"/bad-\xff-name.md", "wb") as fh:
        fh.write(b"odd name")
    with LiveApp(tmp / "out", "http://127.0.0.1:9") as app:
        resp = app.get("/api/runs/runs/x/files")
        held(resp.status_code == 200, f"file list answered {resp.status_code}")
        listed = [p for p, _ in resp.json()["work"]]
        held(listed == ["work/bad-\\xff-name.md"], f"listed {listed}")
        got = app.get("/api/runs/runs/x/file", params={"path": listed[0]})
        held(got.status_code == 200 and got.json()["text"] == "odd name", f"serving it answered {got.status_code}: {got.text[:200]}")
    return "listed as work/bad-\\xff-name.md and served"


@attempt("web", "30 nested 200-character folders in work/ (deeper than PATH_MAX), then the file list")
def web_deep_tree(tmp: Path) -> str:
    from tests.fakes.webapp import LiveApp

    run = _run_dir(tmp / "out")
    deep_tree(run / "work", leaves={"deep.txt": b"bottom"})
    try:
        with LiveApp(tmp / "out", "http://127.0.0.1:9") as app:
            resp = app.get("/api/runs/runs/x/files")
            held(resp.status_code == 200, f"file list answered {resp.status_code}")
            deep = [p for p, _ in resp.json()["work"] if p.endswith("deep.txt")]
            held(len(deep) == 1, "the deep file is not listed")
            got = app.get("/api/runs/runs/x/file", params={"path": deep[0]})
            held(got.status_code == 200 and got.json()["text"] == "bottom", f"serving it answered {got.status_code}")
    finally:
        shutil.rmtree(run / "work")
    return f"listed and served a file {len(deep[0])} characters deep"


@attempt("web", "a cross-site POST with no Origin header but Sec-Fetch-Site: cross-site (and same-site)")
def web_sec_fetch_site(tmp: Path) -> str:
    from tests.fakes.webapp import LiveApp

    with LiveApp(tmp / "out", "http://127.0.0.1:9") as app:
        for site in ("cross-site", "same-site"):
            resp = app.post("/api/jobs", data={"question": "q"}, headers={"Sec-Fetch-Site": site})
            held(resp.status_code == 403, f"Sec-Fetch-Site: {site} accepted ({resp.status_code})")
        held(app.get("/api/jobs").json()["jobs"] == [], "a job was created")
        plain = app.post("/api/jobs", data={"budget": "1"})
        held(plain.status_code == 400 and "question" in plain.json()["error"], f"a client without the header now fails ({plain.status_code})")
    return "refused with 403; clients that send no Sec-Fetch-Site still work"


# ---- scout -----------------------------------------------------------------------------------------------
@attempt("scout", "a model read with start: 1e999, NaN, a lone surrogate path, a numeric action name, arguments 50,000 deep")
def scout_malformed_values(tmp: Path) -> str:
    from searchbox.scout.__main__ import main
    from tests.fakes.scout_repo import make_repo
    from tests.fakes.scripted_server import ScriptedServer

    repos, _ = make_repo(tmp)
    calls = [{"name": "read", "arguments": '{"path": "calc.py", "start": 1e999}'},
             {"name": "read", "arguments": '{"path": "calc.py", "end": NaN}'},
             {"name": "read", "arguments": '{"path": "calc\\ud83d.py"}'}]
    script = [{"tool_calls": calls}, {"tool_calls": [{"name": 7, "arguments": "{}"}]},
              {"tool_calls": [{"name": "read", "arguments": '{"path": ' + "[" * 50_000 + "]" * 50_000 + "}"}]},
              {"tool_calls": [{"name": "not_found", "arguments": "{}"}]}]
    with ScriptedServer(script) as srv:
        code = main(["Where is the accumulator?", str(repos / "tiny"), "--endpoint", srv.url, "--protocol", "native", "--budget", "4",
                     "--out", str(tmp / "run")])
    held(code == 0, f"scout exited {code}")
    meta = json.loads((tmp / "run" / "run_meta.json").read_text())
    held(meta["stop_reason"] == "abstained", f"ended {meta['stop_reason']}: {meta.get('stop_detail')}")
    refused = meta["tool_errors"] + meta["malformed_replies"]
    held(refused == 5, f"{refused} refused actions or replies counted, 5 sent")
    return "each was a refused action (or a malformed reply) the model read, 5 counted; the search went on to not_found, exit 0"


# ---- MCP ---------------------------------------------------------------------------------------------------
@attempt("mcp", "raw JSON-RPC lines: a tools/call with a lone surrogate, not JSON, a batch, params of the wrong type, 5,000 deep")
def mcp_raw_lines(tmp: Path) -> str:
    from searchbox.corpus.dataroom import builtin_dataroom

    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "search_dataroom", "arguments": %s}}'
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    lines = [json.dumps(init), '{"jsonrpc": "2.0", "method": "notifications/initialized"}', call % (1, '{"query": "gannet \\ud83d"}'),
             "not json", "[1, 2]", '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": 5}',
             call % (5, '{"query": ' + "[" * 5000 + "]" * 5000 + "}"), call % (6, '{"query": "gannet rock", "k": 1}')]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "searchbox.mcp", "--dataroom", str(builtin_dataroom()), "--retriever", "bm25"],
                              input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=300, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server hung on the hostile lines") from None
    answers = {}
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        answers.setdefault(obj.get("id"), []).append(obj)
    missing = [i for i in (0, 1, 4, 5, 6, None) if i not in answers]
    held(not missing, f"no response for id(s) {missing}")
    held(answers[1][0].get("error", {}).get("code") == -32602, f"the lone surrogate got {answers[1][0]}")
    held("result" in answers[6][0] and not answers[6][0]["result"].get("isError"), "the server stopped serving")
    err = proc.stderr.decode("utf-8", errors="replace")
    held(all(f"response {i}:" in err for i in (1, 4, 5, 6)), f"not every request was logged: {err[-500:]}")
    return f"{sum(len(v) for v in answers.values())} responses (each an error or a result), each logged on stderr"


# ---- index -----------------------------------------------------------------------------------------------
def _hash_index(tmp: Path) -> tuple[Path, Path]:
    from searchbox.corpus.dataroom import builtin_dataroom
    from searchbox.retrieval.index.cli import main

    src, folder = tmp / "src", tmp / "ix"
    shutil.copytree(builtin_dataroom(), src)
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        held(main(["build", str(src), "--index", str(folder), "--embedder", "hash"]) == 0, "the index did not build")
    return src, folder


@attempt("index", "garbage in a BM25 vocabulary file, then index search --retriever bm25")
def index_corrupt_bm25(tmp: Path) -> str:
    _, folder = _hash_index(tmp)
    next(folder.glob("g*.bm25")).joinpath("vocab.index.json").write_text("garbage{{{")
    proc = subprocess.run([sys.executable, "-m", "searchbox.index", "search", "Gannet Rock", "--index", str(folder), "--retriever", "bm25"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = proc.stderr.strip().splitlines()
    held(proc.returncode == 2 and len(lines) == 1 and "doctor" in lines[0] and "Traceback" not in proc.stderr,
         f"exit {proc.returncode}: {proc.stderr[-400:]}")
    return f"one line: {lines[0][:120]}"


READER = r"""
import json, sys, time
from pathlib import Path
from searchbox.retrieval.index.store import Index
folder, n = Path(sys.argv[1]), int(sys.argv[2])
bad = []
for _ in range(n):
    try:
        idx = Index.open(folder)
        time.sleep(0.005)
        hits = idx.bm25_top("gannet rock keeper fog", 5)
        [idx.chunk(r).text for r, _ in hits]
        idx.close()
    except Exception as exc:
        bad.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(bad))
"""


@attempt("index", "index refresh --compact in a loop while 3 processes search (BM25 loaded after the open)")
def index_search_during_refresh(tmp: Path) -> str:
    from searchbox.retrieval.index.build import refresh
    from searchbox.retrieval.index.encoders import encoder_for
    from searchbox.retrieval.index.store import read_state

    src, folder = _hash_index(tmp)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(folder), "150"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env) for _ in range(3)]
    enc = encoder_for(read_state(folder)["embedder"]["config"], device="cpu")
    rounds = 0
    while any(p.poll() is None for p in readers) and rounds < 40:
        (src / "note.md").write_text(f"round {rounds}: the gannet rock keeper logged fog\n" * 3)
        refresh(folder, enc, compact=True)
        rounds += 1
    failures = []
    for p in readers:
        out, err = p.communicate(timeout=300)
        held(p.returncode == 0, f"a reader crashed: {err[-300:]}")
        failures += json.loads(out.strip().splitlines()[-1])
    held(not failures, f"{len(failures)} of 450 searches failed: {failures[:2]}")
    return f"450 searches during {rounds} refresh+compactions: none failed"


# ---- sweep faults --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def small_disk(tmp: Path, size: str) -> Path:
    """A tmpfs of `size` mounted at tmp/disk (root only); unmounted after."""
    mnt = tmp / "disk"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unavailable(f"cannot mount a small tmpfs here ({proc.stderr.strip()[:100]}): needs root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int = 0) -> Path:
    """A filler file taking all but about `leave` bytes of mnt's free space."""
    filler = mnt / f"filler-{len(list(mnt.glob('filler-*')))}"
    deadline = time.monotonic() + 30
    while True:  # the sweep may hold the disk full for a moment (a temporary it is writing): then even a create fails
        try:
            fh = open(filler, "wb")
            break
        except OSError as exc:
            if exc.errno != errno.ENOSPC or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with fh:
        with contextlib.suppress(OSError):  # ENOSPC: full
            while True:
                st = os.statvfs(mnt)
                room = st.f_bavail * st.f_frsize - leave
                if room <= 0:
                    break
                fh.write(b"\0" * min(room, 1 << 20))
                fh.flush()
    return filler


@attempt("faults", "a disk that fills up in the middle of a sweep, then a relaunch after freeing space")
def sweep_disk_full(tmp: Path) -> str:
    with small_disk(tmp, "16m") as mnt:
        cmd = [*SWEEP, "budget=1,2", "questions.limit=6", f"sweep.root={mnt}"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not list(mnt.glob("default/runs/*/DONE")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        _fill(mnt)  # the disk is full from the second run on
        _, err = proc.communicate(timeout=300)
        lines = [ln for ln in err.splitlines() if ln.startswith("searchbox:")]
        held(proc.returncode == 2 and "Traceback" not in err, f"exit {proc.returncode}: {err[-600:]}")
        held(len(lines) == 1 and "disk full writing" in lines[0] and "free space" in lines[0], f"said: {lines}")
        leftovers = [str(p) for p in mnt.rglob(".*.tmp")]
        held(not leftovers, f"temporaries left: {leftovers}")
        stopped = [json.loads(p.read_text()) for p in mnt.glob("default/runs/.tmp-*/run_meta.json")]
        held(any("disk full" in (m.get("stop_detail") or "") for m in stopped), "the run that hit it recorded no stop")
        for filler in mnt.glob("filler-*"):
            filler.unlink()
        again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        held(again.returncode == 0, f"the relaunch failed: {again.stderr[-400:]}")
        done = len(list(mnt.glob("default/runs/*/DONE")))
        held(done == 12 and not list(mnt.glob("default/runs/.tmp-*")), f"{done}/12 done after the relaunch")
    return f"one line ({lines[0][:90]}...), the stop recorded, no temporaries; 12/12 after freeing space"


@attempt("faults", "a second sweep launched into the directory of one still running")
def sweep_two_launches(tmp: Path) -> str:
    from tests.fakes.scripted_server import ScriptedServer

    base = [sys.executable, "-m", "searchbox.sweep", "-m", "dataroom=tiny", "questions=tiny", "tools=none", "budget=1,2",
            "questions.limit=2", f"sweep.root={tmp}", "harness.today=2026-01-01", "model.retries=0"]
    with ScriptedServer([{"sleep": 0.5, "content": "slow"}] * 100) as srv:
        env = {**os.environ, "LLAMA_URL": srv.url}
        first = subprocess.Popen(base, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not list((tmp / "default" / "runs").glob(".tmp-*")) and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.1)
        second = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        _, err = first.communicate(timeout=300)
    lines = [ln for ln in second.stderr.splitlines() if ln.startswith("searchbox:")]
    held(second.returncode == 2 and len(lines) == 1 and "in use by another launch" in lines[0] and "Traceback" not in second.stderr,
         f"the second launch: exit {second.returncode}: {second.stderr[-400:]}")
    held(first.returncode == 0 and "Traceback" not in err, f"the first launch: exit {first.returncode}: {err[-400:]}")
    runs = tmp / "default" / "runs"
    held(len(list(runs.glob("*/DONE"))) == 4 and not list(runs.glob(".tmp-*")), "the first launch did not finish cleanly")
    return f"the second refused in one line; the first finished 4/4 with no .tmp left"


@attempt("faults", "relaunch a sweep over .tmp-KEY-PID folders left by a killed process (one read-only, one 30 folders deep)")
def sweep_stale_tmp(tmp: Path) -> str:
    runs = tmp / "default" / "runs"
    stale = runs / ".tmp-0123456789abcdef-999999"
    (stale / "work" / "dataroom").mkdir(parents=True)
    (stale / "work" / "dataroom" / "a.md").write_text("x")
    os.chmod(stale / "work" / "dataroom", 0o555)
    deep = runs / ".tmp-fedcba9876543210-999998"
    deep.mkdir()
    deep_tree(deep, leaves={})
    proc = subprocess.run([*SWEEP, "budget=1", "questions.limit=2", f"sweep.root={tmp}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    held(proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-400:]}")
    left = [p.name for p in runs.glob(".tmp-*")]
    held(not left, f"stale folders left: {left}")
    return "both removed at launch; 2/2 runs done"


@attempt("faults", "atomic_write onto a full disk")
def atomic_write_full(tmp: Path) -> str:
    from searchbox.paths import atomic_write

    with small_disk(tmp, "1m") as mnt:
        _fill(mnt, 4096)
        try:
            atomic_write(mnt / "state.json", b"x" * 200_000)
        except OSError:
            pass
        else:
            raise AssertionError("the write did not fail")
        left = [p.name for p in mnt.iterdir() if not p.name.startswith("filler")]
    held(not left, f"left behind: {left}")
    return "the write failed with ENOSPC and left no temporary"
