"""The sweep's plan before its first run and its ETA: runs weighted by budget, priced at this machine's rate."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from searchbox.humanize import duration
from searchbox.sweep import plan as sweep_plan
from searchbox.sweep.job import Progress
from searchbox.sweep.plan import GridPoint, Rate, describe, expected_turns, load_rate, record_run, run_s, suggest_limit
from tests.fakes.commands import SWEEP

ROOT = Path(__file__).resolve().parents[2]


def seconds(text: str) -> float:
    """Back from sweep_plan.duration's words."""
    units = {"d": 86400, "h": 3600, "min": 60, "s": 1}
    return float(sum(int(n) * units[u] for n, u in re.findall(r"(\d+) (d|h|min|s)\b", text)))


def test_duration_reads_back():
    for s in (0, 12, 453, 3600 + 45 * 60, 2 * 86400 + 3 * 3600):
        assert abs(seconds(duration(s)) - s) < 60


def test_expected_turns_follow_the_budget():
    assert expected_turns(30, "turns", True, 64) == 30 and expected_turns(30, "turns", False, 64) == 1
    assert expected_turns(100, "turns", True, 64) == 64  # max_turns caps it
    assert expected_turns(20000, "tokens", True, 64, "total", {"total": 4000}) == 5
    assert expected_turns(2000, "tokens", True, 64, "completion") == 2000 / sweep_plan.TOKENS_PER_TURN["completion"]
    assert expected_turns(10**6, "tokens", True, 64, "completion") == 64  # max_turns caps a token budget too


def test_the_stored_rate_separates_a_runs_own_cost_from_its_turns():
    assert load_rate("smollm2-135m") is None
    record_run({"model": "smollm2-135m", "turns": 10, "elapsed_s": 100.0, "tokens": {"total": 50000, "completion": 2000}})
    first = load_rate("smollm2-135m")  # one length of run: the turn carries everything
    assert first.s_per_turn == 10.0 and first.s_per_run == 0.0 and first.runs == 1 and first.tokens_per_turn["total"] == 5000
    for turns in (1, 30, 1, 10):  # 20 s a run (the first prefill, set-up) + 5 s a turn
        record_run({"model": "smollm2-135m", "turns": turns, "elapsed_s": 20.0 + 5.0 * turns, "tokens": {"total": 5000 * turns}})
    fitted = load_rate("smollm2-135m")
    assert fitted.runs == 5 and 3.0 < fitted.s_per_turn < 7.0 and 10.0 < fitted.s_per_run < 30.0, fitted
    assert fitted.overhead_turns == pytest.approx(fitted.s_per_run / fitted.s_per_turn)
    record_run({"model": "smollm2-135m", "turns": 0, "elapsed_s": 5.0})  # a run that never took a turn prices nothing
    assert load_rate("smollm2-135m") == fitted and load_rate("another-model") is None


def test_each_tool_tier_has_its_own_rate_and_falls_back_to_the_models():
    for _ in range(3):  # SmolLM2 answering at once under tools=low, reading files under tools=high
        record_run({"model": "m", "turns": 10, "elapsed_s": 40.0, "axes": {"tools": "low"}})
        record_run({"model": "m", "turns": 10, "elapsed_s": 400.0, "axes": {"tools": "high"}})
    assert load_rate("m", "low").s_per_turn == 4.0 and load_rate("m", "high").s_per_turn == 40.0
    assert load_rate("m", "none").s_per_turn == load_rate("m").s_per_turn == 22.0  # not measured yet: the model's over all tiers
    assert sweep_plan.fit({"n": 2, "t": 2, "tt": 2, "s": 30, "ts": 30}) == (0.0, 15.0)  # same lengths: per turn only


def test_old_runs_fade_from_the_stored_rate():
    for _ in range(60):
        record_run({"model": "m", "turns": 2, "elapsed_s": 100.0})
    for _ in range(150):
        record_run({"model": "m", "turns": 2, "elapsed_s": 20.0})  # a faster thread plan: the rate follows (by halves every ~35 runs)
    assert load_rate("m").s_per_turn < 13.0


