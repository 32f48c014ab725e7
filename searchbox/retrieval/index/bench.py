"""Measuring an index: open, search, join and snippet times, BM25, ANN recall against exact, and gold-file recall on questions."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ...errors import SearchboxError
from ..corpus import IndexCorpus, rank
from ..lexical import top_k
from .store import Index


def ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 3) if values else float("nan")


def file_recall(found: list[str], gold: list[str]) -> float:
    """The fraction of a question's gold files among the files found."""
    return len(set(gold) & set(found)) / len(set(gold)) if gold else float("nan")


def file_hit(found: list[str], gold: list[str]) -> float:
    """1 when any gold file was found (the old 'recall')."""
    return float(bool(set(gold) & set(found))) if gold else float("nan")


def gold_metrics(found_per_q: list[list[str]], gold_per_q: list[list[str]], ks=(1, 5, 10)) -> dict:
    """{recall@k, hit@k} averaged over questions with gold files."""
    out = {}
    pairs = [(f, g) for f, g in zip(found_per_q, gold_per_q) if g]
    for k in ks:
        out[f"recall@{k}"] = round(float(np.mean([file_recall(f[:k], g) for f, g in pairs])), 4) if pairs else None
        out[f"hit@{k}"] = round(float(np.mean([file_hit(f[:k], g) for f, g in pairs])), 4) if pairs else None
    return out


def load_questions(path: Path) -> list[dict]:
    try:
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise SearchboxError(f"questions {path}: {exc}") from exc
    if not rows or not all(isinstance(r, dict) and r.get("question") for r in rows):
        raise SearchboxError(f"questions {path}: expected JSON lines with a 'question' (and 'gold_files')")
    return rows


