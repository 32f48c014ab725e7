"""The web form's question sets, gold and study axes (issue 31): web runs can be graded and carry a sweep's axes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.webapp import LiveApp, turn_script


def test_a_job_from_a_question_set_carries_its_gold_axes_and_dataroom(tmp_path):
    with ScriptedServer(turn_script(1)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        config = app.get("/api/config").json()
        assert {s["name"] for s in config["question_sets"]} >= {"tiny", "jina-builtin"}
        listed = app.get("/api/question_sets/tiny").json()["questions"]
        assert listed[0]["id"] == "nw01" and "Gannet Rock" in listed[0]["question"]
        assert app.get("/api/question_sets/nope").status_code == 404
        resp = app.post("/api/jobs", data={"question": "", "budget": "1", "tools": "none", "question_set": "tiny", "question_id": "nw01",
                                          "retriever": "bm25", "delivery": "file", "seed": "7", "temperature": "0.3", "max_tokens": "200",
                                          "noise": "0"})
        assert resp.status_code == 201, resp.text
        job = app.wait_job(resp.json()["job"]["id"], ("done",))
        run_dir = tmp_path / "out" / "web" / "jobs" / job["id"]
        meta = json.loads((run_dir / "run_meta.json").read_text())
        assert meta["question"] == "How tall is the Gannet Rock lighthouse?" and meta["question_id"] == "nw01"
        assert meta["gold"]["answer"] == "38.4 metres" and "38.4 m" in meta["gold"]["aliases"]
        assert meta["gold"]["gold_files"] == ["reports/gannet-rock-survey.md"] and meta["questions_path"].endswith("questions.jsonl")
        cfg = meta["config"]
        assert cfg["retrieval"]["retriever"] == "bm25" and cfg["harness"]["delivery"] == "file"
        assert cfg["model"]["seed"] == 7 and cfg["model"]["temperature"] == 0.3 and cfg["model"]["max_tokens"] == 200
        assert srv.requests[0]["max_tokens"] == 200 and srv.requests[0]["seed"] == 7
        assert meta["dataroom"]["files"] == 7  # the tiny set's own dataroom, not the packaged corpus
        assert app.get(f"/api/runs/{job['ref']}/result").json()["gold"]["answer"] == "38.4 metres"


def test_a_typed_gold_and_aliases_go_with_the_job(tmp_path):
    with ScriptedServer(turn_script(1)) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        resp = app.post("/api/jobs", data={"question": "How tall is Gannet Rock?", "budget": "1", "tools": "none",
                                          "gold": "38.4 metres", "aliases": "38.4 m\n\n38.4\n"})
        job = app.wait_job(resp.json()["job"]["id"], ("done",))
        meta = json.loads((Path(tmp_path / "out" / "web" / "jobs" / job["id"]) / "run_meta.json").read_text())
        assert meta["gold"]["answer"] == "38.4 metres" and meta["gold"]["aliases"] == ["38.4 m", "38.4"]


def test_bad_axes_and_gold_get_one_line_reasons(tmp_path):
    cases = [({"retriever": "magic"}, "retriever: one of dense, bm25, hybrid"), ({"temperature": "9"}, "temperature: between 0 and 2"),
             ({"seed": "x"}, "seed: a whole number"), ({"max_tokens": "0"}, "max_tokens: between 1"),
             ({"noise": "nan"}, "noise: between"), ({"aliases": "a"}, "aliases: need a gold answer"),
             ({"question_set": "tiny", "question_id": "zz"}, "question_id: not a question of set 'tiny'"),
             ({"question_set": "other", "question_id": "nw01"}, "question_set: one of"),
             ({"policy": "oracle"}, "policy: the oracle reads the question's gold files")]
    with ScriptedServer([]) as srv, LiveApp(tmp_path / "out", srv.url) as app:
        for fields, reason in cases:
            resp = app.post("/api/jobs", data={"question": "q?", "budget": "1", "tools": "none", **fields})
            assert resp.status_code == 400 and reason in resp.json()["error"], (fields, resp.text)
