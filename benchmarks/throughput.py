"""Sweep throughput on the embedded default: 1 slot vs 2 slots vs Ray with 2 workers, side by side in one run.

    python benchmarks/throughput.py [--reps 3] [--questions 2] [--out results/benchmarks]

The same fixed sweep (seed=0,1 x N built-in questions, tools=high: dense retrieval offered in-process,
budget=1) is launched as a real `python -m searchbox.sweep -m` on the real llama-server with SmolLM2,
once per configuration per repetition, repetitions interleaved (the order rotates) so drift in the
machine's load hits every configuration alike. Each launch writes into a fresh sweep folder.

    serial   model.parallel=1, basic launcher: one run at a time
    slots2   model.parallel=2, basic launcher: two runs in flight in one job (threads from the plan)
    ray2     model.parallel=2, hydra/launcher=ray with 2 CPUs: the two grid points as two Ray workers
    quiet_new, quiet_old, loaded_new, loaded_old
             one run at a time on a quiet machine and beside a busy process pinned to one core, under the
             thread plan that follows the measured load (new) and the one that always kept a core free (old,
             SEARCHBOX_OTHER_LOAD=1). Just these four: --only quiet_new quiet_old loaded_new loaded_old
             --out-name throughput_load

Reported per configuration (median over repetitions): runs per hour and turns per second over the run
phase (first run started to last run finished, from the run records), the same over the whole command
(server and Ray start-up included), completion tokens per second, and the thread plan the sweep printed.
Writes throughput.json and throughput.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {
    "serial": ["model.parallel=1"],
    "slots2": ["model.parallel=2"],
    "ray2": ["model.parallel=2", "hydra/launcher=ray", "hydra.launcher.ray.init.address=local", "+hydra.launcher.ray.init.num_cpus=2"],
    # Without the thread budget: llama-server as wide as the machine (its own default here), as before the plan.
    "serial_t2": ["model.parallel=1", "model.server_args=[-t,2,-tb,2]"],
    "slots2_t2": ["model.parallel=2", "model.server_args=[-t,2,-tb,2]"],
    # Quiet vs loaded, old plan vs new, one run in flight. The old plan kept one core free on a whole machine
    # whatever ran there (SEARCHBOX_OTHER_LOAD=1 reproduces it); the new one leaves only the cores other work is
    # measured to use. "loaded": a busy process pinned to one core runs for the whole launch.
    "quiet_new": ["model.parallel=1"],
    "quiet_old": ["model.parallel=1"],
    "loaded_new": ["model.parallel=1"],
    "loaded_old": ["model.parallel=1"],
}
ENV = {"quiet_old": {"SEARCHBOX_OTHER_LOAD": "1"}, "loaded_old": {"SEARCHBOX_OTHER_LOAD": "1"}}
BUSY = ("loaded_new", "loaded_old")
LOAD_SETS = ("quiet_new", "quiet_old", "loaded_new", "loaded_old")
BUDGETED = ("serial", "slots2", "ray2")
DESCRIBE = {
    "serial": "1 slot, one run at a time",
    "slots2": "model.parallel=2: 2 runs in flight in one job (slots laid out by the thread plan)",
    "ray2": "model.parallel=2, hydra/launcher=ray: 2 workers x 1 run",
    "serial_t2": "1 slot, llama-server -t 2 (no thread budget)",
    "slots2_t2": "2 slots, llama-server -t 2 (no thread budget)",
    "quiet_new": "1 slot, nothing else running, new plan (cores from the measured load)",
    "quiet_old": "1 slot, nothing else running, old plan (one core always kept free)",
    "loaded_new": "1 slot, a busy process on one core, new plan",
    "loaded_old": "1 slot, a busy process on one core, old plan",
}


def busy_core() -> subprocess.Popen:
    """Other work on the machine: one process spinning on one core (pinned there when taskset is present)."""
    spin = [sys.executable, "-c", "while True: pass"]
    core = str(min(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "0"
    cmd = ["taskset", "-c", core, *spin] if shutil.which("taskset") else spin
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def launch(name: str, extra: list[str], questions: int, root: Path, budget: int) -> dict:
    cmd = [sys.executable, "-m", "searchbox.sweep", "-m", "seed=0,1", "tools=high", f"budget={budget}", f"questions.limit={questions}",
           "harness.today=2026-01-01", f"sweep.root={root}", f"sweep.name={name}", *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_URL", "SEARCHBOX_ENDPOINTS", "SEARCHBOX_THREAD_PLAN", "SEARCHBOX_OTHER_LOAD")}
    env.update(ENV.get(name, {}))
    busy = busy_core() if name in BUSY else None
    try:
        if busy:
            time.sleep(1.0)  # running before the sweep measures the load, as other work would be
        load = round(os.getloadavg()[0], 1)  # other work on the machine matters: llama.cpp pools stall when it competes
        t = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - t
    finally:
        if busy:
            busy.kill()
            busy.wait()
    if proc.returncode != 0:
        raise SystemExit(f"searchbox: the {name} sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    import pandas as pd

    runs = pd.read_parquet(root / name / "runs.parquet")
    start = min(dt.datetime.fromisoformat(s) for s in runs["started_at"])
    end = max(dt.datetime.fromisoformat(s) for s in runs["finished_at"])
    phase = (end - start).total_seconds()
    plans = sorted(set(re.findall(r"threads: ([^\n]+)", proc.stderr)))
    calls = pd.read_parquet(root / name / "tool_calls.parquet")
    tools = calls["tool"].value_counts().to_dict() if len(calls) else {}
    return {"load_before": load, "runs": int(len(runs)), "turns": int(runs["turns"].sum()), "llm_calls": int(runs["llm_calls"].sum()),
            "completion_tokens": int(runs["tokens_completion"].sum()), "run_phase_s": round(phase, 2), "wall_s": round(wall, 2),
            "plan_load": _plan_load(root / name),
            "stop_reasons": runs["stop_reason"].value_counts().to_dict(), "thread_plans": plans, "tool_calls": tools,
            "decode_tokens_per_s_server": round(float(runs["server_decode_tokens_per_s"].median()), 2)
            if "server_decode_tokens_per_s" in runs else None}


def _plan_load(sweep: Path):
    """The other work the sweep's thread plan measured (threads.json beside sweep.json)."""
    try:
        return json.loads((sweep / "threads.json").read_text()).get("load")
    except (OSError, ValueError):
        return None


