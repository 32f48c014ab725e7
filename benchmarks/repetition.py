"""Repeats within a reply (issue 35.2): do llama-server's sampler options end SmolLM2's loops, and what else do they change?

    python benchmarks/repetition.py [--limit 1] [--tools high,low,none] [--budgets 1,10,30] [--variants none repeat dry]
                                    [--out results/benchmarks]

Each variant is the design card's main command (embedded llama-server with SmolLM2, the packaged corpus and
questions, `questions.limit=N`) with one `model.sampler` setting, run back to back in fresh sweep folders, with the
thread plan fixed (SEARCHBOX_OTHER_LOAD=0: every variant's server gets the same threads, so tokens differ only
by the sampler):

    none     no sampler option (what the committed code sends)
    repeat   repeat_penalty 1.1 over the last 64 tokens (llama.cpp's classic penalty)
    dry      DRY: dry_multiplier 0.8, dry_base 1.75, dry_allowed_length 2 (the values its authors suggest)

Per variant: wall time, completion tokens, calls cut at max_tokens, *looping replies* (an assistant reply in which
some run of LOOP_WORDS words occurs LOOP_TIMES times or more: a phrase repeated until the cut), correct per run,
and, against `none`, how many runs' *first reply* differs. The first request of a run is the same in every variant
(same system prompt, question and tools), so a changed first reply is the sampler changing an output, looping or
not. The criterion to adopt a sampler (issue 35.2): fewer looping replies and fewer wasted tokens, with no first
reply changed that did not loop, and no control's result changed (controls send no request: unchanged by
construction, checked here from their keys). Writes repetition.json (a list `cases`) and repetition.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.main_command import command, launch, run_split  # noqa: E402

VARIANTS = {
    "none": [],
    "repeat": ["+model.sampler.repeat_penalty=1.1", "+model.sampler.repeat_last_n=64"],
    "dry": ["+model.sampler.dry_multiplier=0.8", "+model.sampler.dry_base=1.75", "+model.sampler.dry_allowed_length=2"],
}
LOOP_WORDS, LOOP_TIMES = 4, 4


def looping(text: str) -> bool:
    """Some run of LOOP_WORDS words occurs LOOP_TIMES times or more in the text (a phrase repeated to the cut)."""
    words = text.split()
    grams = Counter(tuple(words[i:i + LOOP_WORDS]) for i in range(len(words) - LOOP_WORDS + 1))
    return bool(grams) and max(grams.values()) >= LOOP_TIMES


def replies(run_dir: Path) -> list[str]:
    """The run's assistant replies as sent back (content and tool-call arguments), in order."""
    out = []
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        msg = json.loads(line).get("message") or {}
        if msg.get("role") == "assistant":
            calls = " ".join(json.dumps((c.get("function") or {}).get("arguments", ""), sort_keys=True) for c in msg.get("tool_calls") or [])
            out.append(f"{msg.get('content') or ''} {calls}".strip())
    return out


