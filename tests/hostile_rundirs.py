"""Hostile battery, round three (run folders and the web app): attempts registered into tests.hostile_attempts.ATTEMPTS.

Damaged or edited run folders against done-checks, collect and --resume (issue 36 part 3), and hostile requests
against the web app (part 5). Each attempt names its run folders `rundirs_*` so `-k rundirs` runs this file's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.hostile_attempts import ROOT, attempt, held

DEEP = "[" * 30_000 + "]" * 30_000


def _sweep_with(tmp, how: str):
    from tests.fakes.runs import make_run

    s = tmp / "s"
    make_run(s, "good")
    bad = make_run(s, "bad")
    meta = bad / "run_meta.json"
    host = tmp / "host.json"
    host.write_text(json.dumps({**json.loads(meta.read_text()), "run_id": "HOST-SECRET"}))
    if how == "link":
        meta.unlink()
        meta.symlink_to(host)
    elif how == "turns-garbage":
        (bad / "turns.parquet").write_bytes(b"PAR1garbagePAR1")
    else:
        meta.write_text({"empty": "", "garbage": "\x00{nope", "deep": DEEP}[how])
    return s, bad


def _collect_holds(tmp, how: str) -> str:
    from searchbox.record.collect import collect
    from searchbox.record.done import is_done

    s, bad = _sweep_with(tmp, how)
    held(not is_done(bad), f"a run whose record is {how} counts as done")
    left: list[str] = []
    runs, _, _ = collect([s], left)
    held(list(runs["run_id"]) == ["good"], f"collect kept {sorted(runs['run_id'])}")
    held("HOST-SECRET" not in runs.to_string(), "a host file was read through a link into runs.parquet")
    held(len(left) == 1 and "\n" not in left[0], f"collect did not name the damaged run in one line: {left}")
    return f"not done; collect left it out: {left[0][-120:]}"


@attempt("sweep", "an empty run_meta.json beside a DONE marker counts the run as done")
def rundirs_empty_record_counts_as_done(tmp):
    return _collect_holds(tmp, "empty")


@attempt("links", "run_meta.json replaced by a symlink to a host file is read into runs.parquet")
def rundirs_record_link_read_into_tables(tmp):
    return _collect_holds(tmp, "link")


@attempt("sweep", "garbage or 30,000-deep run_meta.json, or a garbage turns.parquet, crash collect")
def rundirs_garbage_records_crash_collect(tmp):
    notes = []
    for how in ("garbage", "deep", "turns-garbage"):
        (tmp / how).mkdir()
        notes.append(_collect_holds(tmp / how, how))
    proc = subprocess.run([sys.executable, "-m", "searchbox.collect", str(tmp / "deep" / "s")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    held(proc.returncode == 0 and "Traceback" not in proc.stderr, f"collect ended in a traceback: {proc.stderr[-300:]}")
    return "; ".join(n[:40] for n in notes)


@attempt("sweep", "--resume of a run whose state.json is empty, garbage, of the wrong shape, deep or a link")
def rundirs_resume_of_a_damaged_state(tmp):
    from tests.fakes.runs import make_run

    rd = make_run(tmp / "s", "r", done=False)
    host = tmp / "host-state.json"
    host.write_text('{"harness": "native", "version": 2, "loop": {}}')
    cases = {"empty": "", "garbage": "\x00\x01{", "wrong-shape": "[1, 2]", "deep": DEEP,
             "wrong-types": json.dumps({"harness": "native", "version": 2, "loop": {"turn": "three"}}), "link": None}
    for how, text in cases.items():
        state = rd / "state.json"
        if state.exists() or state.is_symlink():
            state.unlink()
        if text is None:
            state.symlink_to(host)
        else:
            state.write_text(text)
        before = (rd / "run_meta.json").read_bytes()
        proc = subprocess.run([sys.executable, "-m", "searchbox.run", "--resume", str(rd), "--endpoint", "http://127.0.0.1:9"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        held(proc.returncode != 0 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1,
             f"--resume of a {how} state.json: {proc.stderr[-300:]}")
        held((rd / "run_meta.json").read_bytes() == before, f"--resume of a {how} state.json rewrote the record")
    return f"{len(cases)} damaged checkpoints: one line each, the record untouched"


@attempt("sweep", "a question reworded in its file leaves the old wording's run in runs.parquet (two rows for one question)")
def rundirs_reworded_question_leaves_a_stale_row(tmp):
    from searchbox.record.collect import collect
    from tests.fakes.runs import QUESTIONS, make_run

    qs = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()][:3]
    qfile = tmp / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
    for q in qs:
        make_run(tmp / "s", f"old-{q['id']}", question_id=q["id"], questions_path=qfile, gold=q)
    qs[0] = {**qs[0], "question": qs[0]["question"] + " Answer in metres."}
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
    make_run(tmp / "s", "new", question_id=qs[0]["id"], questions_path=qfile, gold=qs[0])
    runs, _, _ = collect([tmp / "s"])
    held(len(runs) == 3 and runs["question_id"].is_unique, f"{len(runs)} rows for a 3-question file: {sorted(runs['question_id'])}")
    return "one row per current question; the old wording's run left out"


@attempt("endpoint", "a 30,000-deep JSON body on /api/jobs/ID/resume gives a 500 (RecursionError in the server)")
def rundirs_web_deep_json_body(tmp):
    from tests.fakes.webapp import LiveApp

    with LiveApp(tmp / "out", "http://127.0.0.1:9") as app:
        r = app.post("/api/jobs/x/resume", content=DEEP, headers={"content-type": "application/json"})
        held(r.status_code == 400, f"status {r.status_code}: {r.text[:200]}")
        return f"400: {r.json()['error']}"


@attempt("endpoint", "the result page of a run whose ANSWER.md is '**' x 1024 blocks /api/config behind its grading")
def rundirs_web_slow_result_blocks_the_app(tmp):
    import concurrent.futures as cf

    import httpx

    from tests.fakes.runs import make_run
    from tests.fakes.webapp import LiveApp

    rd = make_run(tmp / "out" / "sweeps" / "s", "slow", answer="**" * 1024)
    meta = json.loads((rd / "run_meta.json").read_text())
    (rd / "run_meta.json").write_text(json.dumps({**meta, "status": "complete"}))
    with LiveApp(tmp / "out", "http://127.0.0.1:9") as app, cf.ThreadPoolExecutor(4) as pool:
        t0 = time.monotonic()
        pages = [pool.submit(httpx.get, f"{app.url}/api/runs/sweeps/s/runs/slow/result", timeout=120) for _ in range(4)]
        time.sleep(0.3)
        c0 = time.monotonic()
        config = app.get("/api/config")
        waited = time.monotonic() - c0
        codes = [f.result().status_code for f in pages]
        took = time.monotonic() - t0
    held(config.status_code == 200 and waited < 3.0, f"/api/config waited {waited:.1f} s behind the result pages")
    held(codes == [200] * 4 and took < 45, f"4 result pages took {took:.0f} s ({codes})")
    return f"/api/config in {waited:.2f} s; 4 result pages in {took:.0f} s (grading bounded in a child process)"
