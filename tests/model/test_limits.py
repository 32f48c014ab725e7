"""The server's limits read, not assumed (model.limits), and the failures of a server that never answers (issue 31)."""

from __future__ import annotations

import json

import pytest

from searchbox.config import ModelConfig
from searchbox.errors import ConfigError, ModelError
from searchbox.model.limits import ServerLimits, effective, read_limits
from searchbox.model.llm import ChatClient, error_reason
from searchbox.run.identity import resolved_protocol, run_key
from searchbox.run.runner import execute
from tests.conftest import make_cfg, run_script, trace
from tests.fakes.faulty_server import FaultyServer
from tests.fakes.scripted_server import ScriptedServer

QUESTION = "How tall is Gannet Rock?"


def test_read_limits_from_props():
    with ScriptedServer(n_ctx=4096, n_predict=128, slots=2, supports_tools=False) as srv:
        limits = read_limits(ChatClient(ModelConfig(), srv.url))
    assert limits == ServerLimits(n_ctx=4096, n_predict=128, supports_tools=False, slots=2, build="b0000-scripted", source="/props")


def test_a_server_that_says_nothing_limits_nothing():
    class Silent:
        def get_json(self, path):
            return None

    limits = read_limits(Silent())
    assert limits == ServerLimits()
    model, record = effective(ModelConfig(max_tokens=2048, context_window=32768), limits, 8192)
    assert model.context_window == 32768 and model.max_tokens == 2048 and record["context_window"]["source"] == "config"


def test_server_window_beats_a_larger_preset_and_caps_max_tokens():
    # The openai preset said 32768 and 2048; the server has 8192 and its own -n 256.
    model, record = effective(ModelConfig(max_tokens=2048, context_window=32768), ServerLimits(n_ctx=8192, n_predict=256), 4096)
    assert (model.context_window, model.max_tokens) == (8192, 256)
    assert record["context_window"] == {"value": 8192, "config": 32768, "server": 8192, "source": "server", "server_source": ""}
    assert record["max_tokens"]["source"] == "server" and record["max_tokens"]["config"] == 2048
    # A reply cap past a quarter of the window is capped there; the config's smaller values win and say so.
    model, record = effective(ModelConfig(max_tokens=4096, context_window=None), ServerLimits(n_ctx=2048), 8192)
    assert model.context_window is None and model.max_tokens == 512 and record["max_tokens"]["source"] == "window"
    assert record["context_window"]["value"] == 2048 and record["context_window"]["source"] == "server"
    model, record = effective(ModelConfig(max_tokens=256, context_window=4096), ServerLimits(n_ctx=8192, n_predict=512), 8192)
    assert model == ModelConfig(max_tokens=256, context_window=4096) and record["max_tokens"]["source"] == "config"


