"""A relaunch after a question's gold was fixed in its file (issue 29 part 4): the done run is regraded against the new
gold, not reported done with the old grade, and it is not rerun."""

from __future__ import annotations

import json
import re

import pandas as pd

from searchbox.record.record import read_meta
from tests.fakes.runs import QUESTIONS
from tests.sweep.test_sweep import _sweep


def _launch(tmp_path, qfile):
    proc = _sweep(["model=control-oracle", "budget=2", f"questions.path={qfile}"], "http://127.0.0.1:9", tmp_path)  # no server
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    return out


def test_a_relaunch_regrades_a_done_run_whose_gold_changed(tmp_path):
    nw01 = json.loads(QUESTIONS.read_text().splitlines()[0])
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps(nw01) + "\n")
    _launch(tmp_path, qfile)
    sweep = tmp_path / "default"
    before = pd.read_parquet(sweep / "runs.parquet")
    assert len(before) == 1 and before["correct"].tolist() == [1.0], before[["correct", "answer_text"]]
    rd = sweep / "runs" / before["run_id"].iloc[0]
    done_mtime = (rd / "DONE").stat().st_mtime_ns

    qfile.write_text(json.dumps({**nw01, "answer": "41.0 metres", "aliases": []}) + "\n")  # the gold fixed by hand
    out = _launch(tmp_path, qfile)
    after = pd.read_parquet(sweep / "runs.parquet")
    assert after["run_id"].tolist() == before["run_id"].tolist() and (rd / "DONE").stat().st_mtime_ns == done_mtime  # not rerun
    assert after["correct"].tolist() == [0.0] and after["graded_gold"].tolist() == ["41.0 metres"]
    assert read_meta(rd)["grades"]["graded_gold"] == "41.0 metres"
    assert re.search(r"nw01: run \S+ was graded against another gold than .*q\.jsonl now holds; regraded", out), out[-3000:]

    out = _launch(tmp_path, qfile)  # nothing changed since: nothing regraded
    assert "regraded" not in out and pd.read_parquet(sweep / "runs.parquet")["correct"].tolist() == [0.0]