def bench(folder: Path, questions: Optional[Path] = None, k: int = 10, n_queries: int = 100, device: str = "cpu",
          ann_max_rows: int = 200_000, seed: int = 0, embed: Optional[Callable[[list[str]], np.ndarray]] = None,
          breakdown: bool = False) -> dict:
    from .encoders import encoder_for

    folder = Path(folder)
    opens = []
    for _ in range(5):
        t = time.perf_counter()
        idx = Index.open(folder)
        opens.append(time.perf_counter() - t)
        if len(opens) < 5:
            idx.close()
    out: dict = {"index": str(folder), "rows": idx.rows, "live_rows": idx.live_rows, "dim": idx.dim, "segments": len(idx.segments),
                 "files": len(idx.files), "model": idx.state["embedder"].get("model"), "k": k,
                 "open_ms": {"first": round(opens[0] * 1000, 3), "p50": ms(opens, 50)}}
    loads = _manifest_loads(folder) if breakdown else []
    if not idx.live_rows:
        return out
    qs = load_questions(questions) if questions else []
    rng = np.random.default_rng(seed)
    if qs:
        encoder = None
        if embed is None:
            encoder = encoder_for(idx.state["embedder"]["config"], device=device)
            embed = lambda texts: encoder.encode(texts, "query")  # noqa: E731
        t = time.perf_counter()
        qvecs = np.asarray(embed([q["question"] for q in qs]), dtype=np.float32)
        out["query_embed_ms_per_query"] = round((time.perf_counter() - t) * 1000 / len(qs), 3)
        out["queries"] = f"{len(qs)} questions from {questions}"
    else:
        live = np.flatnonzero(idx.live) if idx.live is not None else np.arange(idx.rows)
        picks = rng.choice(live, size=min(n_queries, len(live)), replace=False)
        qvecs = idx.vectors(np.sort(picks))
        out["queries"] = f"{len(qvecs)} stored vectors of random live rows (self-queries; no model needed)"

    # Exact search split into its parts: scoring + selection, the join to (path, offset), the snippet text.
    search_t, join_t, snip_t, exact = [], [], [], []
    for q in qvecs:
        t = time.perf_counter()
        cand, scores = idx.dense_scores(q)
        kk = min(k, len(scores))
        part = np.argpartition(-scores, kk - 1)[:kk] if kk < len(scores) else np.arange(len(scores))
        part = part[np.argsort(-scores[part], kind="stable")]
        rows = cand[part]
        t1 = time.perf_counter()
        joined = [(idx.path_chunk(int(r)), idx.locate(int(r))) for r in rows]
        refs = [(seg.manifest[local]["offset"], seg.manifest[local]["text_start"], seg.manifest[local]["text_end"], seg) for (_, (seg, local)) in joined]
        t2 = time.perf_counter()
        _ = [" ".join(seg.text(int(a), int(b)).split())[:240] for _, a, b, seg in refs]
        t3 = time.perf_counter()
        search_t.append(t1 - t)
        join_t.append(t2 - t1)
        snip_t.append(t3 - t2)
        exact.append([int(r) for r in rows])
    out["exact_ms"] = {"search_p50": ms(search_t, 50), "search_p95": ms(search_t, 95), "join_p50": ms(join_t, 50),
                       "snippet_p50": ms(snip_t, 50)}
    if breakdown:
        stages = {"manifest_load": loads, "search": search_t, "join": join_t, "snippet": snip_t}
        out["breakdown_ms"] = {name: {"p50": ms(v, 50), "p95": ms(v, 95), "mean": round(float(np.mean(v)) * 1000, 3)}
                               for name, v in stages.items()}
        out["breakdown_ms"]["note"] = ("manifest_load: open the index and load its files table, every segment's manifest and path "
                                       f"table (once per process; {len(loads)} fresh opens); search, join, snippet: per query "
                                       f"(top-{k} exact, over {len(search_t)} queries)")

    # ANN against exact: the index's own graph, or a temporary one when the index has none.
    out["ann"] = _ann_recall(idx, qvecs, exact, k, ann_max_rows)

    if qs:
        bm = []
        for q in qs:
            t = time.perf_counter()
            idx.bm25_top(q["question"], k)
            bm.append(time.perf_counter() - t)
        out["bm25_ms"] = {"p50": ms(bm, 50), "p95": ms(bm, 95)}
        gold = [q.get("gold_files") or [] for q in qs]
        corpus = IndexCorpus(idx)
        by_q = {q["question"]: v for q, v in zip(qs, qvecs)}
        out["gold"] = {}
        for retriever in ("dense", "bm25", "hybrid"):
            found, lat = [], []
            for q in qs:
                t = time.perf_counter()
                ranked = rank(corpus, q["question"], k, retriever, lambda text: by_q[text])
                paths = list(dict.fromkeys(idx.path_chunk(r)[0] for r, _ in ranked))
                lat.append(time.perf_counter() - t)
                found.append(paths)
            out["gold"][retriever] = {**gold_metrics(found, gold, tuple(x for x in (1, 5, 10) if x <= k)),
                                      "p50_ms": ms(lat, 50), "p95_ms": ms(lat, 95)}
        out["gold_note"] = "recall@k: mean fraction of a question's gold files among the top-k chunks' files; hit@k: any gold file (latency excludes query embedding)"
    else:
        bm = []
        texts = [idx.chunk(int(r[0])).text[:200] for r in exact[:20]]
        for text in texts:
            t = time.perf_counter()
            idx.bm25_top(text, k)
            bm.append(time.perf_counter() - t)
        out["bm25_ms"] = {"p50": ms(bm, 50), "p95": ms(bm, 95), "queries": "first 200 characters of a chunk"}
    idx.close()
    return out