def test_plan_weights_runs_by_budget_and_suggests_a_limit_over_an_hour():
    # The design card's command with no questions.limit: 430 questions x 9 grid points.
    rate = Rate(6.0, 40, s_per_run=12.0)
    points = [GridPoint(i, f"tools={t} budget={b}", 430, 0, float(b), rate.overhead_turns, run_s(b, rate), {"tools": t, "budget": str(b)})
              for i, (b, t) in enumerate((b, t) for b in (1, 10, 30) for t in ("high", "low", "none"))]
    lines = describe(points, {"tools": ["high", "low", "none"], "budget": ["1", "10", "30"]}, 430, 1, ["questions.limit=null"], 40)
    text = "\n".join(lines)
    assert "9 grid point(s) x 430 question(s) = 3,870 run(s), 0 done, 3,870 to go" in lines[0]
    assert "52,890 turn(s) to go, priced at this machine's rate for each model and tool tier (40 run(s) measured)" in text
    expected = 52890 * 6.0 + 3870 * 12.0  # 430 x 3 x (1 + 10 + 30) turns at 6 s, and 12 s a run
    assert seconds(text.split("about ")[1].splitlines()[0]) == pytest.approx(expected, rel=0.01)
    assert sweep_plan.estimate_s(points, 2) == pytest.approx(expected / 2)  # two runs in flight
    limit = suggest_limit(points, 1, 430)
    assert limit == 4 and f"questions.limit={limit}" in text  # 4 x (123 x 6 + 9 x 12) s = 56 min; 5 would be 70 min
    small = [dataclasses.replace(p, runs=1) for p in points]
    assert suggest_limit(small, 1, 1) is None and "over an hour" not in "\n".join(describe(small, {}, 1, 1))
    unpriced = [dataclasses.replace(p, seconds=None) for p in points]
    assert "no rate measured" in "\n".join(describe(unpriced, {}, 430, 1)) and suggest_limit(unpriced, 1, 430) is None
    done = [dataclasses.replace(p, done=430 if p.turns == 30 else None) for p in points]
    assert "1,290 done (of 3 grid points whose server is known)" in describe(done, {}, 430, 1)[0]


def _launch(tmp_path: Path, budgets: list[int], runs_each: int, overhead: float = 1.0) -> Path:
    sweep = tmp_path / "sweep"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"jobs": len(budgets), "launch": "L1"}))
    points = [GridPoint(i, f"budget={b}", runs_each, 0, float(b), overhead) for i, b in enumerate(budgets)]
    (sweep / ".launches" / "L1").mkdir(parents=True)
    (sweep / ".launches" / "L1" / "plan.json").write_text(json.dumps(sweep_plan.plan_record(points, {}, runs_each, 1)))
    return sweep


def test_eta_stays_stable_across_runs_of_different_budgets(tmp_path, capsys, monkeypatch):
    """Budgets 1, 10, 30 run one after another, each run's time a fixed cost plus its turns (with noise): the ETA
    after each run stays within a small factor of the time really left (an average per run jumped 30-fold)."""
    monkeypatch.delenv("SEARCHBOX_THREAD_PLAN", raising=False)
    budgets, per_turn, per_run, runs_each = [1, 10, 30], 4.0, 6.0, 3
    sweep = _launch(tmp_path, budgets, runs_each, overhead=1.0)  # the plan's guess of the run cost, not the truth (1.5 turns)
    noise = [1.3, 0.8, 1.1, 0.9, 1.2, 0.7, 1.0, 1.25, 0.85]
    durations = [(per_run + b * per_turn) * noise[i * runs_each + j] for i, b in enumerate(budgets) for j in range(runs_each)]
    now = [0.0]
    etas, truth = [], []
    n = 0
    for job, budget in enumerate(budgets):
        keys = [f"k{job}-{j}" for j in range(runs_each)]
        progress = Progress(sweep, job, keys, clock=lambda: now[0])
        progress.REFRESH_S = 0.0
        for key in keys:
            now[0] += durations[n]
            n += 1
            (sweep / "runs" / key).mkdir()
            (sweep / "runs" / key / "DONE").write_text("budget_spent")
            (sweep / "runs" / key / "run_meta.json").write_text(json.dumps({"run_id": key, "stop_reason": "budget_spent", "model": "m", "turns": budget, "elapsed_s": durations[n - 1]}))
            progress.update(True, f"{key} budget={budget}", key)
            etas.append(seconds(re.findall(r"ETA ([^|]+)\|", capsys.readouterr().err)[-1]))
            truth.append(sum(durations[n:]))
    assert etas[-1] == 0
    for eta, left in zip(etas[:-1], truth[:-1]):
        assert left / 2 <= eta <= left * 2, (etas, truth)
    jumps = [max(a, b) / max(1.0, min(a, b)) for a, b in zip(etas[:-2], etas[1:-1])]
    assert max(jumps) < 3, (etas, jumps)
    assert load_rate("m").runs == 9  # every finished run fed this machine's rate


