"""Writing an index: full builds, delta refreshes and compaction, one writer at a time (flock), committed by replacing state.json."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional

import numpy as np

from ... import __version__
from ...config import DataroomLimits
from ...errors import BackendError, SearchboxError
from ...paths import atomic_write
from ..lexical import build_bm25
from . import ann as ann_mod
from . import progress as index_progress
from .source import Chunking, content_hash, iter_folder, source_folder, source_kind
from .segment import Encoder, Progress, SegmentWriter, save_npy, write_bytes
from .selection import Selection
from .store import FORMAT, LOCK, STATE, Index, IndexMissing, describe, generation_state_name, pin_name, read_state

# `--backend auto` (the CLI's default) adds the ANN graph to an index of at least this many chunks: exact search reads
# every vector (rows x dim x 4 bytes) per query; at 250K 256-dim rows its p95 was 21 ms at load 4 and 78 ms at load 8
# on the shared 2-core machine (results/benchmarks/scale.md), against the 50 ms; ANN's was about 1 ms.
ANN_AUTO_ROWS = 200_000
AUTO = "auto"


def wants_ann(ann, rows: int) -> Optional[ann_mod.AnnParams]:
    """The ANN parameters a build with `ann` (params, None, or AUTO) uses for an index of `rows` chunks."""
    if ann == AUTO:
        return ann_mod.AnnParams() if rows >= ANN_AUTO_ROWS else None
    return ann


# A full build writes a segment every SEGMENT_ROWS chunks: its texts leave memory once embedded, and a build that
# is killed keeps them: its rerun (same source, embedder, chunking, selection) reuses every finished segment's files
# whose content is unchanged and embeds only the rest (the journal beside each segment says which files it holds).
SEGMENT_ROWS = 100_000


@dataclass
class Report:
    status: str  # built | refreshed | compacted | up to date
    folder: str
    generation: int = 0
    files: int = 0
    chunks: int = 0  # live rows after the operation
    embedded_chunks: int = 0  # texts handed to the encoder by this operation
    new_files: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    compacted: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# ---- locking and committing -------------------------------------------------------------------
@contextlib.contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """Exclusive, blocking, released by the kernel if the holder dies: one writer per index folder.
    A failing disk inside (full, read-only) is the index backend's failure: BackendError."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise BackendError(f"index folder {folder} is not writable: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    except OSError as exc:
        raise BackendError(f"index {folder}: cannot write ({exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''})") from exc
    finally:
        os.close(fd)  # closing drops the flock


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit(folder: Path, staging: Path, state: dict, reading: Optional[Index] = None) -> None:
    """Move the staged files in, replace state.json (the commit), then drop what no state a reader holds references.

    The generation comes with its pin file and a copy of its state (what a later writer reads to know which files
    its readers still need). `reading`, the writer's own view of the previous generation, is closed after the
    commit so that it does not hold that generation back."""
    state["pins"] = 1  # readers of this index pin their generation (store.pin)
    gen = int(state["generation"])
    write_bytes(staging / generation_state_name(gen), json.dumps(state, indent=1).encode())
    write_bytes(staging / pin_name(gen), b"")
    for entry in sorted(staging.iterdir()):
        target = folder / entry.name
        if target.is_dir():  # left by a writer that died between moving files and committing
            shutil.rmtree(target)
        os.replace(entry, target)
    _fsync_dir(folder)
    atomic_write(folder / STATE, json.dumps(state, indent=1))
    _fsync_dir(folder)
    if reading is not None:
        reading.close()
    _collect_garbage(folder, state)


def referenced(state: dict) -> set[str]:
    gen = int(state.get("generation", 0))
    names = {STATE, LOCK, pin_name(gen), generation_state_name(gen)}
    for seg in state["segments"]:
        names.update(rec["name"] for rec in seg["files"].values())
    for key in ("files", "live", "bm25", "ann"):
        if state.get(key):
            names.add(state[key]["name"])
    return names