def _manifest_loads(folder: Path, repeats: int = 5) -> list[float]:
    """Seconds to open the index and read what a search's join needs: the files table, each segment's manifest and paths."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        idx = Index.open(folder)
        _ = idx.files
        for seg in idx.segments:
            _ = int(seg.manifest["offset"].sum()) if seg.rows else 0  # touch every record (the mmap pages in)
            _ = seg.paths
        times.append(time.perf_counter() - t)
        idx.close()
    return times


def _ann_recall(idx: Index, qvecs: np.ndarray, exact: list[list[int]], k: int, ann_max_rows: int) -> dict:
    from . import ann as ann_mod

    if idx.has_ann:
        search = lambda q: [r for r, _ in idx.ann_top(q, k)]  # noqa: E731
        info = {"graph": "the index's own", **{p: idx.state["ann"][p] for p in ("dtype", "connectivity", "expansion_add", "expansion_search")}}
    elif idx.live_rows <= ann_max_rows:
        params = ann_mod.AnnParams()
        live = np.flatnonzero(idx.live) if idx.live is not None else np.arange(idx.rows)
        t = time.perf_counter()
        graph = ann_mod.build([(live, idx.vectors(live))], idx.dim, params)
        info = {"graph": "temporary (the index has none)", "build_s": round(time.perf_counter() - t, 3), **params.__dict__}

        def search(q):
            found = graph.search(q, min(k, len(live)))
            return top_k(found.keys.astype(np.int64), 1.0 - found.distances, k, idx.path_chunk)

        search_rows = search
        search = lambda q: [r for r, _ in search_rows(q)]  # noqa: E731
    else:
        return {"skipped": f"{idx.live_rows} rows > --ann-max-rows {ann_max_rows} and the index has no graph"}
    lat, rec = [], []
    for q, truth in zip(qvecs, exact):
        t = time.perf_counter()
        got = search(q)
        lat.append(time.perf_counter() - t)
        rec.append(len(set(got) & set(truth)) / max(len(truth), 1))
    return {**info, f"recall@{k}_vs_exact": round(float(np.mean(rec)), 4), "p50_ms": ms(lat, 50), "p95_ms": ms(lat, 95)}


def markdown(result: dict) -> str:
    lines = [f"# Index bench: {result['index']}", "",
             f"{result['live_rows']} live chunks ({result['rows']} rows, {result['segments']} segment(s)) of {result['files']} files, "
             f"dim {result['dim']}, model {result['model']}; queries: {result.get('queries', 'none')}", "",
             "| measure | value |", "|---|---|",
             f"| open (first / p50) | {result['open_ms']['first']} / {result['open_ms']['p50']} ms |"]
    if "exact_ms" in result:
        e = result["exact_ms"]
        lines += [f"| exact top-{result['k']} search p50 / p95 | {e['search_p50']} / {e['search_p95']} ms |",
                  f"| join (row -> path, offset) p50 | {e['join_p50']} ms |", f"| snippet p50 | {e['snippet_p50']} ms |",
                  f"| BM25 p50 / p95 | {result['bm25_ms']['p50']} / {result['bm25_ms']['p95']} ms |"]
        a = result["ann"]
        if "skipped" in a:
            lines.append(f"| ANN | skipped: {a['skipped']} |")
        else:
            rk = next(v for key, v in a.items() if key.startswith("recall@"))
            lines.append(f"| ANN ({a['graph']}) recall@{result['k']} vs exact / p50 | {rk} / {a['p50_ms']} ms |")
    if result.get("breakdown_ms"):
        lines += ["", "| stage | p50 ms | p95 ms | mean ms |", "|---|---|---|---|"]
        for name in ("manifest_load", "search", "join", "snippet"):
            b = result["breakdown_ms"][name]
            lines.append(f"| {name.replace('_', ' ')} | {b['p50']} | {b['p95']} | {b['mean']} |")
        lines += ["", result["breakdown_ms"]["note"]]
    if result.get("gold"):
        ks = [key.split("@")[1] for key in next(iter(result["gold"].values())) if key.startswith("recall@")]
        lines += ["", "| retriever | " + " | ".join(f"recall@{x} | hit@{x}" for x in ks) + " | p50 ms | p95 ms |",
                  "|---|" + "---|---|" * len(ks) + "---|---|"]
        for name, g in result["gold"].items():
            lines.append(f"| {name} | " + " | ".join(f"{g[f'recall@{x}']} | {g[f'hit@{x}']}" for x in ks) + f" | {g['p50_ms']} | {g['p95_ms']} |")
        lines += ["", result["gold_note"]]
    return "\n".join(lines)
