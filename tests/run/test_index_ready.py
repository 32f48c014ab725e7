"""Indexes are never a surprise: built before the run (setup, the run CLI, a sweep's job), progress wherever a user looks,
the build counted as setup and recorded in the run that made it; one index of the packaged corpus for every entry point."""

from __future__ import annotations

import io
import json
import re

import pandas as pd

from searchbox.config import RunConfig
from searchbox.corpus.dataroom import builtin_dataroom, packaged_corpus
from searchbox.retrieval.index.console import Console
from searchbox.retrieval.index.progress import reporting
from searchbox.run.index_ready import ensure, found, index_folder
from tests.conftest import make_cfg, run_script
from tests.fakes.scripted_server import ScriptedServer
from tests.sweep.test_sweep import _sweep

SEARCH = {"tool_calls": [{"name": "search_dataroom", "arguments": {"query": "Gannet Rock height"}}]}


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_console_writes_lines_to_a_log_and_a_bar_to_a_terminal():
    clock, log = Clock(), io.StringIO()
    con = Console("jina-corpus.zip", "[sweep]", log, tty=False, every_s=10, clock=clock)
    for t, stage, done, total in [(0, "read", 1, 0), (1, "read", 207, 0), (2, "embed", 0, 4640), (5, "embed", 256, 4640),
                                  (13, "embed", 1200, 4640), (14, "embed", 1456, 4640), (40, "embed", 4640, 4640)]:
        clock.t = t
        con(stage, done, total)
    lines = log.getvalue().splitlines()
    assert lines[0] == "[sweep] building the index of jina-corpus.zip: 4,640 chunks to embed"
    # 5 s and 14 s: within 10 s of the line before; 1,200 chunks in the 11 s since embedding began: 3,440 left in about 32 s
    assert lines[1] == "[sweep] building the index of jina-corpus.zip: 1,200 / 4,640 chunks (25%), 13 s, about 32 s left"
    assert lines[2] == "[sweep] embedded 4,640 chunks of jina-corpus.zip in 40 s" and len(lines) == 3
    clock.t, tty = 0.0, io.StringIO()
    bar = Console("the packaged corpus", stream=tty, tty=True, clock=clock)
    for t, done in [(0, 0), (1, 1200), (2, 4640)]:
        clock.t = t
        bar("embed", done, 4640)
    out = tty.getvalue()
    assert "\r[index] embedding [######------------------] 1,200 / 4,640 chunks (25%)" in out
    assert out.endswith("[index] embedded 4,640 chunks of the packaged corpus in 2 s\n") and out.count("\n") == 1
    clock.t = 100.0  # a second build in the same process is timed from its own start
    bar("embed", 0, 7)
    clock.t = 103.0
    bar("embed", 7, 7)
    assert tty.getvalue().endswith("embedded 7 chunks of the packaged corpus in 3 s\n")


def test_a_run_that_builds_its_index_counts_it_as_setup_and_records_it(tmp_path):
    """On a fresh home the first search builds the index: the tool call's setup, not its time; the record says what was
    built, how long it took and that one search was made; every listener of the progress hook heard the build."""
    heard = []
    cfg = make_cfg(sandbox="none")
    cfg.tools = "high"
    with reporting(lambda *r: heard.append(r)):
        meta, _, run_dir = run_script(tmp_path, [SEARCH, {"content": "38.4 metres"}], cfg=cfg)
    r = meta["retrieval"]
    assert r["searches"] == 1 and r["scopes_built"] == 1
    idx = r["index"]
    assert idx["built"] is True and idx["embedded_chunks"] == idx["rows"] == 7 and idx["build_s"] > 0
    assert r["setup_s"] >= idx["build_s"] and meta["setup_s"] >= idx["build_s"]
    rows = pd.read_parquet(run_dir / "tool_calls.parquet")
    assert rows["setup_ms"].iloc[0] >= idx["build_s"] * 1000 and rows["duration_ms"].iloc[0] < rows["setup_ms"].iloc[0]
    assert ("embed", 0, 7) in heard and ("embed", 7, 7) in heard


def test_ensure_builds_before_the_run_and_the_run_finds_it(tmp_path):
    cfg = make_cfg(sandbox="none")
    cfg.tools = "high"
    assert found(cfg, builtin_dataroom()) is None
    heard = []
    with reporting(lambda *r: heard.append(r)):
        first = ensure(cfg, builtin_dataroom())
    assert first.built and first.chunks == first.embedded_chunks == 7 and ("embed", 7, 7) in heard and heard[-1] == ("bm25", 7, 7)
    again = ensure(cfg, builtin_dataroom())
    assert not again.built and again.folder == first.folder and again.embedded_chunks == 0
    assert ensure(make_cfg(), builtin_dataroom()) is None  # tools=none search no index: nothing to build
    meta, _, _ = run_script(tmp_path, [SEARCH, {"content": "38.4 metres"}], cfg=cfg)
    idx = meta["retrieval"]["index"]
    assert idx["built"] is False and idx["folder"] == first.folder and meta["retrieval"]["searches"] == 1
    assert meta["retrieval"]["scopes_built"] == 0  # this run embedded nothing


