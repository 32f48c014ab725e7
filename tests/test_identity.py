"""Run identity: what changes the result changes the key, what does not leaves it; the served model is part of it."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from searchbox.config import OPERATIONAL_FIELDS, RunConfig
from searchbox.dataroom import builtin_dataroom, open_workspace
from searchbox.errors import ConfigError
from searchbox.identity import dataroom_identity, run_key, served_identity
from searchbox.llm import ChatClient
from searchbox.record import Served
from tests.conftest import make_cfg, run_script
from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[1]
SERVED = Served(model_id="m", llama_cpp="b1")


def key(cfg: RunConfig, served: Served = SERVED) -> str:
    return run_key(cfg, "q1", "How tall?", "data", served)


@pytest.mark.parametrize("field, value", [("model.parallel", 4), ("model.timeout_s", 5.0), ("model.retries", 9),
                                          ("model.server_args", ["-t", "2"]), ("model.endpoint", "http://x:1"),
                                          ("harness.sandbox", "bwrap"), ("retrieval.batch_size", 8), ("retrieval.device", "cuda")])
def test_operational_fields_leave_the_key_alone(field, value):
    cfg = RunConfig()
    section, name = field.split(".")
    setattr(getattr(cfg, section), name, value)
    assert field in OPERATIONAL_FIELDS
    assert key(cfg) == key(RunConfig())


@pytest.mark.parametrize("field, value", [("model.temperature", 0.7), ("model.max_tokens", 99), ("harness.budget", 3),
                                          ("harness.delivery", "file"), ("retrieval.retriever", "bm25"), ("noise.ratio", 4.0),
                                          ("retrieval.embed_model", "other"), ("index.backend", "ann"), ("harness.compact_at", 0.5)])
def test_semantic_fields_change_the_key(field, value):
    cfg = RunConfig()
    section, name = field.split(".")
    setattr(getattr(cfg, section), name, value)
    assert key(cfg) != key(RunConfig())


def test_question_dataroom_and_served_model_are_in_the_key():
    cfg = RunConfig()
    base = key(cfg)
    assert run_key(cfg, "q2", "How tall?", "data", SERVED) != base
    assert run_key(cfg, "q1", "How wide?", "data", SERVED) != base
    assert run_key(cfg, "q1", "How tall?", "other-data", SERVED) != base
    assert key(cfg, Served(model_id="another")) != base
    assert key(cfg, Served(model_id="m", llama_cpp="b2")) != base
    # The weights name the model when known, not the path or alias it was served under.
    a = Served(model_id="/home/a/m.gguf", gguf_sha256="abc", llama_cpp="b1")
    b = Served(model_id="/home/b/m.gguf", gguf_sha256="abc", llama_cpp="b1")
    assert key(cfg, a) == key(cfg, b)


def test_served_identity_asks_the_server():
    with ScriptedServer([], model_id="qwen-x", build_info="b4242") as srv:
        served = served_identity(ChatClient(RunConfig().model, srv.url), RunConfig(), srv.url)
    assert served.model_id == "qwen-x" and served.llama_cpp == "b4242" and served.endpoint == srv.url


def test_turn_budget_above_max_turns_fails_validation():
    cfg = make_cfg(budget=100)
    with pytest.raises(ConfigError, match="max_turns"):
        cfg.validate()
    cfg.harness.max_turns = 100
    cfg.validate()


def _zip_of(folder: Path, dest: Path, wrapper: str = "") -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"{wrapper}{path.relative_to(folder).as_posix()}")
    return dest


def test_one_dataroom_identity_for_run_and_sweep(tmp_path):
    """The sweep hashes the source without extracting; a run hashes what it extracted: the same number."""
    folder = builtin_dataroom()
    archive = _zip_of(folder, tmp_path / "d.zip", wrapper="top/")
    assert dataroom_identity(folder) == dataroom_identity(archive)
    assert open_workspace(tmp_path / "r1", archive).sha256 == dataroom_identity(archive)
    assert open_workspace(tmp_path / "r2", folder).sha256 == dataroom_identity(folder)


def test_single_run_records_served_identity_and_key(tmp_path):
    meta, _, run_dir = run_script(tmp_path, [{"content": "x"}])
    assert meta["served"]["model_id"] == "scripted-model" and meta["served"]["llama_cpp"] == "b0000-scripted"
    assert meta["dataroom"]["identity"] == dataroom_identity(builtin_dataroom())
    assert meta["run_id"] == run_key(make_cfg(), "", "How tall is Gannet Rock?", meta["dataroom"]["identity"],
                                     Served(**meta["served"]))


def _sweep(args, url, root):
    env = {**os.environ, "LLAMA_URL": url, "HYDRA_FULL_ERROR": "1"}
    cmd = [*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01", "model.retries=0"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_relaunch_with_operational_change_sends_no_request(tmp_path):
    args = ["tools=none", "budget=1,2", "questions.limit=2"]
    with ScriptedServer([]) as srv:
        _sweep(args, srv.url, tmp_path)
        first = len(srv.requests)
        _sweep(args + ["model.parallel=2", "model.timeout_s=77"], srv.url, tmp_path)
        assert first == 6 and len(srv.requests) == first  # every run was found done: no chat request
    assert len(pd.read_parquet(tmp_path / "default" / "runs.parquet")) == 4


def test_two_models_behind_one_url_keep_both_sets(tmp_path):
    args = ["tools=none", "budget=1", "questions.limit=2"]
    with ScriptedServer([], model_id="model-a") as a:
        _sweep(args, a.url, tmp_path)
    with ScriptedServer([], model_id="model-b") as b:
        _sweep(args, b.url, tmp_path)
        assert len(b.requests) == 2  # nothing skipped as if model-a's runs were model-b's
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 4 and runs["run_id"].is_unique
    assert sorted(runs["served_model_id"]) == ["model-a", "model-a", "model-b", "model-b"]
    meta = json.loads(next((tmp_path / "default" / "runs").glob("*/run_meta.json")).read_text())
    assert meta["schema_version"] == 2 and meta["gold"]["answer"] and meta["questions_path"].endswith("questions.jsonl")
