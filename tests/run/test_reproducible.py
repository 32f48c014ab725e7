"""Reproducible runs: each run on its own llama-server slot, erased first; the embedded server started so that threads
and earlier runs do not change the numbers; the same run gives the same trajectory whatever ran before it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from searchbox.model import llama
from searchbox.config import RunConfig
from searchbox.model.pool import Endpoint, EndpointPool
from searchbox.run.runner import RunInfo, execute
from searchbox.record.trajectory import first_difference, trajectory
from tests.conftest import make_cfg, run_script
from tests.fakes.commands import SWEEP
from tests.fakes.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = [{"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}, {"content": "38.4 metres"}]


# ---- the pool hands out slot ids -----------------------------------------------------------------------
def test_pool_pins_each_run_in_flight_to_its_own_slot_id():
    pool = EndpointPool([Endpoint("http://a", 2, pinnable=True), Endpoint("http://b", 1)], log=lambda m: None, probe_fn=lambda u: None)
    leases = [pool.acquire() for _ in range(3)]
    assert sorted((x.url, x.slot) for x in leases if x.url == "http://a") == [("http://a", 0), ("http://a", 1)]
    assert next(x for x in leases if x.url == "http://b").slot is None  # not a llama-server: nothing to pin
    first = next(x for x in leases if x.slot == 0)
    pool.release(first)
    again = pool.acquire()
    assert (again.url, again.slot) == ("http://a", 0)  # the lowest free id: a run's slot does not depend on history


# ---- a run starts from an erased slot, pinned to it ------------------------------------------------------
def test_a_run_erases_its_slot_and_pins_every_request_to_it(tmp_path):
    meta, srv, _ = run_script(tmp_path, SCRIPT, server_kw={"slots": 1})
    assert srv.erased == [0]  # once, before the first request
    assert len(srv.requests) == 2 and all(r.get("id_slot") == 0 for r in srv.requests)
    assert meta["served"]["slot"] == 0 and meta["served"]["slot_start"] == "erased"


def test_a_sweep_slot_is_the_one_the_pool_gave(tmp_path):
    meta, srv, _ = run_script(tmp_path, SCRIPT, server_kw={"slots": 4}, info=RunInfo(slot=2))
    assert srv.erased == [2] and all(r.get("id_slot") == 2 for r in srv.requests)
    assert meta["served"]["slot"] == 2


def test_a_server_without_slot_actions_is_pinned_and_recorded_as_not_erased(tmp_path):
    meta, srv, _ = run_script(tmp_path, SCRIPT, server_kw={"slots": 1, "slot_actions": False})
    assert srv.erased == [] and all(r.get("id_slot") == 0 for r in srv.requests)
    assert meta["served"]["slot_start"] == "not erased: HTTP 501 (started without --slot-save-path)"


@pytest.mark.parametrize("server_kw, why", [({}, "unpinned: no llama-server slots"), ({"slots": 3}, "unpinned: 3 slots, none assigned")])
def test_no_slot_to_pin_leaves_requests_unpinned_and_says_why(tmp_path, server_kw, why):
    meta, srv, _ = run_script(tmp_path, SCRIPT, server_kw=server_kw)
    assert srv.erased == [] and not any("id_slot" in r for r in srv.requests)
    assert meta["served"]["slot"] is None and meta["served"]["slot_start"].startswith(why)


def test_a_resumed_run_erases_its_slot_again(tmp_path):
    from searchbox.run.runner import resume

    with ScriptedServer(SCRIPT * 2, slots=1) as srv:
        execute(make_cfg(budget=1), "How tall?", None, tmp_path / "r", srv.url)
        resumed = resume(tmp_path / "r", srv.url, budget=2)
        assert srv.erased == [0, 0] and all(r.get("id_slot") == 0 for r in srv.requests)
    assert resumed["served"]["slot"] == 0 and resumed["served"]["slot_start"] == "erased"


def test_a_sweep_pins_its_runs_to_the_slots_of_its_pool(tmp_path):
    with ScriptedServer([], slots=2) as srv:
        env = {**os.environ, "LLAMA_URL": srv.url, "HYDRA_FULL_ERROR": "1"}
        cmd = [*SWEEP, "tools=none", "budget=1", "questions.limit=4", "model.parallel=2", f"sweep.root={tmp_path}",
               "harness.today=2026-01-01", "model.retries=0"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        erased, pinned = list(srv.erased), [r.get("id_slot") for r in srv.requests]
    runs = pd.read_parquet(tmp_path / "default" / "runs.parquet")
    assert len(runs) == 4 and len(erased) == 4 and set(erased) <= {0, 1}
    assert set(runs["served_slot"]) <= {0, 1} and (runs["served_slot_start"] == "erased").all()
    assert None not in pinned and set(pinned) <= {0, 1}


# ---- the embedded server is started for reproducibility --------------------------------------------------
def test_embedded_server_flags_make_results_independent_of_threads_and_history(tmp_path):
    cmd = llama.LlamaServer(tmp_path / "llama-server", tmp_path / "m.gguf", threads=2, gpu=False).command()
    joined = " ".join(cmd)
    assert "-fa off" in joined and "--cache-ram 0" in joined and "--slot-save-path" in joined
    assert Path(cmd[cmd.index("--slot-save-path") + 1]).is_dir()  # llama-server refuses a path that is not a directory
    on_gpu = llama.LlamaServer(tmp_path / "llama-server", tmp_path / "m.gguf", gpu=True).command()
    assert "-fa" not in on_gpu and "--cache-ram" in on_gpu  # offloaded, the CPU threads compute nothing
    by_hand = llama.LlamaServer(tmp_path / "llama-server", tmp_path / "m.gguf", extra=["--flash-attn", "on", "--cache-ram=512"],
                                gpu=False).command()
    assert "-fa" not in by_hand and "--cache-ram" not in by_hand  # model.server_args win (and are in the run key)
    assert by_hand[-3:] == ["--flash-attn", "on", "--cache-ram=512"]


# ---- through the real llama-server --------------------------------------------------------------------
@pytest.mark.e2e
def test_the_same_run_gives_the_same_trajectory_whatever_ran_before(tmp_path, real_home):
    """One embedded server: run A, A again at once (its prompt is cached in the slot), B, then A once more."""
    if llama.find_server() is None or llama.find_model() is None:
        pytest.skip("embedded default not installed: run `python -m searchbox setup`")
    cfg = make_cfg(budget=2)
    cfg.model.max_tokens = 96
    cfg.model.protocol = "json"
    ask = {"A": "How tall is the Gannet Rock lighthouse?", "B": "Who led the restoration of Skerrow Point lighthouse?"}
    order = ["A", "A", "B", "A"]
    got = []
    with llama.LlamaServer.from_config(cfg.model) as server:
        for n, name in enumerate(order):
            meta = execute(cfg, ask[name], None, tmp_path / f"{n}-{name}", server.url)
            assert meta["served"]["slot"] == 0 and meta["served"]["slot_start"] == "erased"
            assert meta["llm_calls"] >= 2  # more than one request: the later ones continue the slot's cache
            got.append(trajectory(tmp_path / f"{n}-{name}"))
    a = [t for name, t in zip(order, got) if name == "A"]
    for other in a[1:]:
        assert first_difference(a[0], other) is None, first_difference(a[0], other)