def case(variant: str, limit: int, tools: str, budgets: str, root: Path, timeout_s: float, reuse: Optional[Path] = None) -> dict:
    """One variant's sweep, run now into root, or (reuse) a finished sweep folder of that variant read as it is."""
    name = f"{variant}-q{limit}"
    cmd = command(name, limit, tools, budgets, root, tuple(VARIANTS[variant]))
    load_before = [round(x, 2) for x in os.getloadavg()]
    wall = None
    if reuse is None:
        _, seconds = launch(name, cmd, {"SEARCHBOX_OTHER_LOAD": "0"}, timeout_s)
        wall = round(seconds, 2)
    sweep = reuse or root / name
    runs = []
    for d in sorted((sweep / "runs").iterdir()):
        if not (d / "DONE").exists():
            continue
        split = run_split(d)
        meta = json.loads((d / "run_meta.json").read_text())
        said = replies(d)
        split.update({"correct": (meta.get("grades") or {}).get("correct"), "replies": len(said),
                      "looping": sum(looping(r) for r in said), "first_reply": said[0] if said else ""})
        runs.append(split)
    return {"variant": variant, "sampler": VARIANTS[variant], "questions_limit": limit, "command": " ".join(cmd[2:]),
            "reused": str(reuse) if reuse else None, "wall_s": wall, "per_run": runs, "load_before": load_before,
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def totals(c: dict, keys: Optional[set] = None) -> dict:
    """A case's sums over its runs, or over the runs of `keys` ((question, tools, budget)) only: variants that ran
    different grids are compared on the runs they share."""
    runs = [r for r in c["per_run"] if keys is None or (r["question_id"], r["tools"], r["budget"]) in keys]
    total = lambda key: sum(r[key] or 0 for r in runs)  # noqa: E731
    return {"runs": len(runs), "turns": total("turns"), "llm_calls": total("llm_calls"),
            "replies": total("replies"), "looping_replies": total("looping"), "completion_tokens": total("completion_tokens"),
            "length_cut": total("length_cut"), "correct": total("correct"), "decode_s": round(total("decode_s"), 2),
            "elapsed_s": round(total("elapsed_s"), 2)}


def shared_keys(cases: list[dict]) -> set:
    """The (question, tools, budget) runs every case has."""
    sets = [{(r["question_id"], r["tools"], r["budget"]) for r in c["per_run"]} for c in cases]
    return set.intersection(*sets) if sets else set()


def compare(cases: list[dict]) -> None:
    """Each case's sums over the runs all cases share, and its first replies against `none`'s, run by run."""
    keys = shared_keys(cases)
    for c in cases:
        c["shared"] = totals(c, keys)
    base = next((c for c in cases if c["variant"] == "none"), None)
    if base is None:
        return
    first = {(r["question_id"], r["tools"], r["budget"]): r["first_reply"] for r in base["per_run"]}
    for c in cases:
        changed = [k for r in c["per_run"] if (k := (r["question_id"], r["tools"], r["budget"])) in keys and first[k] != r["first_reply"]]
        c["first_replies_changed"] = len(changed)
        c["first_replies_changed_not_looping"] = sum(not looping(first[k]) for k in changed)


def write_md(result: dict, path: Path) -> None:
    lines = ["# Repeats within a reply: llama-server's sampler options on the main command (issue 35.2)", "",
             f"{result['date']} on {result['machine']}. {result['load']}", "",
             f"The command: the design card's main command with `questions.limit={result['limit']}` (SmolLM2-135M on the embedded "
             "llama-server, the packaged corpus and questions), one `model.sampler` setting per variant, the thread plan fixed. "
             f"A looping reply holds some run of {LOOP_WORDS} words {LOOP_TIMES} times or more. Sums over the runs every variant "
             f"has ({result['shared_runs']}: {result['shared_grid']}).", "",
             "| variant | sampler | runs | turns | calls | completion tok | cut at max_tokens | looping replies | correct | "
             "first replies changed (of which not looping before) | decode s | run s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in result["cases"]:
        t = c["shared"]
        lines.append(f"| {c['variant']} | {' '.join(c['sampler']) or '-'} | {t['runs']} | {t['turns']} | {t['llm_calls']} | "
                     f"{t['completion_tokens']} | {t['length_cut']} | {t['looping_replies']} of {t['replies']} | {t['correct']} | "
                     f"{c.get('first_replies_changed', '-')} ({c.get('first_replies_changed_not_looping', '-')}) | {t['decode_s']} | {t['elapsed_s']} |")
    lines += ["", result["verdict"], ""] + [f"- {c['variant']}: `{c['command']}`" + (f" (this sweep was run earlier: {c['reused']})" if c["reused"] else "")
                                           for c in result["cases"]] + [""]
    path.write_text("\n".join(lines))


def verdict(cases: list[dict]) -> str:
    base = next(c for c in cases if c["variant"] == "none")["shared"]
    out = []
    for c in cases:
        if c["variant"] == "none":
            continue
        t = c["shared"]
        fewer = t["looping_replies"] < base["looping_replies"] and t["completion_tokens"] < base["completion_tokens"]
        clean = c.get("first_replies_changed_not_looping", 1) == 0
        out.append(f"- {c['variant']}: looping replies {base['looping_replies']} -> {t['looping_replies']}, completion tokens "
                   f"{base['completion_tokens']} -> {t['completion_tokens']}, cut at max_tokens {base['length_cut']} -> {t['length_cut']}, "
                   f"correct {base['correct']} -> {t['correct']}; {c.get('first_replies_changed_not_looping', '?')} first reply(ies) "
                   "changed that did not loop: " + ("meets the criterion" if fewer and clean else "does not meet the criterion (adopt only "
                                                    "with fewer loops and tokens and no non-looping output changed)"))
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=1)
    parser.add_argument("--tools", default="high,low,none")
    parser.add_argument("--budgets", default="1,10,30")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--load", default="", help="what else ran on the machine (stated in the result)")
    parser.add_argument("--reuse", action="append", default=[], metavar="VARIANT=FOLDER",
                        help="read a variant's finished sweep folder instead of running it (its own grid, say so in --load)")
    args = parser.parse_args()
    reuse = dict(r.split("=", 1) for r in args.reuse)
    cases = []
    with tempfile.TemporaryDirectory(prefix="sb-repetition-") as tmp:
        for variant in args.variants:
            c = case(variant, args.limit, args.tools, args.budgets, Path(tmp), args.timeout, Path(reuse[variant]) if variant in reuse else None)
            cases.append(c)
            t = totals(c)
            print(f"[repetition] {variant}: {t['runs']} runs, {t['completion_tokens']} completion tokens, "
                  f"{t['looping_replies']} looping of {t['replies']} replies, {c['wall_s']} s", file=sys.stderr)
    compare(cases)
    result = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": f"{os.cpu_count()} cores ({platform.platform()})", "limit": args.limit,
              "load": args.load or "Load: not stated.", "cases": cases}
    keys = sorted(shared_keys(cases), key=str)
    result["shared_runs"] = len(keys)
    result["shared_grid"] = ", ".join(f"{q} tools={t} budget={b}" for q, t, b in keys)
    result["verdict"] = verdict(cases) if any(c["variant"] == "none" for c in cases) else ""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "repetition.json").write_text(json.dumps(result, indent=1))
    write_md(result, args.out / "repetition.md")
    print(result["verdict"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
