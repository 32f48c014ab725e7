"""The environment knobs (searchbox/knobs.py): each becomes its config field, the command line wins, a bad value is
one line, and docs/configuration.md maps every one to its override."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from searchbox import knobs
from searchbox.config import RunConfig
from searchbox.errors import ConfigError
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]


def test_each_knob_sets_its_run_field():
    env = {"SEARCHBOX_TOOLS": "grep,read", "TURN_BUDGET": "7", "BUDGET_METRIC": "input", "CONTEXT_WINDOW": "4096",
           "EMBED_BACKEND": "api", "API_EMBED_MODEL": "jina-embeddings-v3", "EMBED_MODEL": "ignored-for-api",
           "RERANK_BACKEND": "cross-encoder", "RERANK_MODEL": "/models/ce", "EMBED_DEVICE": "cpu", "MIN_FREE_VRAM_MB": "3072",
           "MODEL_ID": "my-model"}
    cfg = RunConfig()
    knobs.apply(cfg, environ=env)
    assert cfg.tools == ["grep", "read"] and cfg.harness.budget == 7 and cfg.harness.token_metric == "input"
    assert cfg.model.context_window == 4096 and cfg.model.model == "my-model"
    r = cfg.retrieval
    assert (r.embedder, r.embed_model, r.reranker, r.rerank_model, r.device) == ("api", "jina-embeddings-v3", "cross-encoder", "/models/ce", "cpu")
    assert r.min_free_vram_gb == 3.0
    cfg.validate()


def test_an_empty_tools_knob_means_none_and_one_name_a_tier():
    for value, want in (("", "none"), ("high", "high"), (" grep , read ", ["grep", "read"])):
        cfg = RunConfig()
        knobs.apply(cfg, environ={"SEARCHBOX_TOOLS": value})
        assert cfg.tools == want
    cfg = RunConfig()
    knobs.apply(cfg, environ={"TURN_BUDGET": ""})  # an empty knob other than the tools' is unset
    assert cfg.harness.budget == 1


def test_the_command_line_wins():
    cfg = RunConfig(tools="low")
    cfg.harness.budget = 2
    applied = knobs.apply(cfg, frozenset({"tools", "harness.budget"}), {"SEARCHBOX_TOOLS": "high", "TURN_BUDGET": "9", "CONTEXT_WINDOW": "2048"})
    assert (cfg.tools, cfg.harness.budget, cfg.model.context_window) == ("low", 2, 2048) and applied == ["CONTEXT_WINDOW"]


@pytest.mark.parametrize("env, named", [({"TURN_BUDGET": "ten"}, "TURN_BUDGET"), ({"TURN_BUDGET": "0"}, "TURN_BUDGET"),
                                        ({"BUDGET_METRIC": "cache"}, "BUDGET_METRIC"), ({"EMBED_DEVICE": "tpu"}, "EMBED_DEVICE"),
                                        ({"AUTO_BACKFILL": "maybe"}, "AUTO_BACKFILL"), ({"MIN_FREE_VRAM_MB": "-1"}, "MIN_FREE_VRAM_MB")])
def test_a_bad_value_is_one_line_naming_the_knob(env, named):
    with pytest.raises(ConfigError) as err:
        knobs.read(env)
    assert str(err.value).startswith(f"${named}=") and "\n" not in str(err.value)


def test_sweep_overrides_skip_what_the_command_line_sets():
    env = {"SEARCHBOX_TOOLS": "grep,read", "TURN_BUDGET": "3", "EMBED_BACKEND": "api", "API_EMBED_MODEL": "m-api", "EMBED_MODEL": "m-local"}
    assert knobs.sweep_overrides([], env) == ["tools.select=[grep,read]", "budget=3", "backend.embedder=api", "backend.embed_model=m-api"]
    assert knobs.sweep_overrides(["-m", "tools=high,low", "budget=1,10"], env) == ["backend.embedder=api", "backend.embed_model=m-api"]
    local = knobs.sweep_overrides(["backend=local"], {"EMBED_MODEL": "m-local", "API_EMBED_MODEL": "m-api"})
    assert local == ["backend.embed_model=m-local"]  # the group the command line picks decides which model knob applies


def _sweep_cfg(env: dict, *args: str) -> str:
    """The job config a real Hydra sweep composes (`--cfg job` prints it and runs nothing)."""
    clean = {k: v for k, v in os.environ.items() if k not in knobs.BY_ENV}
    proc = subprocess.run([sys.executable, "-m", "searchbox.sweep", *args, "--cfg", "job"], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_a_real_sweep_composes_the_knobs_and_the_command_line_wins():
    out = _sweep_cfg({"SEARCHBOX_TOOLS": "grep,read", "TURN_BUDGET": "3", "BUDGET_METRIC": "input"})
    assert re.search(r"^tools:\n  select:\n  - grep\n  - read", out, re.M) and re.search(r"^budget: 3$", out, re.M)
    assert re.search(r"^token_metric: input$", out, re.M)
    out = _sweep_cfg({"TURN_BUDGET": "3", "SEARCHBOX_TOOLS": ""}, "budget=5")
    assert re.search(r"^budget: 5$", out, re.M) and re.search(r"^tools:\n  select: none$", out, re.M)


def test_a_bad_knob_stops_the_sweep_with_one_line():
    clean = {k: v for k, v in os.environ.items() if k not in knobs.BY_ENV}
    proc = subprocess.run([sys.executable, "-m", "searchbox.sweep", "--cfg", "job"], cwd=ROOT, env={**clean, "TURN_BUDGET": "lots"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == ["searchbox: $TURN_BUDGET='lots': invalid literal for int() with base 10: 'lots'"]


def test_a_real_run_records_the_knobs_in_its_key_and_the_flag_wins(tmp_path):
    clean = {k: v for k, v in os.environ.items() if k not in knobs.BY_ENV and k != "LLAMA_URL"}
    env = {**clean, "SEARCHBOX_TOOLS": "grep,read", "TURN_BUDGET": "2", "CONTEXT_WINDOW": "4096"}
    with ScriptedServer([{"content": "Tobias Wren"}] * 4) as srv:
        for name, extra in (("knobs", []), ("flag", ["--budget", "1"])):
            proc = subprocess.run([sys.executable, "-m", "searchbox.run", "Who led the restoration?", "--out", str(tmp_path / name),
                                   "--endpoint", srv.url, "--no-force-budget", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-2000:]
    keyed = {name: json.loads((tmp_path / name / "key.json").read_text())["config"] for name in ("knobs", "flag")}
    assert keyed["knobs"]["tools"] == ["grep", "read"] and keyed["knobs"]["harness"]["budget"] == 2
    assert keyed["knobs"]["model"]["context_window"] == 4096
    assert keyed["flag"]["harness"]["budget"] == 1  # --budget wins over $TURN_BUDGET


def test_doctor_lists_the_knobs_that_are_set(capsys, monkeypatch):
    from searchbox.__main__ import doctor

    for name in knobs.BY_ENV:
        monkeypatch.delenv(name, raising=False)
    doctor(["env"])
    assert "none set" in capsys.readouterr().out
    monkeypatch.setenv("TURN_BUDGET", "4")
    doctor(["env"])
    assert "TURN_BUDGET=4 -> harness.budget" in capsys.readouterr().out


def test_the_docs_table_maps_every_knob_to_its_override():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z_]+)` \| ([^|]+) \|", text, re.M)}
    assert set(rows) == set(knobs.BY_ENV)
    for knob in knobs.KNOBS:
        assert (f"`{knob.sweep}=`" in rows[knob.env]) if knob.sweep else rows[knob.env].strip() == "-", knob.env