def test_run_records_the_limits_and_keys_what_it_got(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.model.context_window, cfg.model.max_tokens = 32768, 2048
    meta, srv, _ = run_script(tmp_path, [{"content": "38.4 metres"}], cfg, server_kw={"n_ctx": 8192, "n_predict": 300})
    assert meta["context_window"] == 8192 and meta["limits"]["context_window"]["source"] == "server"
    assert meta["limits"]["max_tokens"]["value"] == 300 and srv.requests[-1]["max_tokens"] == 300
    assert meta["config"]["model"]["context_window"] == 8192  # what ran (the record's limits say what was asked)
    # The key is the one of the config it really got: a config already at the server's limits keys the same.
    same = make_cfg(budget=1)
    same.model.context_window, same.model.max_tokens = 8192, 300
    meta2, _, _ = run_script(tmp_path, [{"content": "38.4 metres"}], same, name="run2", server_kw={"n_ctx": 8192, "n_predict": 300})
    assert meta2["run_id"] == meta["run_id"]
    assert meta2["limits"]["context_window"]["source"] == "config"


def test_native_protocol_on_a_tool_less_template_is_a_config_error(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.tools, cfg.model.protocol = "high", "native"
    with ScriptedServer(supports_tools=False) as srv:
        with pytest.raises(ConfigError, match="protocol=auto or json"):
            execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
        assert not srv.requests  # refused before any chat request
        cfg.model.protocol = "auto"
        assert resolved_protocol(cfg, ChatClient(cfg.model, srv.url)) == "json"
    with ScriptedServer(supports_tools=True) as srv:
        cfg.model.protocol = "native"
        assert resolved_protocol(cfg, ChatClient(cfg.model, srv.url)) == "native"


def test_openai_preset_asks_the_server_for_the_protocol():
    from pathlib import Path

    from omegaconf import OmegaConf

    preset = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "model" / "openai.yaml")
    assert preset.protocol == "auto"


def test_error_reason_is_the_servers_one_line():
    body = json.dumps({"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}})
    assert error_reason(body) == ("tools param requires --jinja flag", True)
    assert error_reason("<html>\n  502 Bad Gateway\n</html>") == ("<html> 502 Bad Gateway </html>", False)
    assert error_reason("") == ("(empty body)", False)


def test_a_500_the_server_explained_is_not_retried():
    with ScriptedServer([{"status": 500, "message": "tools param requires --jinja flag"}] * 5) as srv:
        client = ChatClient(ModelConfig(retries=4, backoff_s=0.01), srv.url)
        with pytest.raises(ModelError, match="tools param requires --jinja flag"):
            client.chat({"messages": [{"role": "user", "content": "hi"}]})
        assert len(srv.requests) == 1
    failures = client.take_failures()
    assert [f["status"] for f in failures] == [500] and client.take_failures() == []


def test_the_same_unexplained_500_twice_stops_the_retries():
    with ScriptedServer([{"status": 500, "message": ""}] * 5) as srv:  # no message: an unexplained 500, the same each time
        client = ChatClient(ModelConfig(retries=4, backoff_s=0.01), srv.url)
        with pytest.raises(ModelError):
            client.chat({"messages": [{"role": "user", "content": "hi"}]})
        assert len(srv.requests) == 2


def test_a_503_is_retried_and_every_failure_is_kept():
    with ScriptedServer([{"status": 503, "message": "Loading model"}] * 2 + [{"content": "ok"}]) as srv:
        client = ChatClient(ModelConfig(retries=3, backoff_s=0.01), srv.url)
        resp = client.chat({"messages": [{"role": "user", "content": "hi"}]})
    assert resp.message["content"] == "ok" and resp.attempts == 3
    assert [f["status"] for f in client.take_failures()] == [503, 503]


def test_timed_out_then_retried_request_is_traced_billed_and_counted(tmp_path):
    cfg = make_cfg(budget=1)
    cfg.model.timeout_s, cfg.model.retries = 0.5, 1
    meta, srv, run_dir = run_script(tmp_path, [{"sleep": 1.0, "content": "late"}, {"content": "38.4 metres"}], cfg)
    assert meta["stop_reason"] == "budget_spent" and meta["llm_calls"] == 1 and meta["failed_requests"] == 1
    failed = [e for e in trace(run_dir) if e["type"] == "request_failed"]
    assert len(failed) == 1 and failed[0]["seconds"] >= 0.45 and "0.5s" in failed[0]["error"]
    assert meta["llm_s"] >= 0.45  # the timed-out request's time is model time, not "other"


def test_a_turn_the_model_never_answered_is_a_model_error_not_a_result(tmp_path):
    # Every request times out; the turn ends at its ceiling with no completed call.
    cfg = make_cfg(budget=3, turn_ceiling_s=1.2)
    cfg.model.timeout_s, cfg.model.retries = 0.5, 5
    with FaultyServer([{"fault": "stall", "repeat": True}]) as srv:
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url)
    assert meta["stop_reason"] == "model_error" and meta["llm_calls"] == 0
    assert "never answered" in meta["stop_detail"] and meta["failed_requests"] >= 2
    from searchbox.harness.base import INFRA_STOPS

    assert meta["stop_reason"] in INFRA_STOPS  # excluded from results, redone on relaunch


def test_a_turn_with_an_answer_still_ends_at_its_ceiling(tmp_path):
    script = [{"sleep": 0.4, "tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}] * 4
    meta, _, _ = run_script(tmp_path, script + [{"content": "a"}, {"content": "b"}], make_cfg(budget=2, turn_ceiling_s=0.5))
    assert meta["stop_reason"] == "budget_spent" and meta["llm_calls"] >= 2  # the request the ceiling cut counts as failed


def test_keys_do_not_move_where_no_server_limit_beats_the_config():
    """Golden: the default config against a server of 8192 tokens keys as it did before limits were read."""
    from searchbox.record.record import Served
    from searchbox.run.identity import with_limits

    cfg = make_cfg(budget=1)
    with ScriptedServer(n_ctx=8192) as srv:
        got, record = with_limits(cfg, ChatClient(cfg.model, srv.url))
    assert got is cfg and record["context_window"]["value"] == 8192
    served = Served(model_id="m", llama_cpp="b1")
    assert run_key(got, "q", QUESTION, "d", served, protocol="json") == run_key(cfg, "q", QUESTION, "d", served, protocol="json")


def test_labels_come_from_what_served_the_run(tmp_path):
    from searchbox.model.served import label_of, model_label
    from searchbox.record.record import Served

    assert label_of("/models/Qwen3.6-35B-A3B-Q4_K_M.gguf") == "Qwen3.6-35B-A3B-Q4_K_M"
    assert label_of("meta-llama/Llama-3.1-8B-Instruct") == "Llama-3.1-8B-Instruct"
    cfg = make_cfg()
    cfg.model.name = "openai-compatible"
    assert model_label(cfg, Served(model_id="/m/SmolLM2-360M.gguf")) == "SmolLM2-360M"  # the openai preset's name says nothing
    assert model_label(cfg, Served()) == "openai-compatible"
    cfg.model.name = "my-study-label"
    assert model_label(cfg, Served(model_id="/m/SmolLM2-360M.gguf")) == "my-study-label"  # a name the user chose stays


def test_a_cli_run_against_an_endpoint_is_labelled_by_the_served_model(tmp_path):
    import subprocess
    import sys

    with ScriptedServer([{"content": "x"}], model_id="/srv/Phi-4-mini.Q8_0.gguf") as srv:
        proc = subprocess.run([sys.executable, "-m", "searchbox.run", QUESTION, "--budget", "1", "--tools", "none",
                               "--out", str(tmp_path / "r"), "--endpoint", srv.url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r" / "run_meta.json").read_text())["model"] == "Phi-4-mini.Q8_0"


def test_sweep_labels_a_path_given_without_a_name_by_its_file():
    from searchbox.sweep.job import SweepConfig, axes_of

    sc = SweepConfig()
    sc.dataroom.path, sc.questions.path = "/data/my-room.zip", "/data/my-questions.jsonl"
    axes = axes_of(["dataroom.path=/data/my-room.zip", "questions.path=/data/my-questions.jsonl"], sc)
    assert axes["dataroom"] == "my-room" and axes["questions"] == "my-questions"
    sc.dataroom.name = "named"
    assert axes_of(["dataroom.path=/x.zip", "dataroom.name=named"], sc)["dataroom"] == "named"


def test_a_paused_runs_record_holds_the_counters_of_its_turn_in_progress(tmp_path):
    from searchbox.run.runner import resume

    read = {"tool_calls": [{"name": "read", "arguments": {"path": "dataroom/reports/gannet-rock-survey.md"}}]}
    with ScriptedServer([read, read, {"content": "38.4 metres"}]) as srv:
        cfg = make_cfg(budget=1)
        meta = execute(cfg, QUESTION, None, tmp_path / "run", srv.url, should_pause=lambda: len(srv.requests) >= 1)
        assert meta["stop_reason"] == "paused"
        # Before: tokens counted, but llm_calls, tool_calls and llm_s 0 until the run resumed.
        assert meta["llm_calls"] == 1 and meta["tool_calls"] == 1 and meta["llm_s"] > 0 and meta["tokens"]["total"] > 0
        done = resume(tmp_path / "run", srv.url)
    assert done["stop_reason"] == "budget_spent"
    assert done["llm_calls"] == len(srv.requests) == 3 and done["tool_calls"] == 2  # nothing counted twice
