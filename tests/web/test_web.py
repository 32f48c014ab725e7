"""The web app over real HTTP (uvicorn on a loopback port) with jobs run as real subprocesses against the scripted server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import time
import zipfile
from pathlib import Path

import httpx
import pandas as pd
import pytest

from searchbox.web import serve
from searchbox.corpus.dataroom import builtin_dataroom
from tests.fakes.deep import deep_tree
from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.webapp import LiveApp, make_sweep, sse, turn_script, wait_for


def dataroom_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        root = builtin_dataroom()
        for path in sorted(root.rglob("*")):
            if path.is_file():
                zf.write(path, f"room/{path.relative_to(root)}")
    return buf.getvalue()


def submit(app, budget=2, tools="none", question="How tall is Gannet Rock?", files=None, **fields):
    resp = app.post("/api/jobs", data={"question": question, "budget": str(budget), "tools": tools, **fields}, files=files)
    assert resp.status_code == 201, resp.text
    return resp.json()["job"]


def turns_done(app, job) -> int:
    snap = app.get(f"/api/runs/{job['ref']}/snapshot").json()
    assert "turns" in snap, snap
    return len(snap["turns"])


def test_upload_job_streams_its_own_trace_and_finishes(tmp_path):
    with ScriptedServer(turn_script(2)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        job = submit(app, files={"dataroom": ("room.zip", dataroom_zip(), "application/zip")})
        assert job["state"] in ("queued", "running") and job["ref"] == f"web/jobs/{job['id']}"
        seen: dict[str, list] = {}
        last_id = ""
        for event, data, ev_id in sse(f"{app.url}/api/runs/{job['ref']}/events"):
            seen.setdefault(event, []).append(data)
            last_id = ev_id or last_id
        assert "end" in seen and seen["end"][-1]["stop_reason"] == "budget_spent"
        trace = [e for batch in seen["trace"] for e in batch]
        calls = [c["name"] for e in trace if e.get("role") == "assistant" for c in e.get("tool_calls", [])]
        assert calls == ["ls", "bash", "write"] * 2
        outputs = [e for e in trace if e.get("role") == "tool"]
        assert any("gannet" in e["content"].lower() for e in outputs if e["name"] == "bash")
        usage = [e["usage"] for e in trace if e.get("role") == "assistant"]
        assert all(u["prompt"] > 0 for u in usage)
        # the streamed tables are the run's own: per-turn tokens equal its parquet and the trace's usage
        run_dir = tmp_path / "out" / "web" / "jobs" / job["id"]
        turns = pd.read_parquet(run_dir / "turns.parquet")
        streamed = seen["turns"][-1]
        assert [r["prompt_tokens"] for r in streamed] == turns["prompt_tokens"].tolist()
        assert sum(u["prompt"] for u in usage) == turns["prompt_tokens"].sum() == srv.usage_total["prompt"]
        bash_rows = [r for r in seen["calls"][-1] if r["tool"] == "bash"]
        assert bash_rows and set(bash_rows[0]["programs"]) >= {"grep", "head"}
        assert seen["meta"][-1]["status"] == "complete" and seen["job"][-1]["state"] == "done"
        meta = json.loads((run_dir / "run_meta.json").read_text())
        assert meta["dataroom"]["files"] == 7  # the uploaded zip, its wrapper folder stripped

        # reconnecting with Last-Event-ID replays nothing twice
        again = list(sse(f"{app.url}/api/runs/{job['ref']}/events", headers={"Last-Event-ID": last_id}))
        assert [e for e, _, _ in again if e == "trace"] == [] and again[-1][0] == "end"

        answer = app.get(f"/api/runs/{job['ref']}/answer").json()
        assert answer["present"] and "<strong>38.4 metres</strong>" in answer["html"]
        assert "<script>" not in answer["html"] and "&lt;script&gt;" in answer["html"]
        tree = app.get(f"/api/runs/{job['ref']}/files").json()
        work = [p for p, _ in tree["work"]]
        assert "work/ANSWER.md" in work and "work/dataroom/reports/gannet-rock-survey.md" in work
        assert "trace.jsonl" in [p for p, _ in tree["artifacts"]]
        doc = app.get(f"/api/runs/{job['ref']}/file", params={"path": "work/dataroom/reports/gannet-rock-survey.md"}).json()
        assert "Gannet Rock" in doc["text"] and not doc["binary"]
        assert app.get(f"/api/runs/{job['ref']}/file", params={"path": "turns.parquet"}).json()["binary"]
        page = app.get(f"/runs/{job['ref']}")
        assert page.status_code == 200 and "tokens-chart" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]


def test_pause_is_sticky_and_resume_continues_the_same_run(tmp_path):
    with ScriptedServer(turn_script(3, sleep=0.25)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        job = submit(app, budget=3)
        wait_for(lambda: turns_done(app, job) >= 1, what="a first turn")
        held = app.post(f"/api/jobs/{job['id']}/pause").json()["job"]
        assert held["state"] == "held" or held["pausing"] == "hold"
        held = app.wait_job(job["id"], ("held",))
        assert held["stop_reason"] == "paused"
        run_dir = tmp_path / "out" / "web" / "jobs" / job["id"]
        first = json.loads((run_dir / "run_meta.json").read_text())
        assert first["stop_reason"] == "paused" and first["turns"] < 3
        time.sleep(1.0)
        assert app.get(f"/api/jobs/{job['id']}").json()["job"]["state"] == "held"  # idle, yet never backfilled
        assert app.post(f"/api/jobs/{job['id']}/pause").status_code == 200  # pausing a held job is a no-op
        app.post(f"/api/jobs/{job['id']}/resume", json={"budget": 3})
        done = app.wait_job(job["id"], ("done",))
        assert done["launches"] == 2
        meta = json.loads((run_dir / "run_meta.json").read_text())
        assert meta["run_id"] == first["run_id"] and meta["turns"] == 3 and meta["resumes"] == 1
        turns = pd.read_parquet(run_dir / "turns.parquet")
        assert turns["turn"].tolist() == [1, 2, 3]
        assert turns["prompt_tokens"].sum() == meta["tokens"]["prompt"] == srv.usage_total["prompt"]
        kinds = [json.loads(line)["type"] for line in (run_dir / "trace.jsonl").read_text().splitlines()]
        assert "resume" in kinds and kinds.count("stop") == 2
        finished = app.post(f"/api/jobs/{job['id']}/resume", json={})
        assert finished.status_code == 400 and "larger budget" in finished.json()["error"]


def test_new_job_preempts_and_the_preempted_one_resumes(tmp_path):
    with ScriptedServer(turn_script(4, sleep=0.2)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        a = submit(app, budget=2, question="first question")
        wait_for(lambda: turns_done(app, a) >= 1, what="a's first turn")
        b = submit(app, budget=1, question="second question")
        paused = app.wait_job(a["id"], ("paused",))
        assert paused["preempted"] and paused["stop_reason"] == "paused"
        app.wait_job(b["id"], ("done",))
        a_done = app.wait_job(a["id"], ("done",))
        assert a_done["launches"] == 2
        b_meta = json.loads((tmp_path / "out" / "web" / "jobs" / b["id"] / "run_meta.json").read_text())
        a_meta = json.loads((tmp_path / "out" / "web" / "jobs" / a["id"] / "run_meta.json").read_text())
        assert a_meta["turns"] == 2 and a_meta["resumes"] == 1 and b_meta["turns"] == 1
        assert b_meta["finished_at"] < a_meta["finished_at"]


def test_restart_returns_a_running_job_to_the_pool(tmp_path):
    with ScriptedServer(turn_script(3, sleep=0.25)) as srv:
        with LiveApp(tmp_path / "out", srv.url) as app:
            job = submit(app, budget=3)
            wait_for(lambda: turns_done(app, job) >= 1, what="a first turn")
        # the server stopped: the job was paused, not lost
        with LiveApp(tmp_path / "out", srv.url) as app:
            done = app.wait_job(job["id"], ("done",))
            assert done["launches"] == 2
            meta = app.get(f"/api/runs/{job['ref']}/snapshot").json()["meta"]
            assert meta["turns"] == 3 and meta["resumes"] == 1


def hostile_zips(tmp_path) -> dict[str, bytes]:
    def make(entries, symlink=None):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in entries:
                zf.writestr(name, data)
            if symlink:
                info = zipfile.ZipInfo(symlink)
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, "/etc/passwd")
        return buf.getvalue()

    return {"traversal": make([("ok.txt", "x"), ("../evil.txt", "x")]), "absolute": make([("/etc/evil.txt", "x")]),
            "symlink": make([("ok.txt", "x")], symlink="link"), "not a zip": b"just some text, not an archive"}


@pytest.mark.parametrize("kind,reason", [("traversal", "traversal"), ("absolute", "absolute"), ("symlink", "link"), ("not a zip", "zip")])
def test_hostile_uploads_are_refused(tmp_path, kind, reason):
    with LiveApp(tmp_path / "out", "http://127.0.0.1:9") as app:
        resp = app.post("/api/jobs", data={"question": "q", "budget": "1"}, files={"dataroom": ("evil.zip", hostile_zips(tmp_path)[kind])})
        assert resp.status_code == 400, resp.text
        err = resp.json()["error"]
        assert reason in err.lower() and "evil.zip" in err and "Traceback" not in err
        assert str(tmp_path) not in err  # no server paths in the message
        assert app.get("/api/jobs").json()["jobs"] == []
        assert list((tmp_path / "out" / "web" / "uploads").iterdir()) == []


def test_bad_input_gets_a_reason_not_a_traceback(tmp_path):
    with LiveApp(tmp_path / "out", "http://127.0.0.1:9", max_upload_bytes=20_000) as app:
        cases = [({"budget": "2"}, "question: required"), ({"question": "q", "budget": "abc"}, "budget: a whole number"),
                 ({"question": "q", "budget": "0"}, "budget: between 1"), ({"question": "q", "tools": "hammer"}, "unknown tool 'hammer'"),
                 ({"question": "q", "endpoint": "file:///etc/passwd"}, "endpoint: an http(s) URL"),
                 ({"question": "q", "budget_unit": "days"}, "budget_unit")]
        for data, reason in cases:
            resp = app.post("/api/jobs", data=data)
            assert resp.status_code == 400 and reason in resp.json()["error"], (data, resp.text)
        big = app.post("/api/jobs", data={"question": "q"}, files={"dataroom": ("big.zip", os.urandom(100_000))})
        assert big.status_code == 413 and "upload limit of" in big.json()["error"]
        huge = app.post("/api/jobs", data={"question": "q"}, files={"dataroom": ("huge.zip", os.urandom(1_200_000))})
        assert huge.status_code == 413 and "over the upload limit" in huge.json()["error"]
        assert app.post("/api/jobs/nope/pause").status_code == 404
        assert app.post("/api/jobs", content=b"{not json", headers={"content-type": "application/json"}).status_code == 400
        html = app.get("/runs/no/such/run")
        assert html.status_code == 404 and "text/html" in html.headers["content-type"] and "no such run" in html.text
        assert app.get("/sweeps/nope").status_code == 404
        assert app.get("/api/jobs").json()["jobs"] == []


def test_paths_cannot_leave_the_run_or_follow_links(tmp_path):
    out = tmp_path / "out"
    run = out / "runs" / "x"
    (run / "work" / "sub").mkdir(parents=True)
    (run / "run_meta.json").write_text('{"status": "complete", "stop_reason": "budget_spent"}')
    (run / "trace.jsonl").write_text("")
    (run / "work" / "ANSWER.md").write_text("fine")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    os.symlink(secret, run / "work" / "link.txt")  # what a model could make with bash
    os.symlink(tmp_path, run / "work" / "linkdir")
    os.mkfifo(run / "work" / "fifo")
    os.symlink(run, out / "runs" / "alias")  # a linked run directory is not followed either
    with LiveApp(out, "http://127.0.0.1:9") as app:
        ok = app.get("/api/runs/runs/x/file", params={"path": "work/ANSWER.md"})
        assert ok.status_code == 200 and ok.json()["text"] == "fine"
        for path in ("../../secret.txt", "/etc/passwd", "work/link.txt", "work/linkdir/secret.txt", "work/fifo", "work/../../../secret.txt"):
            resp = app.get("/api/runs/runs/x/file", params={"path": path})
            assert resp.status_code == 404 and "TOP SECRET" not in resp.text, path
        listed = [p for p, _ in app.get("/api/runs/runs/x/files").json()["work"]]
        assert listed == ["work/ANSWER.md"]
        for ref in ("runs/x/work", "runs/alias", "runs/x/work/linkdir", "runs/%2e%2e/runs/x", "..", "/etc"):
            assert app.get(f"/api/runs/{ref}/files").status_code == 404, ref
            assert app.get(f"/api/runs/{ref}/answer").status_code == 404, ref
        with httpx.stream("GET", f"{app.url}/api/runs/runs/alias/events") as resp:
            assert resp.status_code == 404


def test_token_and_origin_guards(tmp_path):
    with LiveApp(tmp_path / "out", "http://127.0.0.1:9", token="s3cret", loopback=False) as app:
        assert app.get("/api/jobs").status_code == 401
        assert app.get("/").status_code == 401
        assert app.get("/api/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert app.get("/api/jobs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        login = app.get("/?token=s3cret")
        assert login.status_code == 303 and "searchbox_token=s3cret" in login.headers["set-cookie"]
        assert app.get("/api/jobs", cookies={"searchbox_token": "s3cret"}).status_code == 200
        assert app.get("/?token=nope").status_code == 401
    with LiveApp(tmp_path / "out2", "http://127.0.0.1:9") as app:
        assert app.get("/api/jobs", headers={"Host": "evil.example:8000"}).status_code == 400  # DNS rebinding
        resp = app.post("/api/jobs", data={"question": "q"}, headers={"Origin": "http://evil.example"})
        assert resp.status_code == 403 and app.get("/api/jobs").json()["jobs"] == []


def test_serve_refuses_a_public_bind_without_token(capsys):
    assert serve.main(["--host", "0.0.0.0", "--endpoint", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("searchbox: --host 0.0.0.0 is reachable from other machines: set --token")
    assert serve.is_loopback("127.0.0.1") and serve.is_loopback("::1") and not serve.is_loopback("0.0.0.0")


def test_serve_refuses_a_busy_port(capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert serve.main(["--port", str(port), "--endpoint", "http://127.0.0.1:9", "--slots", "1"]) == 2
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err


def test_sweeps_list_table_and_report(tmp_path):
    out = tmp_path / "out"
    with ScriptedServer([]) as srv:
        make_sweep(out, srv)
    with LiveApp(out, "http://127.0.0.1:9") as app:
        sweeps = app.get("/api/sweeps").json()["sweeps"]
        assert [(s["name"], s["runs"], s["done"], s["table"], s["figures"]) for s in sweeps] == [("demo", 4, 4, True, 0)]
        detail = app.get("/api/sweeps/demo").json()
        assert detail["axes"] == ["tools", "budget"] and detail["total_rows"] == 4
        # scores first (the primary grade, the lenient one, evidence), then the axes that vary, then what a run did
        assert detail["shown"][:6] == ["run_id", "correct", "contains", "evidence_recall", "f1", "exact_match"]
        assert detail["shown"].index("tools") < detail["shown"].index("budget") < detail["shown"].index("turns")
        assert {r["run_id"]: r["correct"] for r in detail["rows"]} == {"grep_only-b1": 1.0, "grep_only-b2": 1.0, "none-b1": 0.0, "none-b2": 0.0}
        # filters only on what varies; columns that never vary are listed once, beside the table
        assert detail["filters"] == ["tools", "budget", "correct"]
        assert detail["constants"]["question_id"] == "q1" and detail["constants"]["model"] == "smollm2-135m"
        assert not set(detail["constants"]) & set(detail["columns"])
        # "every column" is what varies and says something new: harness.budget repeats budget, so only budget stays
        assert "budget" in detail["columns"] and "harness.budget" not in detail["columns"] and len(detail["columns"]) < 40
        ref = next(r["_ref"] for r in detail["rows"] if r["run_id"] == "grep_only-b2")
        events = dict((e, d) for e, d, _ in sse(f"{app.url}/api/runs/{ref}/events"))  # a sweep's run replays in the dashboard
        assert events["end"]["stop_reason"] == "budget_spent" and len(events["turns"]) == 2
        assert app.get("/sweeps/demo/figures/tool_choice.png").status_code == 404  # not rendered yet
        report = app.post("/api/sweeps/demo/report")
        assert report.status_code == 200, report.text
        assert {"tool_choice.png", "tokens_per_turn.svg"} <= set(report.json()["figures"])
        assert (out / "reports" / "demo" / "summary.md").is_file()  # where main.sh writes a sweep's report too
        fig = app.get("/sweeps/demo/figures/tool_choice.png")
        assert fig.status_code == 200 and fig.headers["content-type"] == "image/png" and fig.content[:4] == b"\x89PNG"
        detail = app.get("/api/sweeps/demo").json()
        names = [f["name"] for f in detail["figures"]]
        assert "tool_choice" in names and len(names) == len(set(names))  # each figure once (PNG, with its SVG beside)
        assert next(f for f in detail["figures"] if f["name"] == "tool_choice")["svg"] == "tool_choice.svg"
        summary_md = (out / "reports" / "demo" / "summary.md").read_text()
        assert "](tool_choice.png)" in summary_md and "<img" not in detail["summary_html"]  # not a second time in the summary
        assert detail["report"]["folder"] == "reports/demo"
        assert app.get("/api/sweeps").json()["sweeps"][0]["figures"] == len(names)
        for bad in ("../demo/runs.parquet", "summary.md", "..%2f..%2fsecret.png"):
            assert app.get(f"/sweeps/demo/figures/{bad}").status_code == 404
        assert app.get("/api/sweeps/..").status_code == 404


def test_figures_searchbox_report_drew_are_found_where_it_wrote_them(tmp_path):
    """main.sh runs `searchbox.report SWEEP --out OUTPUTS/reports/NAME`; an older render sits in SWEEP/report: the newer is shown."""
    out = tmp_path / "out"
    sweep = out / "sweeps" / "s"
    (sweep / "runs").mkdir(parents=True)
    old, new = sweep / "report", out / "reports" / "s"
    for folder, fig in ((old, "old_fig"), (new, "new_fig")):
        folder.mkdir(parents=True)
        (folder / f"{fig}.png").write_bytes(b"\x89PNG fake")
        (folder / "summary.md").write_text(f"# {fig}\n\n![The {fig}]({fig}.png)\n")
    os.utime(old / "old_fig.png", (1, 1))
    os.utime(old / "summary.md", (1, 1))
    import pandas as pd

    pd.DataFrame([{"run_id": "r1", "correct": 1.0}]).to_parquet(sweep / "runs.parquet")
    with LiveApp(out, "http://127.0.0.1:9") as app:
        detail = app.get("/api/sweeps/s").json()
        assert [(f["name"], f["title"]) for f in detail["figures"]] == [("new_fig", "The new fig")]
        assert app.get("/sweeps/s/figures/new_fig.png").status_code == 200
        assert app.get("/sweeps/s/figures/old_fig.png").status_code == 404


def _children_named(ppid: int, suffix: bytes) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0]
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == ppid and argv0.endswith(suffix):
                pids.add(int(entry.name))
    return pids


@pytest.mark.e2e
def test_serve_on_the_embedded_default(tmp_path, real_home):
    """`python -m searchbox.serve` starts one llama-server for its lifetime and hands its URL to every job."""
    import signal
    import subprocess
    import sys

    from searchbox.model import llama

    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup` (.ci/run does)")
    port = llama.free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_URL", "SEARCHBOX_TOKEN")}
    proc = subprocess.Popen([sys.executable, "-m", "searchbox.serve", "--port", str(port), "--outputs", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(url) or proc.poll() is not None, timeout=240, what="the server to answer")
        assert proc.poll() is None, proc.stderr.read()
        servers = _children_named(proc.pid, b"llama-server")
        assert len(servers) == 1
        assert "embedded llama-server" in httpx.get(f"{url}/api/config").json()["endpoint"]
        job = httpx.post(f"{url}/api/jobs", data={"question": "How tall is the Gannet Rock lighthouse?", "budget": "1", "tools": "none"}).json()["job"]
        wait_for(lambda: httpx.get(f"{url}/api/jobs/{job['id']}").json()["job"]["state"] in ("done", "failed"), timeout=300, what="the job")
        done = httpx.get(f"{url}/api/jobs/{job['id']}").json()["job"]
        assert done["state"] == "done", done
        meta = httpx.get(f"{url}/api/runs/{job['ref']}/snapshot").json()["meta"]
        assert meta["protocol"] == "json" and meta["tokens"]["total"] > 0 and meta["turns"] == 1
        argv = Path(f"/proc/{next(iter(servers))}/cmdline").read_bytes().decode().split("\0")
        assert meta["served"]["endpoint"].startswith(f"http://127.0.0.1:{argv[argv.index('--port') + 1]}")  # the job used that server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == 0 and "searchbox: stopped" in err, err[-2000:]
    assert not any(Path(f"/proc/{pid}").exists() for pid in servers)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/config", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_markdown_subset_escapes_everything():
    from searchbox.web.markdown import render

    html = render("# T <b>\n\n**bold** `<i>` [x](javascript:alert(1)) [ok](https://example.org/a?b=\"c)\n\n"
                  "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | 2 |\n\n```\n<script>alert(1)</script>\n```\n- one\n- two")
    assert "<h1>T &lt;b&gt;</h1>" in html and "<strong>bold</strong>" in html and "<code>&lt;i&gt;</code>" in html
    assert 'href="javascript' not in html and '<a href="https://example.org/a?b=&quot;c"' in html
    assert "<td>&lt;img src=x onerror=alert(1)&gt;</td>" in html and "&lt;script&gt;" in html and "<script" not in html
    assert "<ul><li>one</li><li>two</li></ul>" in html


# ---- hostile clients and hostile run directories (issue 20) -------------------------------------------------------------
def test_endpoint_field_reaches_only_allowed_endpoints(tmp_path):
    from tests.fakes.loopback import JsonHandler, Loopback

    hits: list[str] = []

    class Admin(JsonHandler):  # an internal service the web server can reach
        def do_GET(self):
            hits.append(self.path)
            self._send(200, {"secret": "internal admin page"})

        do_POST = do_GET

    with Loopback(Admin) as admin, LiveApp(tmp_path / "out", "http://127.0.0.1:9", allowed_endpoints=("http://10.9.8.7:8080/v1",)) as app:
        refused = {
            f"{admin.url}/internal/admin?x=1": (400, "no query string"),
            f"{admin.url}/internal/admin#x": (400, "no fragment"),
            f"http://user:pw@127.0.0.1:9": (400, "no user name or password"),
            "file:///etc/passwd": (400, "http(s) URL"),
            "gopher://127.0.0.1:9": (400, "http(s) URL"),
            f"{admin.url}": (403, "not one this server allows"),
            f"{admin.url}/internal/admin": (403, "not one this server allows"),
            "http://127.0.0.1:9/internal": (403, "not one this server allows"),  # the server's own host, another path
            "http://10.9.8.7:8081": (403, "not one this server allows"),
        }
        for endpoint, (status, reason) in refused.items():
            resp = app.post("/api/jobs", data={"question": "q", "endpoint": endpoint})
            assert resp.status_code == status and reason in resp.json()["error"], (endpoint, resp.text)
            assert "\n" not in resp.json()["error"]
        for endpoint in ("http://127.0.0.1:9", "http://127.0.0.1:9/v1/", "HTTP://10.9.8.7:8080", "http://10.9.8.7:8080/v1"):
            job = submit(app, endpoint=endpoint)
            assert job["state"] in ("queued", "running", "failed", "done"), job
            app.post(f"/api/jobs/{job['id']}/cancel")
        assert app.get("/api/config").json()["allowed_endpoints"] == ["http://10.9.8.7:8080/v1"]
    assert hits == []


def test_serve_refuses_a_malformed_allowed_endpoint(capsys):
    assert serve.main(["--endpoint", "http://127.0.0.1:9", "--allow-endpoint", "http://127.0.0.1:8/x?y=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("searchbox: --allow-endpoint: no query string") and err.count("\n") == 1


def test_odd_names_and_deep_trees_are_listed_and_served(tmp_path):
    out = tmp_path / "out"
    run = out / "runs" / "x"
    work = run / "work"
    work.mkdir(parents=True)
    (run / "run_meta.json").write_text('{"status": "complete", "stop_reason": "budget_spent"}')
    (run / "trace.jsonl").write_text("")
    names = {b"bad-\xff-name.md": b"not utf-8 name", b"lit\\x41eral.md": b"a backslash", "caf\u00e9.md".encode(): b"accent"}
    for raw, body in names.items():
        with open(os.fsencode(work) + b"/" + raw, "wb") as fh:
            fh.write(body)
    deep_tree(work, leaves={"deep.txt": b"at the bottom"})  # 30 nested 200-character directories: deeper than PATH_MAX
    try:
        with LiveApp(out, "http://127.0.0.1:9") as app:
            resp = app.get("/api/runs/runs/x/files")
            assert resp.status_code == 200, resp.text
            listed = dict(resp.json()["work"])
            assert set(listed) >= {"work/bad-\\xff-name.md", "work/lit\\x5cx41eral.md", "work/caf\u00e9.md"}, listed
            deep = [p for p in listed if p.endswith("/deep.txt")]
            assert len(deep) == 1 and len(deep[0]) > 4096 and deep[0].count("/") == 31
            served = {p: app.get("/api/runs/runs/x/file", params={"path": p}).json().get("text") for p in listed}
            assert served["work/bad-\\xff-name.md"] == "not utf-8 name" and served["work/lit\\x5cx41eral.md"] == "a backslash"
            assert served["work/caf\u00e9.md"] == "accent" and served[deep[0]] == "at the bottom"
    finally:
        import shutil

        shutil.rmtree(work)  # by descriptors: the tree is deeper than PATH_MAX


def test_cross_site_post_without_origin_is_refused(tmp_path):
    with LiveApp(tmp_path / "out", "http://127.0.0.1:9") as app:
        for site in ("cross-site", "same-site"):  # same-site: another port on this host is another origin
            resp = app.post("/api/jobs", data={"question": "q"}, headers={"Sec-Fetch-Site": site})
            assert resp.status_code == 403 and "cross-site" in resp.json()["error"], site
        assert app.get("/api/jobs").json()["jobs"] == []
        same = app.post("/api/jobs", data={"budget": "1"}, headers={"Sec-Fetch-Site": "same-origin", "Origin": app.url})
        plain = app.post("/api/jobs", data={"budget": "1"})  # a script, not a browser: neither header
        assert same.status_code == plain.status_code == 400 and "question: required" in same.json()["error"]
        assert app.get("/api/jobs", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200  # reads stay as they were


# ---- issue 21: the run page's data, preparing jobs, what the record says while a run is live ----------------------------
def test_a_job_whose_index_is_missing_prepares_outside_the_slot_while_another_runs(tmp_path):
    """The first dense search used to embed the dataroom inside the run, holding the only model slot for minutes; now the
    job is `preparing` (its index built by a separate process, progress in the job) while a later job runs to the end."""
    import fcntl

    from searchbox.retrieval.index.store import LOCK
    from searchbox.web import prepare

    room = tmp_path / "room.zip"
    room.write_bytes(dataroom_zip())
    folder = prepare.index_folder({"tool_names": ["search_dataroom"], "tools": "high", "dataroom": str(room)})
    folder.mkdir(parents=True)
    lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another writer is busy with this index: the build waits for it, deterministically
    script = turn_script(1) + [{"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]},
                               {"content": "38.4 metres"}]
    try:
        with ScriptedServer(script) as srv, LiveApp(tmp_path / "out", srv.url) as app:
            a = submit(app, budget=1, tools="high", question="indexed question", files={"dataroom": ("room.zip", room.read_bytes(), "application/zip")})
            assert a["state"] == "preparing" and "building the index" in a["wait"]["reason"]
            assert [x["label"] for x in a["actions"]] == ["Hold", "Cancel"]
            b = submit(app, budget=1, tools="none", question="plain question", files={"dataroom": ("room.zip", room.read_bytes(), "application/zip")})
            done_b = app.wait_job(b["id"], ("done",))  # b had the slot while a's index waited to be built
            assert done_b["launches"] == 1 and app.get(f"/api/jobs/{a['id']}").json()["job"]["state"] == "preparing"
            fcntl.flock(lock, fcntl.LOCK_UN)
            done_a = app.wait_job(a["id"], ("done",), timeout=300)
            assert done_a["prepare"]["built"] is True and done_a["prepare"]["chunks"] == 7 and done_a["prepare"]["seconds"] > 0
            meta = json.loads((tmp_path / "out" / "web" / "jobs" / a["id"] / "run_meta.json").read_text())
            retrieval = meta["retrieval"]
            assert retrieval["index"]["folder"] == str(folder) and retrieval["index"]["built"] is False  # the run found it ready
            assert retrieval["searches"] == 1
            progress = json.loads((tmp_path / "out" / "web" / "prepare" / f"{a['id']}.json").read_text())
            assert progress["finished"] and progress["chunks"] == 7
            log = app.get(f"/api/jobs/{a['id']}/log").json()
            assert "=== prepare (index build)" in log["text"] and "=== start" in log["text"] and log["bytes"] > 0
    finally:
        os.close(lock)


def test_a_cancelled_preparing_job_stops_its_build(tmp_path):
    import fcntl

    from searchbox.retrieval.index.store import LOCK
    from searchbox.web import prepare

    room = tmp_path / "room.zip"
    room.write_bytes(dataroom_zip())
    folder = prepare.index_folder({"tool_names": ["search_dataroom"], "tools": "high", "dataroom": str(room)})
    folder.mkdir(parents=True)
    lock = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        with LiveApp(tmp_path / "out", "http://127.0.0.1:9") as app:
            a = submit(app, budget=1, tools="high", files={"dataroom": ("room.zip", room.read_bytes(), "application/zip")})
            wait_for(lambda: a["id"] in app.app.state.runner.preps, what="the index build to start")
            proc = app.app.state.runner.preps[a["id"]]
            cancelled = app.post(f"/api/jobs/{a['id']}/cancel").json()["job"]
            assert cancelled["state"] == "cancelled" and cancelled["terminal"] and cancelled["actions"] == []
            wait_for(lambda: proc.poll() is not None, what="the build process to stop")
            assert app.get(f"/api/jobs/{a['id']}").json()["job"]["state"] == "cancelled"
    finally:
        os.close(lock)


def test_a_job_that_needs_no_index_queues_at_once(tmp_path):
    from searchbox.web import prepare

    assert prepare.index_needed({"tool_names": ["read", "grep"], "tools": "grep_only"}) is None
    spec = {"tool_names": ["search_dataroom"], "tools": "high"}
    assert prepare.index_needed(spec) == prepare.index_folder(spec)  # the packaged corpus, not built in this isolated home


def test_the_record_has_its_context_window_and_protocol_before_the_first_call(tmp_path):
    """The live gauge read run_meta.json, written before the context window was known: empty for the whole run."""
    import threading

    from searchbox.run.runner import execute
    from tests.conftest import make_cfg

    seen: list[dict] = []
    run_dir = tmp_path / "run"
    with ScriptedServer([{"sleep": 3.0, "content": "done"}]) as srv:
        thread = threading.Thread(target=execute, args=(make_cfg(budget=1, sandbox="none"), "q?", None, run_dir, srv.url), daemon=True)
        thread.start()

        def first_record():
            path = run_dir / "run_meta.json"
            if path.exists():
                with contextlib.suppress(ValueError):
                    seen.append(json.loads(path.read_text()))
            return seen

        wait_for(first_record, what="the run's first record")
        thread.join(60)
    first = seen[0]
    assert first["status"] == "running"
    assert first["context_window"] == 8192 and first["protocol"] == "native"


def test_bash_exit_codes_and_full_lines_reach_the_dashboard(tmp_path):
    from searchbox.web import runview
    from tests.conftest import run_script

    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "no-such-program-here"}}]},
              {"tool_calls": [{"name": "bash", "arguments": {"command": "printf '%5000s' x"}}]}, {"content": "gave up"}]
    meta, _, run_dir = run_script(tmp_path, script, cfg=None)
    events, _ = runview.read_trace(run_dir)
    outputs = [e for e in events if e.get("role") == "tool"]
    assert [e["exit_code"] for e in outputs] == [127, 0]  # a non-zero exit counts as an error in the dashboard
    assert meta["tool_errors"] == 0  # the record counts refused calls only; the page adds the non-zero exits
    long = outputs[1]
    assert long["chars"] > len(long["content"])  # the stream sends a preview...
    whole = runview.trace_line(run_dir, long["at"])["line"]["message"]["content"]
    assert len(whole) == long["chars"]  # ...and the line, asked for by where it starts, whole
    found = runview.search_trace(run_dir, "NO-SUCH-program")
    assert found["hits"] == [e["at"] for e in events if "no-such-program" in json.dumps(e)][:2] and found["hits"]
    with pytest.raises(runview.NotFound):
        runview.trace_line(run_dir, long["at"] + 1)  # not the start of a line


def test_run_result_and_job_api(tmp_path):
    out = tmp_path / "out"
    with ScriptedServer([]) as srv:
        make_sweep(out, srv)
    with ScriptedServer(turn_script(2)) as srv, LiveApp(out, srv.url) as app:
        right = app.get("/api/runs/sweeps/demo/runs/grep_only-b1/result").json()
        assert right["gold"]["answer"] == "38.4 metres" and right["grades"]["correct"] == 1.0
        assert right["verdict"]["correct"] == 1.0 and right["verdict"]["asserted"]
        assert right["evidence"]["files"] == [{"path": "reports/gannet-rock-survey.md", "measured": True, "received": True}]
        assert right["evidence"]["first_turn"] == 1 and right["evidence"]["tools"] == ["grep"]
        wrong = app.get("/api/runs/sweeps/demo/runs/none-b1/result").json()
        assert wrong["grades"]["correct"] == 0.0 and wrong["verdict"]["correct"] == 0.0 and wrong["verdict"]["reason"]
        assert app.get("/compare", params={"a": "sweeps/demo/runs/none-b1", "b": "sweeps/demo/runs/grep_only-b1"}).status_code == 200
        assert app.get("/compare", params={"a": "sweeps/demo/runs/none-b1", "b": "../../etc"}).status_code == 404
        job = submit(app, budget=2, question="How tall?")
        app.wait_job(job["id"], ("done",))
        log = app.get(f"/api/jobs/{job['id']}/log").json()
        assert "=== start" in log["text"]
        assert app.get("/api/jobs/nope/log").status_code == 404
        done = app.get(f"/api/jobs/{job['id']}").json()["job"]
        assert [a["label"] for a in done["actions"]] == ["Continue"] and done["terminal"] and done["wait"] is None
        assert app.get(f"/api/runs/{job['ref']}/result").json()["gold"] is None  # a submitted job has no gold


def test_retrieval_counts_survive_a_pause_and_resume(tmp_path):
    """A web job preempted after its first dense search was resumed by a new process, whose stats replaced the record's:
    run_meta.retrieval said searches 0, scopes_built 0."""
    import pandas as pd

    from searchbox.run import runner as run_mod
    from tests.conftest import make_cfg

    cfg = make_cfg(budget=2, sandbox="none")
    cfg.tools = "high"
    step = [{"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]}, {"content": "38.4 metres"}]

    def after_one_turn():
        path = tmp_path / "run" / "turns.parquet"
        return path.exists() and len(pd.read_parquet(path)) >= 1

    with ScriptedServer(step * 2) as srv:
        first = run_mod.execute(cfg, "How tall is Gannet Rock?", None, tmp_path / "run", srv.url, should_pause=after_one_turn)
        assert first["stop_reason"] == "paused" and first["retrieval"]["searches"] == 1 and first["retrieval"]["index"]["built"]
        resumed = run_mod.resume(tmp_path / "run", srv.url, budget=2)
    r = resumed["retrieval"]
    assert resumed["turns"] == 2 and r["searches"] == 2 and r["scopes_built"] == 1 and r["index"]["built"] is True
    assert r["setup_s"] >= first["retrieval"]["setup_s"] > 0


def test_the_run_pages_verdict_is_the_graders(tmp_path):
    """The run page recomputes why `correct` said what it said through the grader's own explain(): alternatives on
    later lines compete there too (it once called the verdict without them and could disagree with the stored grade)."""
    from searchbox.grading import Question, grade_text
    from searchbox.web import runview
    from tests.fakes.runs import make_run

    answer = "38.4 metres\n41 metres\n\nSources: reports/gannet-rock-survey.md"
    rd = make_run(tmp_path / "sw", "r1", answer=answer)
    meta = json.loads((rd / "run_meta.json").read_text())
    meta["status"] = "complete"
    (rd / "run_meta.json").write_text(json.dumps(meta))
    stored = grade_text(answer, Question.from_record(meta))
    shown = runview.result(rd)["verdict"]
    assert stored["correct"] == 0.0 and shown["correct"] == 0.0 and shown["reason"][:300] == stored["correct_reason"]
