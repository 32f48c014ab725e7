"""Checking an index end to end: every file against state.json, the manifest against the files table, the model against the record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import SearchboxError
from .encoders import identity_of
from .source import iter_folder, source_folder
from .store import MANIFEST_DTYPE, pinned_state, sha256_file


@dataclass
class Finding:
    level: str  # ok | warn | error
    what: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level.upper():5} {self.what}" + (f"\n      fix: {self.fix}" if self.fix else "")


def doctor(folder: Path, check_source: bool = True) -> list[Finding]:
    """Findings, worst first; any `error` means search refuses the index or would serve wrong results.
    The generation checked is pinned meanwhile, so a refresh running at the same time cannot pass for damage."""
    folder = Path(folder)
    try:
        state, held = pinned_state(folder)
    except SearchboxError as exc:
        return [Finding("error", str(exc), f"python -m searchbox.index build SOURCE --index {folder}")]
    try:
        return _check(folder, state, check_source)
    finally:
        held.release()


def _check(folder: Path, state: dict, check_source: bool) -> list[Finding]:
    src = state.get("source", {}).get("path", "SOURCE")
    rebuild = f"python -m searchbox.index build {src} --index {folder} --force (an index under the runs' index root can simply be deleted: the next run rebuilds it)"
    out: list[Finding] = []

    def err(what: str) -> None:
        out.append(Finding("error", what, rebuild))

    # 1. Every file state.json names: present, its size and SHA-256 as recorded.
    named = []
    for seg in state["segments"]:
        named.extend(seg["files"].values())
    named.extend(state[k] for k in ("files", "live", "ann") if state.get(k))
    for rec in named:
        path = folder / rec["name"]
        if not path.is_file():
            err(f"{rec['name']} is missing")
        elif path.stat().st_size != rec["bytes"]:
            err(f"{rec['name']} has {path.stat().st_size} bytes, state.json says {rec['bytes']} (truncated or overwritten)")
        elif sha256_file(path) != rec["sha256"]:
            err(f"{rec['name']} does not match its SHA-256 in state.json (modified after it was written)")
    if state.get("bm25") and not (folder / state["bm25"]["name"]).is_dir():
        err(f"{state['bm25']['name']} (BM25) is missing")
    if any(f.level == "error" for f in out):
        return out  # the structural checks below would only repeat the damage

    # 2. Contents: vectors and manifest shapes, the manifest against the files table, the live mask.
    dim = int(state["dim"])
    starts, offset = {}, 0
    manifests, paths = {}, {}
    for seg in state["segments"]:
        files = seg["files"]
        vec = np.load(folder / files["vectors"]["name"], mmap_mode="r")
        if vec.dtype != np.float32 or vec.shape != (seg["rows"], dim):
            err(f"{files['vectors']['name']}: {vec.dtype} {vec.shape}, state.json says float32 ({seg['rows']}, {dim})")
            continue
        if len(vec):
            norms = np.linalg.norm(vec, axis=1)
            if not np.isfinite(norms).all() or np.abs(norms - 1).max() > 1e-3:
                err(f"{files['vectors']['name']}: vectors are not finite unit vectors")
        man = np.load(folder / files["manifest"]["name"])
        if man.dtype != MANIFEST_DTYPE or man.shape != (seg["rows"],):
            err(f"{files['manifest']['name']} has {len(man)} rows, state.json and the vectors say {seg['rows']}")
            continue
        seg_paths = json.loads((folder / files["paths"]["name"]).read_text())
        text_bytes = (folder / files["text"]["name"]).stat().st_size
        if len(man) and (man["path"].min() < 0 or man["path"].max() >= len(seg_paths)
                         or (man["text_end"] < man["text_start"]).any() or man["text_end"].max() > text_bytes):
            err(f"{files['manifest']['name']} points outside its path table or text file")
            continue
        starts[seg["id"]], manifests[seg["id"]], paths[seg["id"]] = offset, man, seg_paths
        offset += seg["rows"]
    if any(f.level == "error" for f in out):
        return out
    table = json.loads((folder / state["files"]["name"]).read_text())
    expected_live = np.zeros(offset, dtype=bool)
    for path, entry in table.items():
        if not entry.get("chunks"):
            continue
        sid = entry.get("segment")
        if sid not in manifests:
            err(f"files table puts {path} in segment {sid}, which state.json does not list")
            continue
        rows = manifests[sid][int(entry["first"]) : int(entry["first"]) + int(entry["chunks"])]
        if len(rows) != int(entry["chunks"]) or any(paths[sid][int(p)] != path for p in rows["path"]) \
                or not np.array_equal(rows["chunk"], np.arange(len(rows))):
            err(f"the manifest of {sid} disagrees with the files table about {path}")
            continue
        expected_live[starts[sid] + int(entry["first"]) : starts[sid] + int(entry["first"]) + int(entry["chunks"])] = True
    live = np.load(folder / state["live"]["name"])
    if live.shape != expected_live.shape or not np.array_equal(live, expected_live):
        err(f"{state['live']['name']} disagrees with the files table ({int(live.sum())} live rows, the table implies {int(expected_live.sum())})")
    if int(expected_live.sum()) != state["live"]["rows"] or state["files"].get("count", len(table)) != len(table):
        err("state.json totals disagree with the files table")
    if state.get("bm25"):
        from ..lexical import load_bm25

        try:
            bm = load_bm25(folder / state["bm25"]["name"], int(state["bm25"]["docs"]))
            n_docs = int(bm.retriever.scores["num_docs"]) if bm.n else 0
        except Exception as exc:  # garbage in a BM25 file fails bm25s in many ways; each is this finding
            err(f"{state['bm25']['name']} unreadable ({type(exc).__name__}: {str(exc)[:200]})")
        else:
            if n_docs != int(expected_live.sum()):
                err(f"BM25 holds {n_docs} documents for {int(expected_live.sum())} live rows")
    if state.get("ann"):
        from .ann import View

        try:
            View(folder / state["ann"]["name"], {**state["ann"], "rows": int(expected_live.sum())})
        except SearchboxError as exc:
            err(str(exc))
    if any(f.level == "error" for f in out):
        return out
    out.append(Finding("ok", f"{len(table)} files, {int(expected_live.sum())} live chunks in {len(state['segments'])} segment(s), "
                             f"{state['totals']['dead_rows']} superseded rows; every file matches state.json"))
    if state["totals"]["dead_rows"] > 0:
        out.append(Finding("warn", f"{state['totals']['dead_rows']} superseded rows take space", f"python -m searchbox.index refresh --index {folder} --compact"))

    # 3. The embedder: the model (files, config, prefixes) must still be the one that made the vectors.
    emb = state.get("embedder", {})
    try:
        now = identity_of(emb.get("config", {}))
    except SearchboxError as exc:
        out.append(Finding("error", f"embedder {emb.get('model')!r} cannot be checked: {exc}", "install the model the index was built with, or rebuild with another"))
    else:
        if now != emb.get("key"):
            out.append(Finding("error", f"embedder {emb.get('model')!r} differs from the one that built the index (model files or settings changed): "
                                        "queries would be embedded into another space", f"rebuild: {rebuild}"))
        else:
            out.append(Finding("ok", f"embedder {emb.get('model')!r} matches the index ({now})"))

    # 4. The source: report drift, which refresh fixes.
    stale = [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]
    if stale:
        out.append(Finding("warn", f"{len(stale)} staging folder(s) of an interrupted writer",
                           "the same build rerun resumes from its finished segments (.tmp-build-*); any other write removes them"))
    if check_source:
        out.append(_source_drift(state, table, folder))
    order = {"error": 0, "warn": 1, "ok": 2}
    return sorted(out, key=lambda f: order[f.level])


def _source_drift(state: dict, table: dict, folder: Path) -> Finding:
    src = Path(state["source"]["path"])
    if not src.exists():
        return Finding("warn", f"source {src} no longer exists: the index serves as built, refresh is impossible")
    try:
        with source_folder(src) as root:
            now = {f.path: f.sha256 for f in iter_folder(root)}
    except SearchboxError as exc:
        return Finding("warn", f"source {src} unreadable: {exc}")
    changed = sum(1 for p, h in now.items() if p in table and table[p]["sha256"] != h)
    new, gone = len(set(now) - set(table)), len(set(table) - set(now))
    if changed or new or gone:
        return Finding("warn", f"source {src} changed since the last build: {changed} changed, {new} new, {gone} deleted file(s)",
                       f"python -m searchbox.index refresh --index {folder}")
    return Finding("ok", f"source {src} unchanged since the last build")


def healthy(findings: list[Finding]) -> bool:
    return not any(f.level == "error" for f in findings)

