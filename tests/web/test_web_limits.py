"""The web app under hostile requests (issue 36 part 5): bodies parsed with size and depth limits, grading on the
result page in a child process with a time bound, so one slow answer never stalls another request."""

from __future__ import annotations

import concurrent.futures as cf
import json
import time

import httpx

from searchbox.web import recompute
from tests.fakes.runs import make_run
from tests.fakes.webapp import LiveApp


def test_a_30000_deep_json_body_is_a_400_with_the_reason(tmp_path):
    with LiveApp(tmp_path / "out", "http://127.0.0.1:9") as app:
        for body, status in (("[" * 30_000 + "]" * 30_000, 400), ('{"budget": ' + "[" * 9 + "]" * 9 + "}", 400),
                             (json.dumps({"budget": "x" * 70_000}), 413)):
            r = app.post("/api/jobs/nope/resume", content=body, headers={"content-type": "application/json"})
            assert r.status_code == status, r.text
            assert "\n" not in r.text.strip() and "Traceback" not in r.text
            if status == 400:
                assert r.json()["error"] == "body: nested deeper than 8 levels"
        r = app.post("/api/jobs/nope/resume", content='{"budget": 3}', headers={"content-type": "application/json"})
        assert r.status_code == 404  # a shallow body still gets through to the job check


def test_a_slow_result_page_never_blocks_api_config(tmp_path, monkeypatch):
    out = tmp_path / "out"
    rd = make_run(out / "sweeps" / "s", "slow", answer="**" * 1024)
    meta = json.loads((rd / "run_meta.json").read_text())
    (rd / "run_meta.json").write_text(json.dumps({**meta, "status": "complete"}))
    monkeypatch.setattr(recompute, "RECOMPUTE_S", 3.0)
    monkeypatch.setattr(recompute.bounded, "__defaults__", (3.0,))
    with LiveApp(out, "http://127.0.0.1:9") as app:
        ref = "sweeps/s/runs/slow"
        with cf.ThreadPoolExecutor(4) as pool:
            pages = [pool.submit(httpx.get, f"{app.url}/api/runs/{ref}/result", timeout=60) for _ in range(4)]
            time.sleep(0.3)
            t0 = time.monotonic()
            config = app.get("/api/config")
            waited = time.monotonic() - t0
            results = [f.result() for f in pages]
        assert config.status_code == 200 and waited < 2.0, waited
        for r in results:
            assert r.status_code == 200
            assert r.json()["grades"] == meta["grades"]  # the recorded grades stand, whatever the recompute did


def test_recompute_gives_up_in_its_bound(tmp_path):
    rd = make_run(tmp_path / "s", "r")
    meta = json.loads((rd / "run_meta.json").read_text())
    (rd / "run_meta.json").write_text(json.dumps({**meta, "status": "complete"}))
    t0 = time.monotonic()
    got = recompute.bounded(rd, timeout_s=0.01)  # no child can even start in 10 ms
    assert time.monotonic() - t0 < 5 and "longer than" in got["verdict"]["reason"]
    full = recompute.bounded(rd)
    assert full["verdict"] and "reason" in full["verdict"] and "not recomputed" not in full["verdict"]["reason"]
