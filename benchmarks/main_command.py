"""The design card's main command, timed whole: `python -m searchbox.sweep -m tools=high,low,none budget=1,10,30`.

    python benchmarks/main_command.py [--limits 1 3] [--variants current old_threads unbounded_schema before]
                                      [--tools high,low,none] [--budgets 1,10,30] [--out results/benchmarks]
                                      [--name main_command]

Each case is the real command (embedded llama-server with SmolLM2, the packaged corpus and questions) with
`questions.limit=N`, launched into a fresh sweep folder, under one variant of the code:

    current           the code as committed
    compact_just_under  a compaction stops just under harness.compact_at, as before issue 35 (harness.compact_to=null)
    old_threads       the old thread plan: one core always kept free on a whole machine (SEARCHBOX_OTHER_LOAD=1)
    loops_unstopped   the calls and the answer bounded, no looping reply stopped (schema version 3: SEARCHBOX_JSON_BOUNDS=answer)
    unbounded_answer  the calls' bounds without the final answer's (schema version 2: SEARCHBOX_JSON_BOUNDS=calls)
    unbounded_schema  the JSON protocol's grammar without string or array bounds (SEARCHBOX_JSON_BOUNDS=off)
    before            both: the main command as it was before issue 24

Variants run interleaved (limit by limit), so drift in the machine's load hits each alike. Reported per case:
the whole command's wall time; runs, turns, LLM calls, completion tokens (per turn too), malformed replies (and
their rate per call) and calls cut at max_tokens; each run's time split into prefill and decode (llama.cpp's
timings of every call), the rest of the LLM call (HTTP, grammar, sampling), tools, and the harness's own time
(the run's elapsed time less LLM and tools); the time outside the runs (server start, grading, collecting); the
thread plan and the load it measured; the plan the sweep printed; the largest jump between consecutive ETAs;
and a hash of the system prompts the model was sent (the same in every variant: only the grammar changes).
Writes main_command.json (a list `cases`) and main_command.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {
    "current": {},
    "old_threads": {"SEARCHBOX_OTHER_LOAD": "1"},
    "loops_unstopped": {"SEARCHBOX_JSON_BOUNDS": "answer"},
    "unbounded_answer": {"SEARCHBOX_JSON_BOUNDS": "calls"},
    "unbounded_schema": {"SEARCHBOX_JSON_BOUNDS": "off"},
    "before": {"SEARCHBOX_OTHER_LOAD": "1", "SEARCHBOX_JSON_BOUNDS": "off"},
    "compact_just_under": {},
}
# Variants that are a config override rather than an environment (added to the command line).
OVERRIDES = {"compact_just_under": ("harness.compact_to=null",)}
CLEAN_ENV = ("LLAMA_URL", "SEARCHBOX_ENDPOINTS", "SEARCHBOX_THREAD_PLAN", "SEARCHBOX_OTHER_LOAD", "SEARCHBOX_JSON_BOUNDS")
TARGETS = {"wall_s_limit1": 4 * 60,  # issue 35 (it was 8 min under issue 24, 25 min before that)
           "harness_share": 0.05}


def _seconds(text: str) -> float:
    units = {"d": 86400, "h": 3600, "min": 60, "s": 1}
    return float(sum(int(n) * units[u] for n, u in re.findall(r"(\d+) (d|h|min|s)\b", text)))


def run_split(run_dir: Path) -> dict:
    """One run's time split and call outcomes, from its trace (llama.cpp timings per call) and run_meta."""
    meta = json.loads((run_dir / "run_meta.json").read_text())
    prefill = decode = 0.0
    length_cut = calls = answer_cut = loop_cut = prefilled = 0
    cut_chars: list[int] = []
    refills: list[int] = []  # prompt tokens the call after each compaction prefilled (the cache it broke)
    compacted = False
    system = ""
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        row = json.loads(line)
        msg = row.get("message") or {}
        if msg.get("role") == "system" and not system:
            system = msg.get("content") or ""
        if msg.get("role") == "assistant" and msg.get("truncated"):
            answer_cut += 1  # an answer the grammar closed at its bound (schema version 3), cut at max_tokens, or stopped looping
            cut_chars.append(len(msg.get("content") or ""))
        if row.get("type") == "compaction":
            compacted = True
        usage = row.get("usage")
        if not usage:
            continue
        calls += 1
        timings = usage.get("timings") or {}
        prefill += float(timings.get("prompt_ms") or 0) / 1000
        prefilled += int(timings.get("prompt_n") or 0)  # prompt tokens the server computed (not from its cache)
        if compacted:
            refills.append(int(timings.get("prompt_n") or 0))
            compacted = False
        decode += float(timings.get("predicted_ms") or 0) / 1000
        length_cut += usage.get("finish_reason") == "length"
        loop_cut += usage.get("finish_reason") == "loop"  # a reply stopped at its third repeat (schema version 4)
    llm, tools, elapsed = float(meta.get("llm_s") or 0), float(meta.get("tool_s") or 0), float(meta.get("elapsed_s") or 0)
    return {"run_id": meta.get("run_id"), "question_id": meta.get("question_id"), "tools": (meta.get("axes") or {}).get("tools"),
            "budget": meta.get("budget"), "turns": meta.get("turns"), "stop_reason": meta.get("stop_reason"), "elapsed_s": round(elapsed, 2),
            "prefill_s": round(prefill, 2), "decode_s": round(decode, 2), "llm_other_s": round(max(0.0, llm - prefill - decode), 2),
            "tools_s": round(tools, 2), "harness_s": round(max(0.0, elapsed - llm - tools), 2), "llm_calls": calls,
            "completion_tokens": (meta.get("tokens") or {}).get("completion", 0), "prompt_tokens": (meta.get("tokens") or {}).get("prompt", 0),
            "prefilled_tokens": prefilled, "compactions": meta.get("compactions", 0), "refills_after_compaction": refills,
            "malformed": meta.get("malformed_replies", 0), "length_cut": length_cut, "answer_cut": answer_cut, "loop_cut": loop_cut,
            "shortest_cut_answer": min(cut_chars) if cut_chars else None, "tool_calls": meta.get("tool_calls", 0),
            "system_sha": hashlib.sha256(system.encode()).hexdigest()[:12]}