def test_setup_the_run_cli_the_sweep_and_the_web_app_open_one_index_of_the_packaged_corpus():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from searchbox.__main__ import packaged_index_config
    from searchbox.sweep.job import CONF_DIR, register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        swept = OmegaConf.to_object(compose(config_name="config"))
    folders = {index_folder(cfg, packaged_corpus()) for cfg in (packaged_index_config(), swept.run_config(), RunConfig(tools="high"))}
    assert len(folders) == 1


def test_setup_builds_the_packaged_index_and_doctor_shows_it(monkeypatch, capsys):
    from searchbox import __main__ as main_mod
    from searchbox.corpus import dataroom

    monkeypatch.setattr(dataroom, "packaged_corpus", builtin_dataroom)  # the tiny one: the same code path in seconds
    assert main_mod.doctor(["packaged"]) == 0  # optional: a warning, not a failure
    assert re.search(r"packaged corpus index\s+warn\s+not built.*python -m searchbox setup", capsys.readouterr().out)
    ready = main_mod.packaged_index()
    assert ready.built and ready.chunks == 7
    assert "[index] embedded 7 chunks of the packaged corpus" in capsys.readouterr().err
    main_mod.doctor(["packaged"])
    row = capsys.readouterr().out
    assert re.search(r"packaged corpus index\s+ok\s+7 chunks of 7 files, built .*all-MiniLM-L6-v2 \(emb1-", row)
    assert f"python -m searchbox.index doctor --index {ready.folder}" in row
    assert not main_mod.packaged_index().built  # setup again: found, not rebuilt


def test_doctor_says_whether_the_work_quota_can_be_mounted(capsys):
    from searchbox.__main__ import doctor
    from searchbox.tools.sandbox import quota_failure

    doctor(["work/"])
    row = capsys.readouterr().out
    why = quota_failure()
    assert (re.search(r"work/ quota\s+ok\s+a sized tmpfs", row) if not why else
            re.search(r"work/ quota\s+warn\s+cannot be mounted here", row) and why[:40] in row)


def test_a_sweep_builds_the_index_before_its_first_run(tmp_path):
    with ScriptedServer([SEARCH, {"content": "38.4 metres"}] * 4) as srv:
        proc = _sweep(["tools=high", "budget=1", "questions.limit=2"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    building = out.index("[sweep] building the index of dataroom: 7 chunks to embed")
    built = out.index("[sweep] embedded 7 chunks of dataroom in")
    assert building < built < out.index("[sweep] 1/2 runs done")
    metas = [json.loads(p.read_text()) for p in (tmp_path / "default" / "runs").glob("*/run_meta.json")]
    assert len(metas) == 2 and all(m["retrieval"]["index"]["built"] is False and m["retrieval"]["searches"] == 1 for m in metas)
    with ScriptedServer([]) as srv:  # relaunched with the index there: nothing is said about it
        proc = _sweep(["tools=high", "budget=2", "questions.limit=1"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "building the index" not in out and "embedded" not in out, out[-3000:]


def test_a_sweep_whose_tools_search_no_index_builds_none(tmp_path, isolated_home):
    with ScriptedServer([]) as srv:
        proc = _sweep(["tools=none,low", "budget=1", "questions.limit=1"], srv.url, tmp_path)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "building the index" not in out, out[-3000:]
    assert not list(isolated_home.glob("indexes/*"))


def test_the_run_cli_shows_an_index_build(tmp_path):
    """A run whose first search builds its dataroom's index says so on stderr (a bar on a terminal, lines here)."""
    import subprocess
    import sys

    with ScriptedServer([SEARCH, {"content": "38.4 metres"}]) as srv:
        proc = subprocess.run([sys.executable, "-m", "searchbox.run", "How tall is Gannet Rock?", str(builtin_dataroom()), "--tools", "high",
                               "--sandbox", "none", "--out", str(tmp_path / "r"), "--endpoint", srv.url],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[index] building the index: 7 chunks to embed" in proc.stderr and "[index] embedded 7 chunks in" in proc.stderr
    meta = json.loads((tmp_path / "r" / "run_meta.json").read_text())
    assert meta["retrieval"]["index"]["built"] is True and meta["retrieval"]["searches"] == 1