def _collect_garbage(folder: Path, state: dict) -> None:
    """Remove what no live generation references: older generations no reader pins, dead writers' staging folders
    (the writer lock is held). A generation some reader pins keeps every file its state names, until a later write.

    Each older generation's pin is taken exclusively (without waiting) before anything is removed and unlinked
    last, so a reader either holds it first (and the generation stays) or finds it gone and reads state.json again."""
    keep = referenced(state)
    doomed: list[tuple[Path, int]] = []
    try:
        for path in sorted(folder.glob("g*.pin")):
            if path.name in keep:
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a reader holds this generation: keep what it names
                os.close(fd)
                try:
                    keep |= referenced(json.loads((folder / generation_state_name(int(path.name[1:-len('.pin')]))).read_text()))
                except (OSError, ValueError, KeyError, TypeError):
                    return  # which files it needs is unknown: remove nothing this time
                continue
            doomed.append((path, fd))
        gone = {p.name for p, _ in doomed}
        for entry in folder.iterdir():
            if entry.name in keep or entry.name in gone:
                continue
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for path, _ in doomed:
            path.unlink(missing_ok=True)
    finally:
        for _, fd in doomed:
            os.close(fd)


def _staging(folder: Path) -> Path:
    path = folder / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return path


def _next_ids(state: Optional[dict]) -> tuple[int, int]:
    """(next generation, next segment number): names are never reused while a reader may map them."""
    if not state:
        return 1, 1
    segs = [int(s["id"][1:]) for s in state.get("segments", [])]
    return int(state.get("generation", 0)) + 1, max(segs + [int(state.get("last_segment", 0))]) + 1


def _existing_state(folder: Path) -> Optional[dict]:
    try:
        return read_state(folder)
    except IndexMissing:
        return None
    except SearchboxError:
        return {"generation": _peek_generation(folder), "segments": []}


