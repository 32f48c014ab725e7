"""Determinism of the embedded default: the same run, replayed in other orders, on other slots, beside another run
(model.parallel=2) and with another llama-server thread count, gives the same trajectory?

    python benchmarks/determinism.py [--questions 3] [--budget 2] [--tools high] [--out results/benchmarks]

The first questions of the packaged set (jq001...) are run with the real llama-server and SmolLM2 through
searchbox.run.runner.execute, the way a sweep runs them (each run pinned to the slot the pool gives it, that slot erased
first). Every run of a question is compared with the question's reference (its first run in `serial`, on a fresh
server); a trajectory is what the model said, what the tools answered and the tokens billed, without ids or clocks
(searchbox.record.trajectory).

    serial      one server, 1 slot, the thread plan's -t: q1..qn, then in reverse, then each again at once
                (its prompt still cached in the slot before the erase)
    parallel2   model.parallel=2 laid out as a sweep lays it out here (sweep.embedded_plan: on a small CPU box two
                single-slot servers), two runs in flight: the questions in order, then rotated, so a question
                meets other neighbours on other slots
    shared2     the same on one server with 2 slots (a sweep's layout where the plan gives each slot 2+ threads,
                and on a GPU): runs in flight share its batches
    threads     one server, 1 slot, another -t than the plan's: the second question

and, unless --no-before, the same checks on a server started as before this fix (flash attention as llama.cpp
sets it, its host-RAM prompt cache on, no slot actions, so nothing is erased): before_serial (q1, q1 again at
once, q2, q1) and before_threads (q1 with the other -t), each compared with before_serial's first q1. They
show what the benchmark catches; the headline counts the current setup only.

Runs have no wall-clock ceilings here (a turn cut by its deadline differs for reasons of time, not numbers).
Reports per phase and overall how many runs match their reference, where the first mismatch parts (step, fields),
and the load on the machine before and after (other work competes for the cores; it should not change a result,
only the time). Writes determinism.json and determinism.md. Target on one build and machine: every run identical.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def questions(n: int) -> list:
    from searchbox.grading import load_questions
    from searchbox.questions.build import builtin_questions

    return load_questions(builtin_questions(), n)


def config(tools: str, budget: int, parallel: int):
    from searchbox.config import RunConfig

    cfg = RunConfig(tools=tools)
    cfg.harness.today = "2026-11-29"
    cfg.harness.budget = budget
    cfg.model.parallel = parallel
    # No wall-clock ceilings: on a loaded machine a turn cut by its deadline is another trajectory, which says
    # nothing about the numbers (a -t 2 server beside other work took 24 minutes over one run).
    cfg.harness.turn_ceiling_s = cfg.harness.run_ceiling_s = None
    return cfg.validate()


def run_one(cfg, q, url: str, slot, out: Path) -> dict:
    from searchbox.corpus.dataroom import packaged_corpus
    from searchbox.record.record import Gold
    from searchbox.run.runner import RunInfo, execute
    from searchbox.record.trajectory import trajectory

    info = RunInfo(question_id=q.id, gold=Gold(q.answer, list(q.aliases), list(q.gold_files), q.type), slot=slot)
    t = time.monotonic()
    meta = execute(cfg, q.question, packaged_corpus(), out, url, info=info)
    return {"question": q.id, "slot": meta["served"]["slot"], "slot_start": meta["served"]["slot_start"], "stop": meta["stop_reason"],
            "llm_calls": meta["llm_calls"], "completion_tokens": meta["tokens"]["completion"], "wall_s": round(time.monotonic() - t, 1),
            "trajectory": trajectory(out), "run_dir": str(out)}


def before_server(server):
    """The server as started before this fix: without --slot-save-path (slot erase answers 501), and with
    llama.cpp's own flash attention and host-RAM prompt cache."""
    plain = server.command

    def command() -> list[str]:
        cmd, out, skip = plain(), [], 0
        for n, arg in enumerate(cmd):
            if skip:
                skip -= 1
            elif arg in ("-fa", "--cache-ram", "--slot-save-path") and n > 0:
                skip = 1
            else:
                out.append(arg)
        return out

    server.command = command
    return server


def servers_for(cfg, threads: int | None, layout: str, before: bool) -> list:
    """Started embedded servers: one of cfg.model.parallel slots (`shared`), or as a sweep's job lays them out here."""
    from searchbox.model.llama import LlamaServer
    from searchbox.sweep.job import embedded_plan, start_embedded, uses_embedder
    from searchbox.model.threads import available_cores

    if layout == "sweep":
        return start_embedded(cfg.model, embedded_plan(cfg.model, available_cores(), uses_embedder(cfg.retrieval.embedder, cfg.tools), 1, None))
    server = LlamaServer.from_config(cfg.model, threads=threads)
    return [(before_server(server) if before else server).start()]