def summarise(samples: list[dict]) -> dict:
    med = lambda key: statistics.median(s[key] for s in samples)  # noqa: E731
    phase, wall = med("run_phase_s"), med("wall_s")
    runs, turns, toks = samples[0]["runs"], med("turns"), med("completion_tokens")
    return {"reps": len(samples), "runs": runs, "turns_median": turns, "run_phase_s_median": phase, "wall_s_median": wall,
            "runs_per_hour": round(runs / phase * 3600, 1), "turns_per_s": round(turns / phase, 4),
            "completion_tokens_per_s": round(toks / phase, 2), "runs_per_hour_end_to_end": round(runs / wall * 3600, 1),
            "turns_per_s_end_to_end": round(turns / wall, 4),
            "run_phase_s_all": [s["run_phase_s"] for s in samples], "wall_s_all": [s["wall_s"] for s in samples],
            "load_before_all": [s.get("load_before") for s in samples], "plan_load_all": [s.get("plan_load") for s in samples],
            "decode_tokens_per_s_all": [s.get("decode_tokens_per_s_server") for s in samples],
            "thread_plans": sorted({p for s in samples for p in s["thread_plans"]}),
            "tool_calls": {t: sum(s["tool_calls"].get(t, 0) for s in samples) for t in sorted({t for s in samples for t in s["tool_calls"]})}}


def load_table(rows: dict) -> list[str]:
    """Quiet vs loaded, old plan vs new, side by side (when those configurations ran)."""
    if not any(n in rows for n in LOAD_SETS):
        return []
    lines = ["", "## Quiet vs loaded: the old plan (one core always kept free) vs the new (cores from the measured load)", "",
             "| machine | plan | run phase s (median) | decode tok/s (median) | load the plan measured | threads | new vs old |", "|---|---|---|---|---|---|---|"]
    for machine in ("quiet", "loaded"):
        old, new = rows.get(f"{machine}_old"), rows.get(f"{machine}_new")
        for plan, r in (("old", old), ("new", new)):
            if r is None:
                continue
            gain = (f"x{old['run_phase_s_median'] / new['run_phase_s_median']:.2f} faster" if plan == "new" and old and new else "")
            decode = [d for d in r.get("decode_tokens_per_s_all") or [] if d is not None]
            lines.append(f"| {machine} | {plan} | {r['run_phase_s_median']} | {statistics.median(decode) if decode else '-'} | "
                         f"{', '.join(str(x) for x in r.get('plan_load_all') or [])} | {'; '.join(r['thread_plans']) or '-'} | {gain} |")
    return lines