def _peek_generation(folder: Path) -> int:
    try:
        return int(json.loads((folder / STATE).read_text()).get("generation", 0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 0


def _tables(staging: Path, gen: int, files: dict, live: np.ndarray, live_texts: Iterable[str],
            progress: Optional[Progress] = None) -> dict:
    """Write a generation's files table, live mask and BM25 (its texts streamed: build_bm25); return their state records."""
    g = f"g{gen:06d}"
    write_bytes(staging / f"{g}.files.json", json.dumps(files, sort_keys=True, separators=(",", ":")).encode())
    save_npy(staging / f"{g}.live.npy", live)
    rows = int(live.sum())
    bm = build_bm25(live_texts, progress=(lambda done: progress("bm25", done, rows)) if progress else None)
    bm.save(staging / f"{g}.bm25")
    return {"files": {**describe(staging / f"{g}.files.json"), "count": len(files)},
            "live": {**describe(staging / f"{g}.live.npy"), "rows": int(live.sum())},
            "bm25": {"name": f"{g}.bm25", "docs": bm.n}}


def _state(prev_source: dict, embedder: dict, chunking: Chunking, dim: int, gen: int, segments: list[dict], tables: dict,
           ann: Optional[dict], files: dict) -> dict:
    total = sum(s["rows"] for s in segments)
    return {
        "format": FORMAT, "generation": gen, "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "searchbox": __version__, "source": prev_source, "embedder": embedder, "chunking": chunking.as_dict(), "dim": dim,
        "segments": segments, "last_segment": max([int(s["id"][1:]) for s in segments] + [0]), **tables, "ann": ann,
        "totals": {"files": len(files), "indexed_files": sum(1 for f in files.values() if f.get("chunks")),
                   "rows": total, "live_rows": tables["live"]["rows"], "dead_rows": total - tables["live"]["rows"]},
    }


def _live_mask(segments: list[dict], files: dict) -> np.ndarray:
    starts = np.cumsum([0] + [s["rows"] for s in segments])
    where = {s["id"]: int(starts[i]) for i, s in enumerate(segments)}
    live = np.zeros(int(starts[-1]), dtype=bool)
    for entry in files.values():
        if entry.get("chunks"):
            first = where[entry["segment"]] + int(entry["first"])
            live[first : first + int(entry["chunks"])] = True
    return live


def _build_ann(staging: Path, gen: int, index_rows: Iterable[tuple[np.ndarray, np.ndarray]], dim: int, params: ann_mod.AnnParams,
               progress: Optional[Progress] = None, total: int = 0) -> dict:
    def reported() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        done = 0
        for rows, vecs in index_rows:
            yield rows, vecs
            done += len(rows)
            if progress:
                progress("ann", done, total)

    graph = ann_mod.build(reported(), dim, params)
    name = f"g{gen:06d}.usearch"
    meta = ann_mod.save(graph, staging / name)
    return {**describe(staging / name), **meta}


def _live_batches(idx: Index, live: np.ndarray, batch: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    rows = np.flatnonzero(live)
    for start in range(0, len(rows), batch):
        part = rows[start : start + batch]
        yield part, idx.vectors(part)


# ---- operations -------------------------------------------------------------------------------
def build(source: Path, folder: Path, encoder: Encoder, chunking: Chunking, embedder: dict, *, ann: Optional[ann_mod.AnnParams] = None,
          limits: Optional[DataroomLimits] = None, expected_hash: Optional[str] = None, force: bool = False,
          progress: Optional[Progress] = None, selection: Optional[Selection] = None) -> Report:
    """Index every text file of a folder or zip into folder (a new generation), unless it is already
    an index of the same content, embedder and chunking (then nothing is written; force rebuilds).

    ann: AnnParams adds an ANN graph, None does not, AUTO adds one when the index has ANN_AUTO_ROWS chunks or more.

    expected_hash: the content hash the caller keyed this folder by; the files actually read must
    hash to it (every file counted, as Workspace.sha256 does), else nothing is committed.
    selection: which files are read (the CLI's extension allow-list and skipped folders), recorded in the state.
    """
    start = time.monotonic()
    progress = index_progress.also(progress)  # whoever shows builds (CLI, sweep, web) hears this one too
    source, folder = Path(source).resolve(), Path(folder)
    kind = source_kind(source)
    embedder = {**embedder, "key": encoder.identity}
    with writer_lock(folder):
        prev = _existing_state(folder)
        if prev and not force and prev.get("segments") is not None and "source" in prev:
            try:
                Index.open(folder).close()
                current = True
            except SearchboxError:  # damaged: rebuild
                current = False
            if current and _same_spec(prev, embedder, chunking, selection) and (
                    wants_ann(ann, int(prev.get("totals", {}).get("live_rows", 0))) is None or prev.get("ann")):
                same_content = expected_hash is not None and prev["source"].get("content_sha256") == expected_hash
                if not same_content and expected_hash is None:
                    with source_folder(source, limits) as root:
                        same_content = _scan_hash(root, limits, selection) == prev["source"]["content_sha256"]
                if same_content:
                    return Report("up to date", str(folder), prev["generation"], prev["totals"]["files"], prev["totals"]["live_rows"],
                                  seconds=round(time.monotonic() - start, 3))
        gen, seg_no = _next_ids(prev)
        staging = _resume_folder(folder, source, embedder, chunking, selection)
        journals = _journals(staging)
        seg_no = max([seg_no] + [int(j["segment"]["id"][1:]) + 1 for j in journals])
        reuse = {path: (j, entry) for j in journals for path, entry in j["files"].items()}
        segments: dict[str, dict] = {}
        dim = next((int(j["dim"]) for j in journals), None)
        embedded = 0
        tally = {"files": 0, "read": 0, "chunks": 0, "embedded": 0}

        def embed_progress(stage: str, done: int, total: int) -> None:
            # one count over the whole build (segments are embedded as the files are read): chunks embedded so far,
            # of the chunks found, or while files are still being read an estimate from the share of files read
            whole = tally["chunks"]
            if tally["read"] < tally["files"]:
                whole = max(tally["chunks"] * tally["files"] // max(1, tally["read"]), tally["embedded"] + total + 1)
            progress("embed", tally["embedded"] + done, whole)

        try:
            with source_folder(source, limits) as root:
                writer, held = SegmentWriter(staging, f"s{seg_no:06d}"), {}
                files, entries = {}, []

                def finish(writer: SegmentWriter, held: dict) -> None:
                    nonlocal dim, embedded
                    seg, dim = writer.finish(encoder, dim, embed_progress)
                    tally["embedded"] += seg["rows"]
                    embedded += seg["rows"]
                    if seg["rows"]:
                        segments[seg["id"]] = seg
                        write_bytes(staging / f"{seg['id']}.journal.tmp", json.dumps({"segment": seg, "dim": dim, "files": held}).encode())
                        os.replace(staging / f"{seg['id']}.journal.tmp", staging / f"{seg['id']}.journal.json")

                for f in iter_folder(root, limits, include_skipped=expected_hash is not None, selection=selection,
                                     on_count=lambda n: tally.update(files=n)):
                    entries.append((f.path, f.size, f.sha256))
                    tally["read"] += 1
                    if not f.indexed:
                        continue
                    hit = reuse.get(f.path)
                    if hit and hit[1]["sha256"] == f.sha256:  # in a segment a killed build of this spec finished
                        j, entry = hit
                        segments[j["segment"]["id"]] = j["segment"]
                        files[f.path] = {"sha256": f.sha256, "size": f.size, "segment": j["segment"]["id"], "first": entry["first"], "chunks": entry["chunks"]}
                        tally["chunks"] += entry["chunks"]
                        tally["embedded"] += entry["chunks"]
                        continue
                    first, count = writer.add(f.path, f.chunks(chunking))
                    files[f.path] = {"sha256": f.sha256, "size": f.size, "segment": writer.id if count else None, "first": first, "chunks": count}
                    tally["chunks"] += count
                    if count:
                        held[f.path] = {"sha256": f.sha256, "first": first, "chunks": count}
                    if progress:
                        progress("read", len(files), 0)
                    if len(writer.records) >= SEGMENT_ROWS:
                        finish(writer, held)
                        seg_no += 1
                        writer, held = SegmentWriter(staging, f"s{seg_no:06d}"), {}
            digest = content_hash(entries)
            if expected_hash is not None and digest != expected_hash:
                raise BackendError(f"dataroom {source} changed while it was being indexed (content hash {digest[:12]}, expected {expected_hash[:12]})")
            if writer.records or not segments:
                finish(writer, held)
            else:  # the last segment filled up exactly: this writer got nothing
                writer.finish(None, dim)
            dim = int(dim or 0)
            order = [segments[k] for k in sorted(segments)]
            live = _live_mask(order, files)
            tables = _tables(staging, gen, files, live, _texts_of(staging, order, live), progress)
            ann_rec = None
            params = wants_ann(ann, int(live.sum()))
            if params is not None and live.any():
                ann_rec = _build_ann(staging, gen, _segment_batches(staging, order, live), dim, params, progress, int(live.sum()))
            src = {"path": str(source), "kind": kind, "content_sha256": digest}
            state = _state(src, embedder, chunking, dim, gen, order, tables, ann_rec, files)
            if selection is not None:
                state["selection"] = selection.as_dict()
            for j in staging.glob("*.journal.json"):
                j.unlink()  # the committed state holds the segments now
            _commit(folder, staging, state)
        except BaseException:
            for tmp in staging.glob("g*"):  # a generation's tables are rebuilt by the rerun; its finished segments stay
                shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return Report("built", str(folder), gen, len(files), int(live.sum()), embedded_chunks=embedded, new_files=sorted(files),
                  seconds=round(time.monotonic() - start, 3))


def _resume_folder(folder: Path, source: Path, embedder: dict, chunking: Chunking, selection: Optional[Selection]) -> Path:
    """The staging folder of a full build, named by what it builds: a rerun of a killed build finds its segments.
    Named .tmp-* like every staging folder: doctor reports it, and a commit of another build removes it."""
    spec = json.dumps([str(source), embedder["key"], chunking.as_dict(), selection.as_dict() if selection is not None else None])
    path = folder / f".tmp-build-{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
    path.mkdir(exist_ok=True)
    return path


def _journals(staging: Path) -> list[dict]:
    """Finished segments of a killed build in staging (journal written after the segment's files): those whose files
    are all there with their recorded sizes; anything else there is a dead writer's and is removed."""
    out, keep = [], set()
    for path in sorted(staging.glob("s*.journal.json")):
        try:
            j = json.loads(path.read_text())
            seg = j["segment"]
            if all((staging / rec["name"]).stat().st_size == rec["bytes"] for rec in seg["files"].values()):
                out.append(j)
                keep |= {rec["name"] for rec in seg["files"].values()} | {path.name}
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for entry in staging.iterdir():
        if entry.name not in keep:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    return out


def _texts_of(folder: Path, segments: list[dict], live: np.ndarray) -> Iterator[str]:
    """The live rows' texts in row order, read back from the segments' text blobs one segment at a time."""
    from .store import MANIFEST_DTYPE

    base = 0
    for seg in segments:
        man = np.load(folder / seg["files"]["manifest"]["name"], mmap_mode="r")
        assert man.dtype == MANIFEST_DTYPE
        with open(folder / seg["files"]["text"]["name"], "rb") as fh:
            blob = fh.read()
        for r in np.flatnonzero(live[base : base + seg["rows"]]):
            yield blob[int(man[r]["text_start"]) : int(man[r]["text_end"])].decode("utf-8", errors="replace")
        del blob
        base += seg["rows"]


def _segment_batches(folder: Path, segments: list[dict], live: np.ndarray, batch: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    base = 0
    for seg in segments:
        vecs = np.load(folder / seg["files"]["vectors"]["name"], mmap_mode="r")
        rows = np.flatnonzero(live[base : base + seg["rows"]])
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            yield part + base, np.asarray(vecs[part])
        base += seg["rows"]



def _scan_hash(root: Path, limits: Optional[DataroomLimits], selection: Optional[Selection] = None) -> str:
    return content_hash([(f.path, f.size, f.sha256) for f in iter_folder(root, limits, selection=selection)])


def _same_spec(state: dict, embedder: dict, chunking: Chunking, selection: Optional[Selection] = None) -> bool:
    return (state.get("embedder", {}).get("key") == embedder["key"] and state.get("chunking") == chunking.as_dict()
            and state.get("selection") == (selection.as_dict() if selection is not None else None))


def refresh(folder: Path, encoder: Encoder, *, source: Optional[Path] = None, compact: Optional[bool] = None,
            limits: Optional[DataroomLimits] = None, progress: Optional[Progress] = None) -> Report:
    """Re-read the recorded source: embed only new and changed files into a delta segment, supersede
    deleted ones. compact: True always, False never, None when over half the rows are dead or there
    are more than 8 segments."""
    start = time.monotonic()
    progress = index_progress.also(progress)
    folder = Path(folder)
    with writer_lock(folder):
        idx = Index.open(folder)
        state = idx.state
        if encoder.identity != state["embedder"]["key"]:
            raise BackendError(f"index {folder} was built with another embedder ({state['embedder'].get('model')}); "
                               f"rebuild it: python -m searchbox.index build SOURCE --index {folder} --force")
        chunking = Chunking(state["chunking"]["chunk_chars"], state["chunking"]["chunk_overlap"])
        src = Path(source or state["source"]["path"])
        selection = Selection.from_dict(state.get("selection"))  # the files the build chose, chosen again
        old = idx.files
        gen, seg_no = _next_ids(state)
        staging = _staging(folder)
        try:
            report = Report("refreshed", str(folder))
            with source_folder(src, limits) as root:
                writer = SegmentWriter(staging, f"s{seg_no:06d}")
                files, entries = {}, []
                for f in iter_folder(root, limits, selection=selection):
                    entries.append((f.path, f.size, f.sha256))
                    prev = old.get(f.path)
                    if prev and prev["sha256"] == f.sha256:
                        files[f.path] = prev
                        continue
                    (report.changed_files if prev else report.new_files).append(f.path)
                    first, count = writer.add(f.path, f.chunks(chunking))
                    files[f.path] = {"sha256": f.sha256, "size": f.size, "segment": writer.id if count else None, "first": first, "chunks": count}
            report.deleted_files = sorted(set(old) - set(files))
            if not (report.new_files or report.changed_files or report.deleted_files):
                shutil.rmtree(staging, ignore_errors=True)
                report.status = "up to date"
                report.generation, report.files, report.chunks = state["generation"], len(files), idx.live_rows
                if compact:
                    idx.close()  # its pin would keep the generation being compacted away
                    return _compact_locked(folder, start)
                return report
            seg, dim = writer.finish(encoder, idx.dim or None, progress)
            report.embedded_chunks = seg["rows"]
            segments = state["segments"] + ([seg] if seg["rows"] else [])
            live = _live_mask(segments, files)
            texts = _live_texts(idx, live, writer)
            tables = _tables(staging, gen, files, live, texts, progress)
            ann_rec = None
            if state.get("ann"):
                ann_rec = _update_ann(idx, staging, gen, live, seg, dim, writer)
            src_rec = {"path": str(src.resolve()), "kind": source_kind(src), "content_sha256": content_hash(entries)}
            new_state = _state(src_rec, state["embedder"], chunking, dim or idx.dim, gen, segments, tables, ann_rec, files)
            if selection is not None:
                new_state["selection"] = selection.as_dict()
            _commit(folder, staging, new_state, reading=idx)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        idx.close()
        report.generation, report.files, report.chunks = gen, len(files), int(live.sum())
        dead = new_state["totals"]["dead_rows"]
        if compact or (compact is None and (dead * 2 > new_state["totals"]["rows"] or len(segments) > 8)):
            _compact_locked(folder, start)
            report.compacted = True
        report.seconds = round(time.monotonic() - start, 3)
        return report


def _live_texts(idx: Index, live: np.ndarray, writer: SegmentWriter) -> Iterator[str]:
    """Texts of the live rows in row order: old rows from the index, new ones from the writer."""
    old_rows = idx.rows
    for r in np.flatnonzero(live[:old_rows]):
        yield idx.chunk(int(r)).text
    for r in np.flatnonzero(live[old_rows:]):
        yield writer.texts[int(r)]


def _update_ann(idx: Index, staging: Path, gen: int, live: np.ndarray, seg: dict, dim: int, writer: SegmentWriter) -> dict:
    """Drop superseded rows from the graph and add the delta's, without rebuilding it."""
    params = ann_mod.AnnParams(**{k: idx.state["ann"][k] for k in ("dtype", "connectivity", "expansion_add", "expansion_search")})
    graph = ann_mod.load(idx.folder / idx.state["ann"]["name"], params)
    was_live = idx.live if idx.live is not None else np.ones(idx.rows, dtype=bool)
    gone = np.flatnonzero(was_live & ~live[: idx.rows])
    if len(gone):
        graph.remove(gone.astype(np.uint64))
    if seg["rows"]:
        vecs = np.load(staging / seg["files"]["vectors"]["name"], mmap_mode="r")
        ann_mod.add(graph, np.arange(idx.rows, idx.rows + seg["rows"]), vecs)
    name = f"g{gen:06d}.usearch"
    meta = ann_mod.save(graph, staging / name)
    meta["rows"] = int(live.sum())
    return {**describe(staging / name), **meta}


def compact(folder: Path) -> Report:
    """Rewrite the live rows as one segment in path order (no re-embedding): the layout of a fresh build."""
    with writer_lock(Path(folder)):
        return _compact_locked(Path(folder), time.monotonic())


def _compact_locked(folder: Path, start: float) -> Report:
    idx = Index.open(folder)
    state = idx.state
    gen, seg_no = _next_ids(state)
    staging = _staging(folder)
    try:
        writer = SegmentWriter(staging, f"s{seg_no:06d}", precomputed=True)
        files = {}
        for path in sorted(idx.files):
            entry = dict(idx.files[path])
            if entry.get("chunks"):
                rows = idx.rows_of([path])
                refs = [idx.chunk(int(r)) for r in rows]
                entry["first"], entry["chunks"] = writer.add_rows(path, [(c.chunk, c.offset, c.length, c.text) for c in refs], idx.vectors(rows))
                entry["segment"] = writer.id
            files[path] = entry
        seg, dim = writer.finish(None, idx.dim)
        live = np.ones(seg["rows"], dtype=bool)
        tables = _tables(staging, gen, files, live, writer.texts)
        ann_rec = None
        if state.get("ann") and seg["rows"]:
            params = ann_mod.AnnParams(**{k: state["ann"][k] for k in ("dtype", "connectivity", "expansion_add", "expansion_search")})
            vecs = np.load(staging / seg["files"]["vectors"]["name"], mmap_mode="r")
            ann_rec = _build_ann(staging, gen, [(np.arange(seg["rows"]), vecs)], dim, params)
        new_state = _state(state["source"], state["embedder"], Chunking(state["chunking"]["chunk_chars"], state["chunking"]["chunk_overlap"]),
                           dim, gen, [seg] if seg["rows"] else [], tables, ann_rec, files)
        if state.get("selection") is not None:
            new_state["selection"] = state["selection"]
        _commit(folder, staging, new_state, reading=idx)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        idx.close()
    return Report("compacted", str(folder), gen, len(files), seg["rows"], compacted=True, seconds=round(time.monotonic() - start, 3))


def add_ann(folder: Path, params: Optional[ann_mod.AnnParams] = None) -> Report:
    """Give an existing index an ANN graph over its live rows (a new generation sharing the segments)."""
    start = time.monotonic()
    folder = Path(folder)
    with writer_lock(folder):
        idx = Index.open(folder)
        state = dict(idx.state)
        if state.get("ann"):
            return Report("up to date", str(folder), state["generation"], state["totals"]["files"], idx.live_rows)
        gen, _ = _next_ids(state)
        staging = _staging(folder)
        try:
            live = idx.live if idx.live is not None else np.ones(idx.rows, dtype=bool)
            state["ann"] = _build_ann(staging, gen, _live_batches(idx, live), idx.dim, params or ann_mod.AnnParams()) if idx.live_rows else None
            state["generation"] = gen
            _commit(folder, staging, state, reading=idx)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            idx.close()
    return Report("built", str(folder), gen, state["totals"]["files"], idx.live_rows, seconds=round(time.monotonic() - start, 3))