def test_progress_pools_the_pace_of_jobs_running_at_once(tmp_path, capsys, monkeypatch):
    from searchbox.model import threads

    monkeypatch.setenv(threads.PLAN_ENV, threads.plan(4, 2, False, jobs=2).to_env())
    sweep = _launch(tmp_path, [10, 10], 2)
    now = [0.0]
    a = Progress(sweep, 0, ["a0", "a1"], clock=lambda: now[0])
    b = Progress(sweep, 1, ["b0", "b1"], clock=lambda: now[0])
    now[0] = 100.0  # both jobs finished a 10-turn run in the same 100 s
    for progress, key in ((a, "a0"), (b, "b0")):
        (sweep / "runs" / key).mkdir()
        (sweep / "runs" / key / "DONE").write_text("x")
        (sweep / "runs" / key / "run_meta.json").write_text(json.dumps({"run_id": key, "stop_reason": "budget_spent"}))  # a valid record: done
        progress.REFRESH_S = 0.0
        progress.update(True, key, key)
    eta = seconds(re.findall(r"ETA ([^|]+)\|", capsys.readouterr().err)[-1])
    assert eta == pytest.approx(100.0, abs=2)  # 20 turns left at 10 s/turn per job, two jobs at once


def _sweep(args: list[str], root: Path) -> str:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    env.pop("LLAMA_URL", None)
    proc = subprocess.run([*SWEEP, *args, f"sweep.root={root}", "harness.today=2026-01-01"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_the_sweep_prints_its_plan_before_the_first_run_and_counts_what_is_done(tmp_path):
    args = ["model=control-keyword", "tools=none", "budget=1,3", "questions.limit=2"]
    first = _sweep(args, tmp_path)
    plan = first.index("[sweep] plan: 2 grid point(s) x 2 question(s) = 4 run(s), 0 done, 4 to go")
    assert plan < first.index("runs done")  # before the first run
    assert re.search(r"\[sweep\]   budget +1, 3", first) and "no rate measured for this model here yet" in first
    assert re.search(r"\[sweep\] plan: measured [\d.]+ s per turn on the first run\(s\): about .+ to go", first)  # then priced
    stored = json.loads(next(Path(tmp_path).glob("default/.launches/*/plan.json")).read_text())
    assert [p["turns"] for p in stored["points"]] == [1.0, 3.0] and stored["questions"] == 2
    again = _sweep([*args[:-1], "questions.limit=3"], tmp_path)  # one more question: 4 of 6 runs done
    assert "[sweep] plan: 2 grid point(s) x 3 question(s) = 6 run(s), 4 done, 2 to go" in again
    assert re.search(r"turn\(s\) to go, priced at this machine's rate for each model and tool tier \(\d+ run\(s\) measured\)", again)
    # the rate it priced with (a control sends no llama.cpp timings: no speeds to show) and which runs cost the most
    assert re.search(r"\[sweep\]   rates +control-keyword, tools=none: [\d.]+ s a turn \+ [\d.]+ s a run, no server timings", again)
    assert re.search(r"\[sweep\]   cost +budget 3 \d+%, 1 \d+% \(share of the time to go\)", again)


def _trace(path: Path, calls: list[dict]) -> Path:
    lines = [json.dumps({"message": {"role": "system", "content": "x"}})]
    lines += [json.dumps({"message": {"role": "assistant"}, "usage": {"prompt_tokens": 1, "timings": t}}) for t in calls]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_plan_prices_with_the_servers_own_prefill_and_decode_speeds(tmp_path):
    """llama.cpp's timings of every call are folded into the stored rate; the plan prints them beside the turn's cost."""
    calls = [{"prompt_n": 2000, "prompt_ms": 2000.0, "predicted_n": 100, "predicted_ms": 2000.0},
             {"prompt_n": 1000, "prompt_ms": 1000.0, "predicted_n": 50, "predicted_ms": 1000.0, "cache_n": 900}]
    speed = sweep_plan.trace_speed(_trace(tmp_path / "trace.jsonl", calls))
    assert speed == {"prefill_tokens": 3000, "prefill_ms": 3000, "decode_tokens": 150, "decode_ms": 3000}
    for _ in range(3):
        record_run({"model": "m", "turns": 5, "elapsed_s": 30.0, "axes": {"tools": "high"}}, speed)
    rate = load_rate("m", "high")
    assert rate.prefill_tps == 1000.0 and rate.decode_tps == 50.0
    points = [GridPoint(0, "budget=5", 2, 0, 5.0, rate.overhead_turns, run_s(5, rate), {"budget": "5"}, "m, tools=high")]
    text = "\n".join(describe(points, {"budget": ["5"]}, 2, 1, rates={"m, tools=high": rate}))
    assert re.search(r"rates +m, tools=high: 6.0 s a turn \+ 0.0 s a run, prefill 1,000 tok/s, decode 50 tok/s \(3 run\(s\), stored, load not recorded\)", text), text
    record_run({"model": "n", "turns": 5, "elapsed_s": 30.0})  # no timings (an OpenAI endpoint, a control): no speeds claimed
    assert load_rate("n").prefill_tps is None and load_rate("n").decode_tps is None


def test_a_traces_hostile_or_missing_timings_price_nothing(tmp_path):
    bad = [{"prompt_n": -5, "prompt_ms": 10, "predicted_n": 1, "predicted_ms": 1}, {"prompt_n": "many", "prompt_ms": 1},
           {"prompt_n": float("nan"), "prompt_ms": 1, "predicted_n": 1, "predicted_ms": 1}, "not a dict"]
    path = _trace(tmp_path / "trace.jsonl", bad)
    with path.open("a") as f:
        f.write('{"usage": {"timings": {"prompt_n": 1e400, "prompt_ms": 1}}}\n' + "{broken json with \"timings\"\n")
    assert sweep_plan.trace_speed(path) == dict.fromkeys(sweep_plan.SPEED, 0.0)
    assert sweep_plan.trace_speed(tmp_path / "absent.jsonl") == dict.fromkeys(sweep_plan.SPEED, 0.0)
    assert sweep_plan.speeds({"prefill_tokens": 10, "prefill_ms": 0}) == (None, None)


def _card(rate: Rate, questions: int) -> list[GridPoint]:
    return [GridPoint(i, f"tools={t} budget={b}", questions, 0, float(b), rate.overhead_turns, run_s(b, rate), {"tools": t, "budget": str(b)})
            for i, (t, b) in enumerate((t, b) for t in ("high", "low", "none") for b in (1, 10, 30))]


def test_the_plan_says_which_runs_cost_the_most_by_tier_and_budget():
    rate = Rate(6.0, 40, s_per_run=12.0)
    points = _card(rate, 10)
    costs = sweep_plan.level_costs(points)
    assert [v for v, _ in costs["budget"]] == ["30", "10", "1"]
    assert costs["budget"][0][1] == pytest.approx((12 + 180) / (3 * 12 + 246), rel=1e-6)  # a budget=30 run's share of a question
    assert sum(share for _, share in costs["tools"]) == pytest.approx(1.0)
    text = "\n".join(describe(points, {"tools": ["high", "low", "none"], "budget": ["1", "10", "30"]}, 10, 1))
    assert re.search(r"cost +tools high 33%, low 33%, none 33% \| budget 30 68%, 10 26%, 1 6% \(share of the time to go\)", text), text
    assert "costliest runs: tools=high budget=30 3 min 12 s a run, tools=low budget=30 3 min 12 s a run" in text
    done = [dataclasses.replace(p, done=p.runs) if p.levels["budget"] == "30" else p for p in points]  # what is done costs nothing now
    assert sweep_plan.level_costs(done)["budget"][0][0] == "10"
    unpriced = [dataclasses.replace(p, seconds=None) for p in points]
    assert "(share of the expected turns to go)" in "\n".join(describe(unpriced, {}, 10, 1))


def test_over_an_hour_the_plan_offers_reductions_that_keep_the_design():
    rate = Rate(6.0, 40, s_per_run=12.0)
    points = _card(rate, 430)
    offer = sweep_plan.reductions(points, 1, 430)
    assert len(offer) == 1 and "questions.limit=4 runs 36 run(s)" in offer[0]
    kept = [p for p in points if p.levels["budget"] != "30"]
    assert f"dropping budget=30 (68% of the time) runs 2,580 run(s) in about {duration(sweep_plan.estimate_s(kept, 1))}" in offer[0], offer
    two = [p for p in points if p.levels["budget"] != "1"]  # budget has two levels left, tools three: tools' costliest goes
    assert sweep_plan.costliest_level(two)[0] == "tools"
    pair = [p for p in two if p.levels["tools"] != "none"]  # two levels on every axis: dropping one would end a comparison
    assert sweep_plan.costliest_level(pair) is None and "dropping" not in " ".join(sweep_plan.reductions(pair, 1, 430))
    assert sweep_plan.reductions(_card(rate, 1), 1, 1) == []  # under an hour: nothing offered
    lines = sweep_plan.first_estimate([dataclasses.replace(p, seconds=None) for p in points], sum(p.weight * p.runs for p in points),
                                      [sweep_plan.Pace(wall_s=60.0, turns=10.0)], 1, 430)
    assert any("reductions that keep the design" in line and "dropping budget=30" in line for line in lines), lines
    assert any(line.startswith("plan: costliest runs: ") for line in lines)


def test_a_rate_measured_on_a_busy_machine_is_stored_as_a_quiet_ones_and_priced_for_the_load_to_come():
    """Issue 35.3: rates stored while a test suite shared two cores (load 4-5) priced the main command at 36 min on
    a quiet machine, where it took 6.4. Seconds are stored divided by the contention they ran under, and priced at the
    contention the sweep will run under (the other work its thread plan measured, plus its own server threads)."""
    from searchbox.model.threads import ThreadPlan
    from searchbox.sweep.plan import Load, expected_load

    assert Load(1.5, 2).contention == 1.0 and Load(5.0, 2).contention == 2.5 and Load(0.0, 1).contention == 1.0
    for _ in range(3):  # 60 s runs of 10 turns at load 5 on 2 cores: 24 s on a quiet machine
        record_run({"model": "m", "turns": 10, "elapsed_s": 60.0, "axes": {"tools": "high"}}, None, Load(5.0, 2))
    rate = load_rate("m", "high")
    assert rate.s_per_turn == pytest.approx(2.4) and rate.measured_contention == 2.5
    quiet = expected_load(ThreadPlan(2, 1, 1, 2, 1, 1, "", load=0.0))  # nothing else running, -t 2 on 2 cores
    assert quiet.contention == 1.0 and rate.priced_at(quiet.contention).s_per_turn == pytest.approx(2.4)
    busy = expected_load(ThreadPlan(2, 1, 1, 1, 1, 1, "", load=3.0))  # a suite's 3 cores of work, -t 1
    priced = rate.priced_at(busy.contention)
    assert busy.contention == 2.0 and priced.s_per_turn == pytest.approx(4.8) and priced.priced_at(1.0).s_per_turn == pytest.approx(2.4)
    line = sweep_plan.rate_line("m, tools=high", priced)
    assert "measured 2.5x oversubscribed" in line and "priced 2.0x oversubscribed as now" in line, line
    assert expected_load(ThreadPlan(4, 1, 1, None, 1, 1, "", load=1.0)).contention == 1.0  # an external server: not ours


def test_each_harness_has_its_own_rate():
    """A rate pooled over harnesses priced a native sweep at the mean of Claude Code's 1,468-token first prompts and
    the native loop's 500: the harness kind is in the key, and a record without one is the native loop's."""
    for _ in range(2):
        record_run({"model": "m", "turns": 5, "elapsed_s": 50.0, "axes": {"tools": "high"}, "config": {"harness": {"kind": "claude-code"}}})
        record_run({"model": "m", "turns": 5, "elapsed_s": 10.0, "axes": {"tools": "high"}, "config": {"harness": {"kind": "native"}}})
    record_run({"model": "m", "turns": 5, "elapsed_s": 10.0, "axes": {"tools": "low"}})
    assert load_rate("m", "high").s_per_turn == 2.0 and load_rate("m", "high", "claude-code").s_per_turn == 10.0
    assert load_rate("m", "low").runs == 1 and load_rate("m", "low", "claude-code").s_per_turn == 10.0  # its own, over tiers
    assert load_rate("m", "high", "codex") is None