def write_md(result: dict, path: Path) -> None:
    rows = result["configs"]
    first = next(iter(rows.values()))
    lines = ["# Sweep throughput: 1 slot vs 2 slots vs Ray with 2 workers; quiet vs loaded under the old and new thread plans", "",
             f"{result['when']} on {result['machine']['cores']} cores ({result['machine']['platform']}), load average before "
             f"{result['machine']['load_before']}. The same sweep each time: seed=0,1 x {result['questions']} built-in questions "
             f"({first['runs']} runs), tools=high (search_dataroom offered, embedder in-process), budget={result['budget']}, "
             f"real llama-server with SmolLM2-135M; {result['reps']} repetitions interleaved; medians. Run phase: first run started "
             "to last run finished; whole command: server (and Ray) start-up included.", "",
             "| configuration | what | runs/hour (run phase) | turns/s | completion tok/s | runs/hour (whole command) | run phase s (each rep) | 1-min load before each rep |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {DESCRIBE[name]} | {r['runs_per_hour']} | {r['turns_per_s']} | {r['completion_tokens_per_s']} | "
                     f"{r['runs_per_hour_end_to_end']} | {', '.join(map(str, r['run_phase_s_all']))} | "
                     f"{', '.join(map(str, r.get('load_before_all') or []))} |")
    if result["speedup_vs_serial"]:  # only where serial ran beside them
        lines += ["", "Speed-up over serial (run phase): " + ", ".join(f"{k} x{v}" for k, v in result["speedup_vs_serial"].items())]
    lines += ["", "Thread plans the sweeps printed:", ""]
    for name, r in rows.items():
        for p in r["thread_plans"] or ["(none printed)"]:
            lines.append(f"- {name}: {p}")
    lines += ["", "Tool calls the model made (all repetitions): " + "; ".join(
        f"{name}: " + (", ".join(f"{t} {n}" for t, n in r["tool_calls"].items()) or "none") for name, r in rows.items()) + "."]
    if not any("search_dataroom" in r["tool_calls"] or "answer_question" in r["tool_calls"] for r in rows.values()):
        lines += ["", "The model never called the dense-retrieval tools it was offered, so the embedder did not run in these "
                  "sweeps: the numbers measure generation and the harness, not embedding contention."]
    lines += load_table(rows)
    lines += ["", result["verdict"], ""]
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2, help="built-in questions per grid point (2 grid points)")
    parser.add_argument("--budget", type=int, default=1, help="turns per run")
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS), help="a subset of the configurations")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="extra overrides for every configuration")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    parser.add_argument("--out-name", default="throughput", help="file stem of the .json and .md written")
    args = parser.parse_args()
    from searchbox.model.llama import find_model, find_server
    from searchbox.model.threads import available_cores

    if not any(o.startswith("model.server_bin=") for o in args.set) and (find_server() is None or find_model() is None):
        print("searchbox: the embedded default is not installed: run `python -m searchbox setup`", file=sys.stderr)
        return 2
    names = args.only or list(CONFIGS)
    samples: dict[str, list[dict]] = {n: [] for n in names}
    load_before = [round(x, 1) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="sb-throughput-") as tmp:
        for rep in range(args.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                root = Path(tmp) / f"rep{rep}"
                s = launch(name, [*CONFIGS[name], *args.set], args.questions, root, args.budget)
                samples[name].append(s)
                print(f"[throughput] rep {rep + 1}/{args.reps} {name}: {s['runs']} runs, {s['turns']} turns in {s['run_phase_s']} s "
                      f"(command {s['wall_s']} s)", file=sys.stderr, flush=True)
    configs = {n: summarise(samples[n]) for n in names}
    speedup = {n: round(configs["serial"]["run_phase_s_median"] / configs[n]["run_phase_s_median"], 2)
               for n in names if n != "serial" and "serial" in configs}
    slower = [n for n, v in speedup.items() if v < 1.0 and n in BUDGETED]
    verdict = (f"With the thread budget, parallel was slower than serial: {', '.join(slower)}." if slower else
               "With the thread budget, parallel was never slower than serial (run phase)." if speedup else "")
    result = {"when": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "reps": args.reps, "questions": args.questions, "budget": args.budget,
              "machine": {"cores": available_cores(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "load_before": load_before, "load_after": [round(x, 1) for x in os.getloadavg()]},
              "configs": configs, "speedup_vs_serial": speedup, "verdict": verdict, "samples": samples}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.out_name}.json").write_text(json.dumps(result, indent=2))
    write_md(result, args.out / f"{args.out_name}.md")
    print((args.out / f"{args.out_name}.md").read_text())
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
