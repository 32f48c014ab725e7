"""The web app served by uvicorn on a free loopback port inside the test process (real HTTP), and an SSE reader."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import httpx
import uvicorn

from searchbox.llama import free_port
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

    def wait_job(self, job_id: str, states: tuple[str, ...], timeout: float = 60.0, where: Callable[[dict], bool] = lambda j: True) -> dict:
        deadline = time.monotonic() + timeout
        job = {}
        while time.monotonic() < deadline:
            job = self.get(f"/api/jobs/{job_id}").json()["job"]
            if job["state"] in states and where(job):
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not reach {states}: {job}")


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
