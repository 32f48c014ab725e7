"""Self-speculative decoding on the embedded default: faster, but does it change what SmolLM2 says?

    python benchmarks/speculative.py [--questions 16] [--tools none,high] [--budget 3] [--main-command]
                                     [--variants ngram-simple ngram-simple-n6] [--out results/benchmarks]

llama-server can draft tokens from n-grams of the context itself (`--spec-type ngram-simple`: no draft model) and
verify them in one batch; at temperature 0 a drafted token is kept only when it is the step's argmax. SmolLM2's
replies repeat themselves (one bash call three times a turn, an answer's sentence over and over), so most drafts
are kept. The question for a research tool is whether the trajectories stay what they were: the verifying batch is
computed by other kernels than one token at a time, and on this CPU build those round differently (a cached prefix
and a fresh prefill already give other logits, which is why each run erases its slot: llm.ChatClient.start_clean).

Each variant is a real Hydra sweep (`model.server_args=[--spec-type,...]`, which the run key holds) beside the same
sweep without it, run after it in a fresh sweep folder; every run is compared with its twin by trajectory (what the
model said, what the tools answered, the tokens billed: searchbox.record.trajectory), and by what it said alone
(the same messages, the billed tokens aside). `--main-command` adds the design card's command with
questions.limit=1 (tools high, low, none x budget 1, 10, 30) as a second grid. Writes speculative.json and
speculative.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {
    "ngram-simple": ["--spec-type", "ngram-simple"],  # llama.cpp's defaults: look up 12 tokens, draft up to 48
    "ngram-simple-n6": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "6"],
}
CLEAN_ENV = ("LLAMA_URL", "SEARCHBOX_ENDPOINTS", "SEARCHBOX_THREAD_PLAN", "SEARCHBOX_OTHER_LOAD", "SEARCHBOX_JSON_BOUNDS")


def sweep(root: Path, name: str, grid: list[str], server_args: list[str]) -> tuple[Path, float]:
    """One real sweep into root/name; (its folder, its wall seconds)."""
    cmd = [sys.executable, "-m", "searchbox.sweep", "-m", *grid, "harness.today=2026-01-01", f"sweep.root={root}", f"sweep.name={name}"]
    if server_args:
        cmd.append(f"model.server_args=[{','.join(server_args)}]")
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"searchbox: the {name} sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return root / name, round(time.monotonic() - start, 2)


def runs_of(sweep_dir: Path) -> dict[tuple, Path]:
    out = {}
    for d in sorted((sweep_dir / "runs").iterdir()):
        if (d / "DONE").exists():
            meta = json.loads((d / "run_meta.json").read_text())
            out[(meta.get("question_id"), (meta.get("axes") or {}).get("tools"), meta.get("budget"))] = d
    return out


def said(steps: list[dict]) -> list[dict]:
    return [{k: v for k, v in s.items() if k != "usage"} for s in steps]


def decode_s(run_dir: Path) -> float:
    total = 0.0
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        usage = json.loads(line).get("usage") or {}
        total += float((usage.get("timings") or {}).get("predicted_ms") or 0) / 1000
    return total


def compare(base: Path, other: Path) -> dict:
    from searchbox.record.trajectory import first_difference, trajectory

    a, b = runs_of(base), runs_of(other)
    rows = []
    for key in sorted(a, key=str):
        if key not in b:
            continue
        ta, tb = trajectory(a[key]), trajectory(b[key])
        rows.append({"run": list(key), "identical": ta == tb, "same_said": said(ta) == said(tb),
                     "first_difference": first_difference(ta, tb), "decode_s": [round(decode_s(a[key]), 2), round(decode_s(b[key]), 2)],
                     "completion_tokens": [sum((s.get("usage") or {}).get("completion") or 0 for s in t) for t in (ta, tb)]})
    return {"runs": len(rows), "identical": sum(r["identical"] for r in rows), "same_said": sum(r["same_said"] for r in rows),
            "decode_s": [round(sum(r["decode_s"][i] for r in rows), 1) for i in (0, 1)], "per_run": rows}


def markdown(result: dict) -> str:
    lines = ["# Self-speculative decoding on the embedded default", "",
             f"{result['when']} on {result['machine']['cores']} cores ({result['machine']['platform']}), 1-minute load average "
             f"before {result['machine']['load_before']}, after {result['machine']['load_after']}. SmolLM2-135M on llama-server, "
             "each grid as a real sweep without speculation and then with it (`model.server_args`, in the run key), every run "
             "compared with its twin. *Identical*: the same trajectory (messages, tool results, tokens billed); *same said*: "
             "the same messages and tool results, the billed tokens aside.", "",
             "| grid | variant | runs | identical | same said | wall without / with (s) | decode without / with (s) |",
             "|---|---|---|---|---|---|---|"]
    for g in result["grids"]:
        for v in g["variants"]:
            c = v["compare"]
            lines.append(f"| {g['name']} | {v['name']} (`{' '.join(v['server_args'])}`) | {c['runs']} | {c['identical']} | "
                         f"{c['same_said']} | {g['base_wall_s']} / {v['wall_s']} | {c['decode_s'][0]} / {c['decode_s'][1]} |")
    lines += ["", "Runs that differ, and where their trajectories part:", ""]
    for g in result["grids"]:
        for v in g["variants"]:
            for r in v["compare"]["per_run"]:
                if not r["identical"]:
                    lines.append(f"- {g['name']}, {v['name']}: {' '.join(map(str, r['run']))}: {r['first_difference']}"
                                 f"{'' if r['same_said'] else ' (what the model said differs)'}; completion tokens {r['completion_tokens'][0]} / "
                                 f"{r['completion_tokens'][1]}")
    lines += ["", result["verdict"], ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--tools", default="none,high")
    parser.add_argument("--budget", default="3")
    parser.add_argument("--main-command", action="store_true", help="also the design card's command with questions.limit=1")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    args = parser.parse_args()
    from searchbox.model.llama import find_model, find_server
    from searchbox.model.threads import available_cores

    if find_server() is None or find_model() is None:
        print("searchbox: the embedded default is not installed: run `python -m searchbox setup`", file=sys.stderr)
        return 2
    grids = [(f"{args.questions} questions x tools {args.tools} x budget {args.budget}",
              [f"tools={args.tools}", f"budget={args.budget}", f"questions.limit={args.questions}"])]
    if args.main_command:
        grids.append(("the main command, questions.limit=1", ["tools=high,low,none", "budget=1,10,30", "questions.limit=1"]))
    load_before = [round(x, 2) for x in os.getloadavg()]
    out_grids = []
    with tempfile.TemporaryDirectory(prefix="sb-speculative-") as tmp:
        root = Path(tmp)
        for n, (name, grid) in enumerate(grids):
            base, base_wall = sweep(root, f"g{n}-base", grid, [])
            variants = []
            for v in args.variants:
                other, wall = sweep(root, f"g{n}-{v}", grid, VARIANTS[v])
                c = compare(base, other)
                variants.append({"name": v, "server_args": VARIANTS[v], "wall_s": wall, "compare": c})
                print(f"[speculative] {name}, {v}: {c['identical']}/{c['runs']} identical in {wall} s (without: {base_wall} s)",
                      file=sys.stderr, flush=True)
            out_grids.append({"name": name, "grid": grid, "base_wall_s": base_wall, "variants": variants})
    runs = sum(v["compare"]["runs"] for g in out_grids for v in g["variants"])
    same = sum(v["compare"]["identical"] for g in out_grids for v in g["variants"])
    verdict = (f"{same} of {runs} runs identical with speculation. " +
               ("Every trajectory stayed as it was." if same == runs else
                "Speculation changes trajectories (the verifying batches round otherwise), so the embedded server does not "
                "use it: a run's numbers would depend on a speed-up flag. `model.server_args` can still turn it on; the key "
                "keeps such runs apart."))
    result = {"when": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "grids": out_grids, "verdict": verdict,
              "machine": {"cores": available_cores(), "platform": platform.platform(), "load_before": load_before,
                          "load_after": [round(x, 2) for x in os.getloadavg()]}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speculative.json").write_text(json.dumps(result, indent=2))
    (args.out / "speculative.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