def phase(name: str, cfg, order: list, work: Path, threads: int | None, in_flight: int = 1, before: bool = False,
          layout: str = "shared") -> tuple[list[dict], dict]:
    """Run `order` on fresh embedded servers; runs in flight take slots from a pool, as a sweep's do."""
    from searchbox.model.llama import stop_servers
    from searchbox.model.pool import open_pool

    runs: list[dict] = []
    lock = threading.Lock()
    servers = servers_for(cfg, threads, layout, before)
    try:
        pool, _ = open_pool([s.url for s in servers], cfg, cfg.model.parallel, log=lambda m: None)
        queue = list(enumerate(order))

        def worker() -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    n, q = queue.pop(0)
                lease = pool.acquire()
                try:
                    got = run_one(cfg, q, lease.url, lease.slot, work / f"{name}-{n:02d}-{q.id}")
                finally:
                    pool.release(lease)
                with lock:
                    runs.append({"phase": name, "regime": "before" if before else "current", "n": n,
                                 "server": [s.url for s in servers].index(lease.url), **got})

        pool_threads = [threading.Thread(target=worker) for _ in range(in_flight)]
        for t in pool_threads:
            t.start()
        for t in pool_threads:
            t.join()
        command = servers[0].command()
    finally:
        stop_servers(servers)
    flag = lambda f: command[command.index(f) + 1] if f in command else None  # noqa: E731
    setup = {"servers": len(servers), "threads": flag("-t"), "threads_batch": flag("-tb"), "slots": flag("-np"),
             "flash_attn": flag("-fa") or "llama.cpp's default", "cache_ram": flag("--cache-ram") or "llama.cpp's default",
             "slot_actions": "--slot-save-path" in command, "in_flight": in_flight, "regime": "before" if before else "current"}
    return sorted(runs, key=lambda r: r["n"]), setup


def main() -> None:
    from searchbox.model.llama import find_model, find_server, server_version
    from searchbox.model.threads import available_cores
    from searchbox.record.trajectory import first_difference

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--tools", default="high")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    ap.add_argument("--no-before", action="store_true", help="skip the phases on a server started as before this fix")
    ap.add_argument("--markdown-only", action="store_true", help="rewrite determinism.md from determinism.json in --out")
    args = ap.parse_args()
    if args.markdown_only:
        (args.out / "determinism.md").write_text(markdown(json.loads((args.out / "determinism.json").read_text())))
        return
    if find_server() is None or find_model() is None:
        raise SystemExit("searchbox: the embedded default is not installed: run `python -m searchbox setup`")
    qs = questions(args.questions)
    cfg1, cfg2 = config(args.tools, args.budget, 1), config(args.tools, args.budget, 2)
    from searchbox.model.llama import LlamaServer

    planned = LlamaServer.from_config(cfg1.model).threads or 1
    other = 1 if planned > 1 else 2
    load_before = [round(x, 2) for x in os.getloadavg()]
    started = time.monotonic()
    runs: list[dict] = []
    setups: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="searchbox-determinism-") as tmp:
        work = Path(tmp)
        plan = [
            ("serial", cfg1, qs + qs[::-1] + [q for q in qs for _ in range(2)], None, 1),
            ("parallel2", cfg2, qs + qs[1:] + qs[:1], None, 2, False, "sweep"),
            ("shared2", cfg2, qs + qs[1:] + qs[:1], None, 2),
            ("threads", cfg1, qs[1:2], other, 1),
        ]
        if not args.no_before:
            plan += [("before_serial", cfg1, [qs[0], qs[0], qs[-1], qs[0]], None, 1, True), ("before_threads", cfg1, [qs[0]], other, 1, True)]
        for name, cfg, order, threads, in_flight, *rest in plan:
            got, setups[name] = phase(name, cfg, order, work, threads, in_flight, *rest)
            runs += got
            print(f"[determinism] {name}: {len(got)} runs ({setups[name]})", file=sys.stderr, flush=True)
    load_after = [round(x, 2) for x in os.getloadavg()]
    reference = {}
    for r in runs:  # a question's first run in its regime's first phase: on a fresh server, or after other questions
        reference.setdefault((r["regime"], r["question"]), r)
    for r in runs:
        ref = reference[(r["regime"], r["question"])]
        r["reference"] = f"{ref['phase']}#{ref['n']}"
        r["differs"] = first_difference(ref["trajectory"], r["trajectory"])
        r["identical"] = r["differs"] is None
    phases = {}
    for name in setups:
        mine = [r for r in runs if r["phase"] == name]
        phases[name] = {"runs": len(mine), "identical": sum(r["identical"] for r in mine), "setup": setups[name]}
    current = [r for r in runs if r["regime"] == "current"]
    total, same = len(current), sum(r["identical"] for r in current)
    before = [r for r in runs if r["regime"] == "before"]
    result = {
        "benchmark": "determinism", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cores": available_cores(), "cpu_count": os.cpu_count(),
                    "load_before": load_before, "load_after": load_after},
        "llama_server": server_version(find_server()), "model": str(find_model().name),
        "case": {"questions": [q.id for q in qs], "budget": args.budget, "tools": args.tools, "protocol": "auto", "temperature": 0.0,
                 "seed": 0, "harness.today": "2026-11-29", "ceilings": None},
        "wall_s": round(time.monotonic() - started, 1),
        "summary": {"runs": total, "identical": same, "all_identical": same == total,
                    "before_runs": len(before), "before_identical": sum(r["identical"] for r in before)},
        "phases": phases,
        "runs": [{k: v for k, v in r.items() if k not in ("trajectory", "run_dir")} for r in runs],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "determinism.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "determinism.md").write_text(markdown(result))
    print(f"[determinism] {same}/{total} runs identical to their reference; wrote {args.out / 'determinism.md'}", file=sys.stderr)


