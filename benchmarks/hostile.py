"""Hostile battery: every attack in tests/hostile_attempts.py, tried once, reported as attempted/held.

    python benchmarks/hostile.py [--out results/benchmarks] [-k SUBSTRING [--stem NAME]]

Writes hostile.json (one row per attempt: group, what it tries, held | breached | unavailable, what
held or what got through, seconds) and hostile.md. The same attempts run as tests in
tests/test_hostile.py, so CI keeps them held; this script is the one-page record.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchbox.corpus.dataroom import make_writable  # noqa: E402
from tests.hostile_attempts import ATTEMPTS, Attempt, Breach, Unavailable  # noqa: E402


def try_one(attempt: Attempt) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"hostile-{attempt.name}-"))
    start = time.monotonic()
    try:
        outcome, note = "held", attempt.run(tmp)
    except Unavailable as exc:
        outcome, note = "unavailable", str(exc)
    except Breach as exc:
        outcome, note = "breached", str(exc)
    except Exception as exc:  # noqa: BLE001 - a crash of the attempt is a finding too
        outcome, note = "breached", f"crashed: {type(exc).__name__}: {exc}"
    finally:
        make_writable(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return {"name": attempt.name, "group": attempt.group, "what": attempt.what, "outcome": outcome,
            "note": note[:500], "seconds": round(time.monotonic() - start, 2), "spine": attempt.lead}


def machine() -> dict:
    bwrap = shutil.which("bwrap")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip() if bwrap else None
    return {"platform": platform.platform(), "python": platform.python_version(), "bwrap": version,
            "harness_uid": os.geteuid(), "cpus": os.cpu_count(),
            "load_note": os.environ.get("SEARCHBOX_BENCH_LOAD", "")}  # what else ran meanwhile, as the runner says


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def markdown(result: dict) -> str:
    lines = [f"# Hostile battery: {result['held']}/{result['attempted']} held",
             "",
             f"{result['breached']} breached, {result['unavailable']} unavailable on this machine "
             f"({result['machine']['platform']}, {result['machine']['bwrap']}, harness uid {result['machine']['harness_uid']}); "
             f"{result['seconds']:.0f} s in all; load average (1, 5, 15 min) {result['machine']['load_before']} before, "
             f"{result['machine']['load_after']} after (only held or not is measured: times are what this load gave). "
             + (f"{result['machine']['load_note']}. " if result["machine"].get("load_note") else "") +
             "This machine is shared with other agents' work. Each attempt is also a test (tests/test_hostile.py).",
             "",
             "| group | attempt | what it tries | outcome | what held / what got through | s |",
             "|---|---|---|---|---|---|"]
    for row in result["attempts"]:
        note = row["note"].replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {row['group']} | {row['name']} | {row['what']} | {row['outcome']} | {note} | {row['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks")
    parser.add_argument("-k", default="", help="only attempts whose name contains this")
    parser.add_argument("--stem", default="", help="with -k: write the slice as NAME.json/NAME.md (e.g. --out results/benchmarks/hostile --stem rundirs)")
    args = parser.parse_args()
    chosen = [a for a in ATTEMPTS if args.k in a.name]
    start, load_before = time.monotonic(), load()
    rows = []
    for attempt in chosen:
        row = try_one(attempt)
        rows.append(row)
        print(f"[{row['outcome']:>11}] {row['group']:<11} {row['name']:<26} {row['seconds']:6.1f}s  {row['note'][:110]}", flush=True)
    count = {k: sum(r["outcome"] == k for r in rows) for k in ("held", "breached", "unavailable")}
    result = {"attempted": len(rows), **count, "seconds": round(time.monotonic() - start, 1), "machine": {**machine(), "load_before": load_before, "load_after": load()},
              "attempts": rows}
    print(f"\nattempted {result['attempted']}, held {count['held']}, breached {count['breached']}, unavailable {count['unavailable']}")
    if not args.k or args.stem:
        stem = args.stem or "hostile"
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / f"{stem}.md").write_text(markdown(result))
        print(f"-> {args.out / (stem + '.json')}, {args.out / (stem + '.md')}")
    return 0 if count["breached"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
