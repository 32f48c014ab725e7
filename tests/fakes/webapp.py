"""The web app served by uvicorn on a free loopback port inside the test process (real HTTP), and an SSE reader."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import httpx
import uvicorn

from searchbox.model.llama import free_port
from searchbox.web.app import WebSettings, create_app


class LiveApp:
    """`with LiveApp(outputs, endpoint) as app: httpx.get(app.url + "/api/jobs")` ."""

    def __init__(self, outputs: Path, endpoint: str, **settings):
        settings.setdefault("sandbox", "auto")
        settings.setdefault("poll_s", 0.1)
        self.settings = WebSettings(outputs=Path(outputs), endpoint=endpoint, endpoint_label="scripted test server", **settings)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(self.settings)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    timeout_graceful_shutdown=2))
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "LiveApp":
        self._thread = threading.Thread(target=self.server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the web app did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(60)

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.url + path, timeout=60, **kw)

    def wait_job(self, job_id: str, states: tuple[str, ...], timeout: float = 120.0, where: Callable[[dict], bool] = lambda j: True) -> dict:
        deadline = time.monotonic() + timeout
        job = {}
        while time.monotonic() < deadline:
            job = self.get(f"/api/jobs/{job_id}").json()["job"]
            if job["state"] in states and where(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not reach {states}: {job}")


def wait_for(predicate, timeout=120.0, what="condition"):
    """Poll until predicate() is truthy (a busy machine gets waits, never timing assertions)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def sse(url: str, timeout: float = 60.0, headers: Optional[dict] = None) -> Iterator[tuple[str, object, str]]:
    """(event, data, id) for each server-sent event until the stream closes."""
    with httpx.stream("GET", url, timeout=httpx.Timeout(timeout), headers=headers or {}) as resp:
        resp.raise_for_status()
        assert resp.headers["content-type"].startswith("text/event-stream")
        event, data, ev_id = "message", [], ""
        for line in resp.iter_lines():
            if line == "":
                if data:
                    yield event, json.loads("\n".join(data)), ev_id
                event, data = "message", []
            elif line.startswith(":"):
                continue
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)
                elif field == "id":
                    ev_id = value


def turn_script(turns: int, sleep: float = 0.0, answer: str = "# Answer\n\n**38.4 metres** <script>alert(1)</script>") -> list[dict]:
    """Per turn: ls, a bash pipeline, write ANSWER.md, then a final message (each response after `sleep` seconds)."""
    script: list[dict] = []
    for t in range(1, turns + 1):
        script += [{"sleep": sleep, "tool_calls": [{"name": "ls", "arguments": {"path": "dataroom"}}]},
                   {"sleep": sleep, "tool_calls": [{"name": "bash", "arguments": {"command": "grep -ri gannet dataroom | head -n 3"}}]},
                   {"sleep": sleep, "tool_calls": [{"name": "write", "arguments": {"path": "ANSWER.md", "content": f"{answer}\n\nturn {t}"}}]},
                   {"sleep": sleep, "content": f"Answered in turn {t}."}]
    return script


GOLD = {"answer": "38.4 metres", "aliases": ["38.4 m"], "gold_files": ["reports/gannet-rock-survey.md"]}


def make_sweep(outputs: Path, endpoint_script_server, name: str = "demo") -> Path:
    """A small real sweep: four runs (tools x budget) against the scripted server, graded against a gold answer (the
    grep_only runs answer it, the others give the wrong height), collected into runs.parquet."""
    from searchbox.record.collect import DONE, collect, write
    from searchbox.config import RunConfig
    from searchbox.grading import Question, grade
    from searchbox.record.record import Gold, update_grades
    from searchbox.run.runner import execute

    sweep = Path(outputs) / "sweeps" / name
    question = "How tall is the Gannet Rock lighthouse?"
    gold = Question(id="q1", question=question, **GOLD)
    for budget in (1, 2):
        for tools in ("none", "grep_only"):
            answer = "38.4 metres" if tools == "grep_only" else "It is 41 metres tall."
            endpoint_script_server.script[:] = [
                {"tool_calls": [{"name": "grep", "arguments": {"pattern": "Gannet", "path": "dataroom"}}]},
                {"content": answer}] * budget
            cfg = RunConfig(tools=tools)
            cfg.harness.budget, cfg.harness.sandbox, cfg.harness.today = budget, "none", "2026-01-01"
            key = f"{tools}-b{budget}"
            run_dir = sweep / "runs" / key
            meta = execute(cfg, question, None, run_dir, endpoint_script_server.url,
                           extra_meta={"run_id": key, "question_id": "q1", "axes": {"tools": tools, "budget": budget}, "sweep": name,
                                       "gold": Gold(**GOLD)})
            update_grades(run_dir, grade(run_dir, gold))
            (run_dir / DONE).write_text(meta["stop_reason"])
    write(sweep, *collect([sweep]))
    return sweep
