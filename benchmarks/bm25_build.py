"""BM25 build memory and time, side by side (issue 37): bm25s.index over every chunk's text at once (the build before
build_bm25) against build_bm25 streaming the same texts, each in a child of its own (peak RSS by wait4), at each size.

    python benchmarks/bm25_build.py --chunks 250000 1000000     # results/benchmarks/bm25_build.{json,md}

Texts are generated like benchmarks/scale.py's index corpus (slices of about 1,270 characters of the packaged Wikipedia
distractors, one chunk's worth each, with a serial number), held as an iterator in the streaming child and as a list
in the other: a build that had them in a list already (the old _texts_of) held them too. Both children check that
they rank the same 20 queries alike (the streamed one's scores are compared bit for bit in tests/retrieval)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks"
QUERIES = ["lighthouse keeper", "population census 1990", "river basin", "world war", "SB0000123", "university founded",
           "album released", "species genus family", "mountain elevation metres", "treaty signed", "football club",
           "railway station", "novel author", "temple dynasty", "island volcano", "election president", "painting museum",
           "language spoken", "bridge constructed", "festival annual"]


def texts(n: int, blob: str):
    for i in range(n):
        start = (i * 1777) % max(1, len(blob) - 1300)
        yield f"serial code SB{i:07d} " + blob[start:start + 1270]


def child(variant: str, n: int, distractors: str) -> None:
    sys.path.insert(0, str(ROOT))
    from searchbox.retrieval import lexical

    with zipfile.ZipFile(distractors) as zf:
        blob = "\n".join(zf.read(name).decode("utf-8", "replace") for name in sorted(zf.namelist()))
    t = time.monotonic()
    if variant == "bm25s-index":
        bm = lexical.BM25Index(list(texts(n, blob)))
    else:
        bm = lexical.build_bm25(texts(n, blob))
    seconds = time.monotonic() - t
    tops = [[r for r, _ in bm.top(q, 10)] for q in QUERIES]
    print(json.dumps({"seconds": round(seconds, 1), "docs": bm.n, "tops": tops}))


def run(variant: str, n: int, distractors: str) -> dict:
    proc = subprocess.Popen([sys.executable, __file__, "--child", variant, str(n), distractors], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{variant} at {n:,} failed: exit {os.waitstatus_to_exitcode(status)}")
    got = json.loads(out.strip().splitlines()[-1])
    return {"variant": variant, "chunks": n, "seconds": got["seconds"], "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "tops": got["tops"]}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[250000, 1000000])
    ap.add_argument("--load", default="", help="what else ran on the machine meanwhile (the result file says it)")
    args = ap.parse_args()
    home = os.environ.get("SEARCHBOX_HOME") or str(Path.home() / ".cache" / "searchbox")
    distractors = str(Path(home) / "distractors" / "wikipedia-vital-en.zip")
    before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    cases = []
    for n in args.chunks:
        pair = [run(v, n, distractors) for v in ("bm25s-index", "build_bm25")]
        same = pair[0].pop("tops") == pair[1].pop("tops")
        for case in pair:
            case["same_top10"] = same
            cases.append(case)
            print(json.dumps(case), flush=True)
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    load = f"{args.load}; uptime before: {before}; after: {after}".lstrip("; ")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bm25_build.json").write_text(json.dumps({"load": load, "cases": cases}, indent=1) + "\n")
    rows = [f"| {c['chunks']:,} | {c['variant']} | {c['seconds']} | {c['peak_rss_mb']:,} | {c['same_top10']} |" for c in cases]
    (OUT / "bm25_build.md").write_text(
        "# BM25 build: all texts at once against streamed (issue 37)\n\n"
        "Made by `python benchmarks/bm25_build.py`. Each variant builds BM25 over the same generated chunk texts in a child\n"
        "of its own; peak RSS is that child's ru_maxrss (wait4), texts and Python included.\n\n"
        f"Load: {load}\n\n| chunks | variant | build s | peak RSS MB | same top-10 on 20 queries |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
