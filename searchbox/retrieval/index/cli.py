"""`python -m searchbox.index build|refresh|compact|search|manifest|doctor|bench`: the persistent index from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from ...config import RetrievalConfig
from ...errors import SearchboxError, cli
from .console import Console

DEFAULTS = RetrievalConfig()


def snippet(text: str, chars: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"


def query_vector(path: Path, dim: int) -> "np.ndarray":
    """A raw little-endian float32 vector of the index's dimension from a file (ragbox's --query-file), L2-normalised."""
    import numpy as np

    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SearchboxError(f"--query-file {path}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) != 4 * dim:
        raise SearchboxError(f"--query-file {path}: {len(raw)} bytes, but a vector of this index is {dim} little-endian "
                             f"float32 values ({4 * dim} bytes)")
    vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    norm = float(np.linalg.norm(vec)) if np.isfinite(vec).all() else float("nan")
    if not np.isfinite(norm) or norm == 0.0:
        raise SearchboxError(f"--query-file {path}: the vector is all zeros or holds NaN/infinity")
    return vec / norm


def selection_of(args):
    from .selection import Selection

    return Selection.parse(args.extensions, args.skip_dirs, args.include_dot_dirs)


def cmd_build(args) -> int:
    from .ann import AnnParams
    from .build import AUTO, build
    from .encoders import encoder_for, record
    from .source import Chunking

    if args.chunk_overlap >= args.chunk_chars:
        raise SearchboxError("--chunk-overlap must be smaller than --chunk-chars")
    if args.dry_run:  # chunk and count; no model is loaded and nothing is written
        from .dryrun import dry_run

        print(json.dumps(dry_run(Path(args.source), Chunking(args.chunk_chars, args.chunk_overlap), selection_of(args))))
        return 0
    if args.embedder == "hash":
        config = {"embedder": "hash", "dim": args.hash_dim, "seed": "hash1"}
    else:
        config = {"embedder": args.embedder, "embed_model": args.model, "api_url": args.api_url, "api_key_env": DEFAULTS.api_key_env,
                  "query_prefix": args.query_prefix, "passage_prefix": args.passage_prefix}
    encoder = encoder_for(config, device=args.device, cache=not args.no_cache)
    report = build(Path(args.source), Path(args.index), encoder, Chunking(args.chunk_chars, args.chunk_overlap), record(config, encoder.identity),
                   ann={"ann": AnnParams(), "exact": None}.get(args.backend, AUTO), force=args.force, progress=Console(Path(args.source).name),
                   selection=selection_of(args))
    print(json.dumps(summary(report.as_dict(), args.list_files)))
    return 0


def summary(report: dict, list_files: bool = False) -> dict:
    """A build's or refresh's report as printed: counts of new, changed and deleted files (a 19K-file build printed
    every name on one 370 KB line); the names themselves only with --list-files."""
    out = {k: v for k, v in report.items() if not k.endswith("_files")}
    for k, v in report.items():
        if k.endswith("_files"):
            out[k.removesuffix("_files") + "_count"] = len(v)
            if list_files:
                out[k] = v
    return out


def cmd_refresh(args) -> int:
    from .build import refresh
    from .encoders import encoder_for
    from .store import read_state

    state = read_state(Path(args.index))
    encoder = encoder_for(state["embedder"]["config"], device=args.device, cache=not args.no_cache)
    report = refresh(Path(args.index), encoder, source=Path(args.source) if args.source else None,
                     compact=True if args.compact else (False if args.no_compact else None), progress=Console(Path(args.index).name))
    print(json.dumps(summary(report.as_dict(), args.list_files)))
    return 0


def cmd_compact(args) -> int:
    from .build import compact

    print(json.dumps(compact(Path(args.index)).as_dict()))
    return 0


def cmd_search(args) -> int:
    from ..corpus import IndexCorpus, rank
    from .encoders import encoder_for
    from .store import Index

    if args.query is not None and args.query_file is not None:
        raise SearchboxError("give QUERY or --query-file, not both")
    if args.query_file is None and (args.query is None or not args.query.strip()):
        raise SearchboxError("the query is empty")
    if args.query_file is not None and args.retriever != "dense":
        raise SearchboxError(f"--query-file is a vector: it searches with --retriever dense, not {args.retriever}")
    if args.snippet_chars < 1:
        raise SearchboxError("--snippet-len must be at least 1")
    idx = Index.open(Path(args.index))
    qvec = query_vector(Path(args.query_file), idx.dim) if args.query_file is not None else None
    if args.backend == "ann" and not idx.has_ann:
        raise SearchboxError(f"index {args.index} has no ANN graph (build it with --backend ann)")
    corpus = IndexCorpus(idx, use_ann=args.backend == "ann" or (args.backend == "auto" and idx.has_ann))
    rows = None
    if args.paths:
        files = sorted(idx.files)
        chosen = [f for p in args.paths for f in files if f == p.rstrip("/") or f.startswith(p.rstrip("/") + "/")]
        if not chosen:
            raise SearchboxError(f"no file or folder {args.paths} in the index")
        rows = idx.rows_of(tuple(dict.fromkeys(chosen)))
    encoder = None

    def embed(q: str):
        nonlocal encoder
        if qvec is not None:
            return qvec
        encoder = encoder or encoder_for(idx.state["embedder"]["config"], device=args.device)
        return encoder.encode([q], "query")[0]

    hits = []
    for row, score in rank(corpus, args.query or "", args.k, args.retriever, embed, rows):
        ref = idx.chunk(row)
        hits.append({"doc_id": ref.doc_id, "score": round(float(score), 6), "path": ref.path, "offset": ref.offset, "snippet": snippet(ref.text, args.snippet_chars)})
    if args.json:
        print(json.dumps(hits, ensure_ascii=False))
    else:
        for h in hits:
            print(f"{h['score']:.4f}  {h['path']}:{h['offset']}  {h['snippet']}")
    return 0


def cmd_manifest(args) -> int:
    """Export the live chunk records {doc_id, path, offset, length, text}: one JSON array with --json, else JSON lines."""
    from .store import Index

    idx = Index.open(Path(args.index))
    try:
        rows = idx.rows_of(tuple(sorted(idx.files)))  # path then chunk order: live rows only (superseded ones are not listed)
        records = ({"doc_id": c.doc_id, "path": c.path, "offset": c.offset, "length": c.length, "text": c.text}
                   for c in (idx.chunk(int(r)) for r in rows))
        out = sys.stdout
        if args.json:
            out.write("[")
            for i, rec in enumerate(records):
                out.write(("," if i else "") + json.dumps(rec, ensure_ascii=False))
            out.write("]\n")
        else:
            for rec in records:
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        idx.close()
    return 0


def cmd_doctor(args) -> int:
    from .doctor import doctor, healthy

    findings = doctor(Path(args.index), check_source=not args.no_source)
    for f in findings:
        print(f.line())
    return 0 if healthy(findings) else 1


def cmd_bench(args) -> int:
    from .bench import bench, markdown

    result = bench(Path(args.index), questions=Path(args.questions) if args.questions else None, k=args.k, n_queries=args.queries,
                   device=args.device, ann_max_rows=args.ann_max_rows, breakdown=args.breakdown)
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m searchbox.index", description="A persistent, mmap-able index of a folder or zip of text and code.")
    sub = p.add_subparsers(dest="cmd", required=True)

    def index_arg(sp, **kw):
        sp.add_argument("--index", required=True, metavar="DIR", help="the index folder", **kw)

    b = sub.add_parser("build", help="index SOURCE (zip or folder) into DIR (a new generation unless already up to date)")
    b.add_argument("source", metavar="SOURCE")
    index_arg(b)
    b.add_argument("--embedder", choices=["local", "api", "hash"], default="local", help="hash: model-free feature hashing (tests, benchmarks)")
    b.add_argument("--model", default=DEFAULTS.embed_model, help="sentence-transformers id or path (local) or API model id")
    b.add_argument("--api-url", default=DEFAULTS.api_url)
    b.add_argument("--query-prefix", default="")
    b.add_argument("--passage-prefix", default="")
    b.add_argument("--hash-dim", type=int, default=256)
    b.add_argument("--chunk-chars", type=int, default=DEFAULTS.chunk_chars)
    b.add_argument("--chunk-overlap", type=int, default=DEFAULTS.chunk_overlap)
    b.add_argument("--backend", choices=["auto", "exact", "ann"], default="auto",
                   help="ann: also build a usearch HNSW graph; auto (default): ann from 200,000 chunks (build.ANN_AUTO_ROWS)")
    b.add_argument("--force", action="store_true", help="rebuild even when the index is up to date")
    b.add_argument("--json", action="store_true", help="print the report as JSON (it always is: counts of files, no names)")
    b.add_argument("--list-files", action="store_true", help="add the new, changed and deleted file names to the report")
    b.add_argument("--dry-run", action="store_true", help="read and chunk SOURCE and print the counts; embed and write nothing")
    b.add_argument("--extensions", metavar="EXT,...", default=None,
                   help="only files with these extensions, e.g. py,md,txt (default: every text file)")
    b.add_argument("--skip-dirs", metavar="NAME,...", default=None,
                   help="folder names skipped at any depth (default: node_modules; '' skips none)")
    b.add_argument("--include-dot-dirs", action="store_true", help="also read folders whose name starts with '.' (skipped by default)")
    b.set_defaults(func=cmd_build)

    r = sub.add_parser("refresh", help="re-read the recorded source; embed only changed and new files")
    index_arg(r)
    r.add_argument("--source", help="read another folder or zip than the recorded one")
    r.add_argument("--list-files", action="store_true", help="add the new, changed and deleted file names to the report")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--compact", action="store_true", help="always compact afterwards")
    g.add_argument("--no-compact", action="store_true", help="never compact (default: when over half the rows are superseded)")
    r.set_defaults(func=cmd_refresh)

    c = sub.add_parser("compact", help="rewrite the live rows as one segment (no re-embedding)")
    index_arg(c)
    c.set_defaults(func=cmd_compact)

    s = sub.add_parser("search", help="top-k chunks for QUERY")
    s.add_argument("query", metavar="QUERY", nargs="?", default=None)
    index_arg(s)
    s.add_argument("--k", "--top", dest="k", type=int, default=10, help="how many chunks (default 10)")
    s.add_argument("--query-file", metavar="FILE", default=None,
                   help="search with this vector instead of QUERY: raw little-endian float32, the index's dimension")
    s.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default="dense")
    s.add_argument("--backend", choices=["auto", "exact", "ann"], default="auto",
                   help="auto (default): the index's ANN graph when it has one (whole-corpus dense queries), else exact")
    s.add_argument("--paths", nargs="+", help="only these files or folders")
    s.add_argument("--snippet-chars", "--snippet-len", dest="snippet_chars", type=int, default=240, help="snippet length in characters")
    s.add_argument("--json", action="store_true", help="[{doc_id, score, path, offset, snippet}]")
    s.set_defaults(func=cmd_search)

    m = sub.add_parser("manifest", help="export the chunk records {doc_id, path, offset, length, text} (JSON lines; --json: one array)")
    index_arg(m)
    m.add_argument("--json", action="store_true", help="one JSON array instead of JSON lines")
    m.set_defaults(func=cmd_manifest)

    d = sub.add_parser("doctor", help="check files, manifest, state and model; say how to fix")
    index_arg(d)
    d.add_argument("--no-source", action="store_true", help="skip comparing with the recorded source")
    d.set_defaults(func=cmd_doctor)

    e = sub.add_parser("bench", help="load, search, join and snippet times; ANN recall vs exact; gold-file recall with --questions")
    index_arg(e)
    e.add_argument("--questions", metavar="JSONL", help="questions with gold_files: gold-file recall@k and hit rate")
    e.add_argument("--k", type=int, default=10)
    e.add_argument("--queries", type=int, default=100, help="queries sampled from the index when no --questions")
    e.add_argument("--ann-max-rows", type=int, default=200_000, help="build a temporary ANN graph for recall only up to this many rows")
    e.add_argument("--json", action="store_true")
    e.add_argument("--breakdown", action="store_true", help="split a query's time into manifest load, search, join and snippet ms")
    e.set_defaults(func=cmd_bench)

    for sp in (b, r, s, e):
        sp.add_argument("--device", default="cpu", help="cpu | cuda | auto (local embedder)")
    for sp in (b, r):
        sp.add_argument("--no-cache", action="store_true", help="bypass the shared embedding cache")
    return p


@cli
def main(argv: Optional[list[str]] = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "k", 1) < 1:
        raise SearchboxError("--k must be at least 1")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