def single_slot_line(r: dict) -> str:
    """The current setup split by layout: runs on single-slot servers, and runs sharing a server's batches."""
    parts = {"single": [0, 0], "shared": [0, 0]}
    for name, p in r["phases"].items():
        if p["setup"]["regime"] == "current":
            kind = "single" if p["setup"]["slots"] == "1" else "shared"
            parts[kind][0] += p["identical"]
            parts[kind][1] += p["runs"]
    (a, n), (b, m) = parts["single"], parts["shared"]
    line = f"On single-slot servers (one run per server process, the layout a sweep gives model.parallel=2 here): {a}/{n} identical."
    if m:
        line += (f" Two runs in flight on one 2-slot server, sharing its batches: {b}/{m}; a run diverges there when its "
                 "neighbour's work is batched with it, so for reproducible numbers keep one slot per server "
                 "(model.servers=N model.parallel=1).")
    return line


def markdown(r: dict) -> str:
    m, c = r["machine"], r["case"]
    lines = [
        "# Determinism of the embedded default",
        "",
        f"{r['date']}: {r['llama_server']}, {r['model']}; {m['cores']} cores, load average {m['load_before'][0]} before and "
        f"{m['load_after'][0]} after (1 min; other work on the machine competes for the cores: it may change the time, "
        f"it should not change a result).",
        f"Case: questions {', '.join(c['questions'])}, tools={c['tools']}, budget={c['budget']} turns, temperature 0, seed 0, "
        f"protocol auto (json for SmolLM2). Wall time {r['wall_s']:.0f} s.",
        "",
        f"**{r['summary']['identical']}/{r['summary']['runs']} runs gave the same trajectory as their reference** "
        "(the question's first run, on a fresh server)."
        + (f" On a server started as before this fix: {r['summary']['before_identical']}/{r['summary']['before_runs']}."
           if r["summary"].get("before_runs") else ""),
        "",
        single_slot_line(r),
        "",
        "| phase | servers | runs in flight | runs | identical |",
        "|---|---|---|---|---|",
    ]
    for name, p in r["phases"].items():
        s = p["setup"]
        lines.append(f"| {name} | {s['servers']} x (-t {s['threads']} -tb {s['threads_batch']}, {s['slots']} slot(s), -fa {s['flash_attn']}, "
                     f"--cache-ram {s['cache_ram']}, slot actions {'on' if s['slot_actions'] else 'off'}) | {s['in_flight']} | "
                     f"{p['runs']} | {p['identical']} |")
    lines += ["", "| phase | # | question | server, slot | slot start | stop | LLM calls | completion tokens | s | same as reference |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for x in r["runs"]:
        same = "yes" if x["identical"] else f"no: {x['differs']}"
        lines.append(f"| {x['phase']} | {x['n']} | {x['question']} | {x['server']}, {x['slot']} | {x['slot_start']} | {x['stop']} | {x['llm_calls']} | "
                     f"{x['completion_tokens']} | {x['wall_s']} | {same} |")
    lines += ["", "Regenerate: `python benchmarks/determinism.py` (a quiet machine gives the same verdict faster); "
              "`python benchmarks/determinism.py --markdown-only` rewrites this file from determinism.json."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