def longest_gold() -> int:
    """The longest gold answer (or alias) of the packaged and tiny question sets, in characters: what a cut answer must
    still have room for."""
    longest = 0
    for name in ("questions.jsonl", "jina-questions.jsonl"):
        for line in (ROOT / "searchbox" / "builtin" / name).read_text().splitlines():
            if line.strip():
                q = json.loads(line)
                longest = max([longest, len(q["answer"]), *(len(a) for a in q.get("aliases") or [])])
    return longest


def command(name: str, limit: int, tools: str, budgets: str, root: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The main command with questions.limit, into a sweep folder of its own under root."""
    return [sys.executable, "-m", "searchbox.sweep", "-m", f"tools={tools}", f"budget={budgets}", f"questions.limit={limit}",
            "harness.today=2026-01-01", f"sweep.root={root}", f"sweep.name={name}", *extra]


def launch(name: str, cmd: list[str], env_vars: dict, timeout_s: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run a sweep command with a clean environment plus env_vars; (the finished process, its wall seconds), or exit
    naming the sweep that failed."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update(env_vars)
    t = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"searchbox: the {name} sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc, wall


def case(variant: str, limit: int, tools: str, budgets: str, root: Path, timeout_s: float) -> dict:
    name = f"{variant}-q{limit}"
    cmd = command(name, limit, tools, budgets, root, OVERRIDES.get(variant, ()))
    load_before = round(os.getloadavg()[0], 2)
    proc, wall = launch(name, cmd, VARIANTS[variant], timeout_s)
    sweep = root / name
    runs = [run_split(d) for d in sorted((sweep / "runs").iterdir()) if (d / "DONE").exists()]
    total = lambda key: sum(r[key] for r in runs)  # noqa: E731
    turns, calls, elapsed = total("turns"), total("llm_calls"), total("elapsed_s")
    etas = [_seconds(m) for m in re.findall(r"ETA ([^|]+)\|", proc.stderr)]
    jumps = [max(a, b) / max(1.0, min(a, b)) for a, b in zip(etas[:-2], etas[1:-1]) if a and b]
    threads_file = sweep / "threads.json"
    split = {k: round(total(k), 2) for k in ("prefill_s", "decode_s", "llm_other_s", "tools_s", "harness_s")}
    return {
        "variant": variant, "questions_limit": limit, "command": " ".join(cmd[2:]), "env": VARIANTS[variant],
        "overrides": list(OVERRIDES.get(variant, ())),
        "wall_s": round(wall, 2), "runs": len(runs), "turns": turns, "llm_calls": calls,
        "completion_tokens": total("completion_tokens"), "prompt_tokens": total("prompt_tokens"),
        "prefilled_tokens": total("prefilled_tokens"), "compactions": total("compactions"),
        "completion_tokens_per_turn": round(total("completion_tokens") / turns, 1) if turns else None,
        "malformed": total("malformed"), "malformed_rate": round(total("malformed") / calls, 3) if calls else None,
        "length_cut": total("length_cut"), "answer_cut": total("answer_cut"), "loop_cut": total("loop_cut"),
        "shortest_cut_answer": min((r["shortest_cut_answer"] for r in runs if r["shortest_cut_answer"] is not None), default=None),
        "tool_calls": total("tool_calls"),
        "run_time_s": round(elapsed, 2), "split_s": split, "outside_runs_s": round(wall - elapsed, 2),
        "harness_share": round(split["harness_s"] / elapsed, 4) if elapsed else None,
        "by_budget": {str(b): {"runs": len(rs), "mean_elapsed_s": round(sum(r["elapsed_s"] for r in rs) / len(rs), 1)}
                      for b in sorted({r["budget"] for r in runs}) if (rs := [r for r in runs if r["budget"] == b])},
        "by_tools": {t: {"runs": len(rs), "mean_elapsed_s": round(sum(r["elapsed_s"] for r in rs) / len(rs), 1)}
                     for t in sorted({r["tools"] for r in runs}) if (rs := [r for r in runs if r["tools"] == t])},
        "thread_plan": sorted(set(re.findall(r"threads: ([^\n]+)", proc.stderr))),
        "plan_load": json.loads(threads_file.read_text()).get("load") if threads_file.exists() else None,
        "plan": [line[8:] for line in proc.stderr.splitlines() if line.startswith("[sweep] plan") or line.startswith("[sweep]   ")],
        "eta_max_jump": round(max(jumps), 2) if jumps else None, "load_before": load_before,
        "system_prompts": sorted({r["system_sha"] for r in runs}), "per_run": runs,
    }


def write_md(result: dict, path: Path) -> None:
    lines = ["# The main command, timed whole", "",
             f"{result['when']} on {result['machine']['cores']} cores ({result['machine']['platform']}), 1-minute load average "
             f"before {result['machine']['load_before']}. The command: `python -m searchbox.sweep -m tools={result['tools']} "
             f"budget={result['budgets']} questions.limit=N` on the embedded default (SmolLM2-135M on llama-server, the packaged "
             "corpus and questions), each case in a fresh sweep folder. Times in seconds; split = the runs' own time.", "",
             "| N | variant | wall | runs | turns | calls | completion tok | tok/turn | malformed (rate) | cut at max_tokens | answers cut | "
             "loops stopped | shortest cut answer (chars) | compactions | prefilled tok | prefill | decode | LLM other | tools | harness | outside runs | harness share | threads (load measured) | ETA max jump |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in result["cases"]:
        s = c["split_s"]
        plan = "; ".join(re.sub(r"^.*?llama-server", "llama-server", p).split(", torch")[0] for p in c["thread_plan"]) or "-"
        lines.append(f"| {c['questions_limit']} | {c['variant']} | {c['wall_s']} | {c['runs']} | {c['turns']} | {c['llm_calls']} | "
                     f"{c['completion_tokens']} | {c['completion_tokens_per_turn']} | {c['malformed']} ({c['malformed_rate']}) | "
                     f"{c['length_cut']} | {c.get('answer_cut', 0)} | {c.get('loop_cut', 0)} | {c.get('shortest_cut_answer')} | {c.get('compactions', '-')} | {c.get('prefilled_tokens', '-')} | {s['prefill_s']} | {s['decode_s']} | {s['llm_other_s']} | {s['tools_s']} | {s['harness_s']} | "
                     f"{c['outside_runs_s']} | {c['harness_share']} | {plan} ({c['plan_load']}) | {c['eta_max_jump']} |")
    lines += ["", "Mean seconds per run, by budget and by tool tier:", ""]
    for c in result["cases"]:
        lines.append(f"- N={c['questions_limit']} {c['variant']}: budget " +
                     ", ".join(f"{b}: {v['mean_elapsed_s']}" for b, v in c["by_budget"].items()) + "; tools " +
                     ", ".join(f"{t}: {v['mean_elapsed_s']}" for t, v in c["by_tools"].items()))
    lines += ["", "Compactions, and the prompt tokens the next call prefilled again (the cache each one broke), by run:", ""]
    for c in result["cases"]:
        hit = [f"tools={r['tools']} budget={r['budget']}: {r['refills_after_compaction']}" for r in c["per_run"] if r.get("compactions")]
        lines.append(f"- N={c['questions_limit']} {c['variant']}: " + ("; ".join(hit) if hit else "none"))
    prompts = {p for c in result["cases"] for p in c["system_prompts"]}
    lines += ["", f"System prompts sent, over every case: {len(prompts)} distinct ({', '.join(sorted(prompts))}); the variants "
              "differ only in the grammar, the threads, whether a looping reply is stopped and how far a compaction goes.", "",
              f"Answers cut (by the bound, max_tokens or a loop's stop) are never shorter than the shortest figure in the table; "
              f"the longest gold of the packaged and tiny question sets is {longest_gold()} characters.", "", "The plan the first case printed:", "", "```"]
    lines += result["cases"][0]["plan"] if result["cases"] else []
    lines += ["```", "", f"Targets on a quiet 2-core machine: N=1 under {TARGETS['wall_s_limit1'] // 60} minutes (8 under issue 24, 25 before), harness under 5% of run time.",
              "", result["verdict"], ""]
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limits", type=int, nargs="+", default=[1, 3], help="questions.limit of each case")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--tools", default="high,low,none")
    parser.add_argument("--budgets", default="1,10,30")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds one case may take")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    parser.add_argument("--name", default="main_command", help="the result files' stem: NAME.json and NAME.md")
    args = parser.parse_args()
    from searchbox.model.llama import find_model, find_server
    from searchbox.model.threads import available_cores

    if find_server() is None or find_model() is None:
        print("searchbox: the embedded default is not installed: run `python -m searchbox setup`", file=sys.stderr)
        return 2
    load_before = [round(x, 2) for x in os.getloadavg()]
    cases = []
    with tempfile.TemporaryDirectory(prefix="sb-main-command-") as tmp:
        for limit in args.limits:
            for variant in args.variants:
                c = case(variant, limit, args.tools, args.budgets, Path(tmp), args.timeout)
                cases.append(c)
                print(f"[main_command] N={limit} {variant}: {c['runs']} runs, {c['turns']} turns in {c['wall_s']} s "
                      f"({c['completion_tokens_per_turn']} completion tokens/turn, {c['malformed']} malformed)", file=sys.stderr, flush=True)
    current = [c for c in cases if c["variant"] == "current" and c["questions_limit"] == 1]
    checks = []
    if current and args.tools == "high,low,none" and args.budgets == "1,10,30":
        c = current[0]
        checks.append(f"N=1 in {c['wall_s'] / 60:.1f} min ({'under' if c['wall_s'] < TARGETS['wall_s_limit1'] else 'over'} the {TARGETS['wall_s_limit1'] // 60}-minute target)")
    shares = [c["harness_share"] for c in cases if c["variant"] == "current" and c["harness_share"] is not None]
    if shares:
        checks.append(f"harness share {max(shares):.1%} at most ({'under' if max(shares) < TARGETS['harness_share'] else 'over'} 5%)")
    result = {"when": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "tools": args.tools, "budgets": args.budgets,
              "machine": {"cores": available_cores(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()]},
              "verdict": "; ".join(checks) + "." if checks else "", "cases": cases}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2))
    write_md(result, args.out / f"{args.name}.md")
    print((args.out / f"{args.name}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
