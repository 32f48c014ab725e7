"""The on-disk index: immutable segments (mmap'd vectors, manifest, text), per-generation tables, and state.json as the commit point.

Layout of an index folder:

    state.json                   the commit point (replaced atomically): format, source, embedder, chunking,
                                 segments and the generation's files, each with its size and SHA-256
    s000001.vec.npy              float32 [rows, dim], L2-normalised, opened with np.load(mmap_mode="r")
    s000001.man.npy              the manifest: one record per row (path id, chunk, char offset, char length,
                                 byte range of its text in s000001.txt)
    s000001.txt, .paths.json     chunk texts (UTF-8, concatenated) and the segment's path table
    g000003.files.json           per file: sha256, size, segment and rows holding its live chunks
    g000003.live.npy             bool [all rows]: rows of superseded (changed or deleted) files are False
    g000003.bm25/                bm25s over the live rows, in row order
    g000003.usearch              optional ANN graph (usearch) keyed by row
    g000003.state.json           the generation's state (what its readers use), kept while it lives
    g000003.pin                  readers of generation 3 hold a shared flock on it while they read
    .lock                        held (flock) by the one process writing

Segments never change once written; a refresh appends a delta segment and a new generation of the
small tables, then replaces state.json. Readers never see a generation change under them: a reader
pins the generation it opened (a shared flock on its pin file) until it closes, and a writer removes
an older generation's files only once it holds that pin exclusively (no reader left), then unlinks the
pin; a reader that pins a generation whose pin was unlinked (or is gone) reads state.json again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ...paths import sha256_file
from ...errors import BackendError
from ..lexical import load_bm25, top_k

FORMAT = 1
STATE = "state.json"
LOCK = ".lock"
MANIFEST_DTYPE = np.dtype([("path", "<i4"), ("chunk", "<i4"), ("offset", "<i8"), ("length", "<i8"), ("text_start", "<i8"), ("text_end", "<i8")])


class IndexCorrupt(BackendError):
    """An index whose files disagree with its state: refused, with the command that diagnoses it."""


class IndexMissing(BackendError):
    """No committed index in the folder."""


def pin_name(generation: int) -> str:
    return f"g{int(generation):06d}.pin"


def generation_state_name(generation: int) -> str:
    return f"g{int(generation):06d}.state.json"


class Pin:
    """A reader's hold on one generation (a shared flock on its pin file): its files stay until released."""

    def __init__(self, fd: Optional[int]):
        self.fd = fd  # None: an index written before pins (nothing to hold)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def pin(folder: Path, state: dict) -> Optional[Pin]:
    """Hold the generation `state` names; None when a writer has removed it meanwhile (read state.json again)."""
    try:
        fd = os.open(Path(folder) / pin_name(state.get("generation", 0)), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None if state.get("pins") else Pin(None)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a writer is removing this generation
        if os.fstat(fd).st_nlink == 0:  # it was: its files are gone
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        raise
    return Pin(fd)


def pinned_state(folder: Path, attempts: int = 20) -> tuple[dict, Pin]:
    """The committed state and a pin on its generation (for readers that read the files themselves, e.g. doctor)."""
    for _ in range(attempts):
        state = read_state(folder)
        held = pin(folder, state)
        if held is not None:
            return state, held
        time.sleep(0.01)
    raise _damaged(Path(folder), "its generation kept changing while being opened")


def describe(path: Path) -> dict:
    """{name, bytes, sha256} of a written file, as state.json records it."""
    return {"name": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def read_state(folder: Path) -> dict:
    path = Path(folder) / STATE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise IndexMissing(f"no index in {folder} (build one: python -m searchbox.index build SOURCE --index {folder})") from exc
    except (OSError, ValueError) as exc:
        raise IndexCorrupt(f"index {folder}: state.json unreadable ({exc}); rebuild it: python -m searchbox.index build SOURCE --index {folder}") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise IndexCorrupt(f"index {folder}: format {state.get('format') if isinstance(state, dict) else '?'} is not {FORMAT}; "
                           f"rebuild it: python -m searchbox.index build SOURCE --index {folder}")
    return state


def _damaged(folder: Path, what: str) -> IndexCorrupt:
    return IndexCorrupt(f"index {folder} is damaged: {what}; run `python -m searchbox.index doctor --index {folder}`")


@dataclass
class ChunkRef:
    row: int
    path: str
    chunk: int
    offset: int
    length: int
    text: str

    @property
    def doc_id(self) -> str:
        return f"{self.path}#{self.chunk}"


class Segment:
    """One immutable segment, mmap'd: vectors, manifest, text blob; its path table on first use."""

    def __init__(self, folder: Path, meta: dict, dim: int, check_hash: bool = True):
        self.id = meta["id"]
        self.rows = int(meta["rows"])
        files = meta["files"]
        for key in ("vectors", "manifest", "text", "paths"):
            rec = files[key]
            size = os.stat(folder / rec["name"]).st_size  # FileNotFoundError propagates: the caller retries or reports
            if size != rec["bytes"]:
                raise _damaged(folder, f"{rec['name']} has {size} bytes, state.json says {rec['bytes']}")
        self.vectors = np.load(folder / files["vectors"]["name"], mmap_mode="r")
        if self.vectors.dtype != np.float32 or self.vectors.shape != (self.rows, dim):
            raise _damaged(folder, f"{files['vectors']['name']} holds {self.vectors.dtype} {self.vectors.shape}, state.json says float32 ({self.rows}, {dim})")
        man_path = folder / files["manifest"]["name"]
        if check_hash:  # the join table is small: verify it on every open, so a disagreeing manifest is never served
            raw = man_path.read_bytes()
            if hashlib.sha256(raw).hexdigest() != files["manifest"]["sha256"]:
                raise _damaged(folder, f"{man_path.name} does not match its SHA-256 in state.json")
        self.manifest = np.load(man_path, mmap_mode="r")
        if self.manifest.dtype != MANIFEST_DTYPE or self.manifest.shape != (self.rows,):
            raise _damaged(folder, f"{man_path.name} has {self.manifest.shape[0] if self.manifest.ndim else '?'} rows, state.json says {self.rows}")
        self._text_path = folder / files["text"]["name"]
        self._paths_path = folder / files["paths"]["name"]
        self._paths_sha = files["paths"]["sha256"]
        self._text: Optional[mmap.mmap] = None
        self._paths: Optional[list[str]] = None
        self._fh = None

    @property
    def paths(self) -> list[str]:
        if self._paths is None:
            raw = self._paths_path.read_bytes()
            if hashlib.sha256(raw).hexdigest() != self._paths_sha:
                raise _damaged(self._paths_path.parent, f"{self._paths_path.name} does not match its SHA-256 in state.json")
            self._paths = json.loads(raw)
        return self._paths

    def text(self, start: int, end: int) -> str:
        if end <= start:
            return ""
        if self._text is None:
            self._fh = open(self._text_path, "rb")
            self._text = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        return self._text[start:end].decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._text is not None:
            self._text.close()
            self._fh.close()
            self._text = None


class Index:
    """A committed index opened read-only: exact (or ANN) dense top-k, BM25 top-k, rows by file, chunk lookup."""

    def __init__(self, folder: Path, state: dict, segments: list[Segment], live: Optional[np.ndarray]):
        self.folder = Path(folder)
        self.state = state
        self.segments = segments
        self.dim = int(state["dim"])
        self.starts = np.cumsum([0] + [s.rows for s in segments])
        self.rows = int(self.starts[-1])
        self.live = live  # None: every row is live
        self._files: Optional[dict] = None
        self._bm25 = None
        self._bm25_rows: Optional[np.ndarray] = None
        self._ann = None
        self._pin: Optional[Pin] = None  # held until close(): no writer removes this generation's files meanwhile

    # ---- opening --------------------------------------------------------------------------
    @classmethod
    def open(cls, folder: Path, attempts: int = 20) -> "Index":
        """Open the committed generation and pin it until close(); a damaged index raises IndexCorrupt naming the file."""
        folder = Path(folder)
        for attempt in range(attempts):
            state = read_state(folder)
            held = pin(folder, state)
            if held is None:  # a writer committed a newer generation and removed this one: read the state again
                time.sleep(0.01)
                continue
            try:
                idx = cls._open_state(folder, state)
            except FileNotFoundError as exc:
                held.release()
                # (an index written before pins) a writer may have removed this generation's files between
                # our read of state.json and the opens: read the state again.
                if read_state(folder).get("generation") != state.get("generation") and attempt + 1 < attempts:
                    time.sleep(0.01)
                    continue
                raise _damaged(folder, f"{Path(exc.filename).name if exc.filename else 'a file'} is missing") from exc
            except (ValueError, OSError, KeyError, TypeError) as exc:
                held.release()
                raise _damaged(folder, f"{type(exc).__name__}: {exc}") from exc
            except BaseException:
                held.release()
                raise
            idx._pin = held
            return idx
        raise _damaged(folder, "it kept changing while being opened")

    @classmethod
    def _open_state(cls, folder: Path, state: dict) -> "Index":
        dim = int(state["dim"])
        segments = [Segment(folder, meta, dim) for meta in state["segments"]]
        rows = sum(s.rows for s in segments)
        live = None
        rec = state["live"]
        size = os.stat(folder / rec["name"]).st_size
        if size != rec["bytes"]:
            raise _damaged(folder, f"{rec['name']} has {size} bytes, state.json says {rec['bytes']}")
        mask = np.load(folder / rec["name"])
        if mask.dtype != np.bool_ or mask.shape != (rows,):
            raise _damaged(folder, f"{rec['name']} covers {mask.shape} rows, the segments hold {rows}")
        if int(mask.sum()) != int(rec["rows"]):
            raise _damaged(folder, f"{rec['name']} marks {int(mask.sum())} live rows, state.json says {rec['rows']}")
        if not mask.all():
            live = mask
        for key in ("files",) + (("ann",) if state.get("ann") else ()):
            rec = state[key]
            size = os.stat(folder / rec["name"]).st_size
            if size != rec["bytes"]:
                raise _damaged(folder, f"{rec['name']} has {size} bytes, state.json says {rec['bytes']}")
        if state.get("bm25") and not (folder / state["bm25"]["name"]).is_dir():
            raise FileNotFoundError(2, "missing", str(folder / state["bm25"]["name"]))
        return cls(folder, state, segments, live)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        if self._pin is not None:
            self._pin.release()
            self._pin = None

    # ---- tables ---------------------------------------------------------------------------
    @property
    def files_loaded(self) -> bool:
        return self._files is not None

    @property
    def files(self) -> dict:
        """{path: {sha256, size, segment, first, chunks}} for every file of the source, binary ones included."""
        if self._files is None:
            rec = self.state["files"]
            raw = (self.folder / rec["name"]).read_bytes()
            if hashlib.sha256(raw).hexdigest() != rec["sha256"]:
                raise _damaged(self.folder, f"{rec['name']} does not match its SHA-256 in state.json")
            self._files = json.loads(raw)
        return self._files

    @property
    def live_rows(self) -> int:
        return int(self.state["live"]["rows"])

    def segment_index(self, seg_id: str) -> int:
        for i, seg in enumerate(self.segments):
            if seg.id == seg_id:
                return i
        raise _damaged(self.folder, f"files table names segment {seg_id} that state.json does not list")

    def rows_of(self, paths: list[str] | tuple[str, ...]) -> np.ndarray:
        """Global rows of these files' live chunks, in file then chunk order."""
        files = self.files
        parts = []
        for p in paths:
            entry = files.get(p)
            if entry and entry.get("chunks"):
                start = int(self.starts[self.segment_index(entry["segment"])]) + int(entry["first"])
                parts.append(np.arange(start, start + int(entry["chunks"]), dtype=np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def locate(self, row: int) -> tuple[Segment, int]:
        s = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.segments[s], row - int(self.starts[s])

    def chunk(self, row: int) -> ChunkRef:
        seg, local = self.locate(int(row))
        rec = seg.manifest[local]
        return ChunkRef(int(row), seg.paths[int(rec["path"])], int(rec["chunk"]), int(rec["offset"]), int(rec["length"]),
                        seg.text(int(rec["text_start"]), int(rec["text_end"])))

    def path_chunk(self, row: int) -> tuple[str, int]:
        """(path, chunk) of a row without reading its text (the join, for tie-breaking)."""
        seg, local = self.locate(int(row))
        rec = seg.manifest[local]
        return seg.paths[int(rec["path"])], int(rec["chunk"])

    def texts(self, rows: np.ndarray) -> list[str]:
        return [self.chunk(int(r)).text for r in rows]

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """Rows' vectors, gathered from their segments (copies only what is asked for)."""
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        seg_of = np.searchsorted(self.starts, rows, side="right") - 1
        for s in np.unique(seg_of):
            pick = np.flatnonzero(seg_of == s)
            out[pick] = self.segments[s].vectors[rows[pick] - self.starts[s]]
        return out

    # ---- dense ----------------------------------------------------------------------------
    def dense_scores(self, q: np.ndarray, rows: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cosine) over the live rows, or over the given rows."""
        q = np.asarray(q, dtype=np.float32)
        if not self.live_rows:  # an index of nothing (empty or binary-only source): no dimension to match
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if rows is not None:
            return rows, self.vectors(rows) @ q if len(rows) else np.zeros(0, np.float32)
        if len(self.segments) == 1:
            scores = self.segments[0].vectors @ q
        else:
            scores = np.concatenate([s.vectors @ q for s in self.segments]) if self.segments else np.zeros(0, np.float32)
        if self.live is None:
            return np.arange(self.rows), scores
        keep = np.flatnonzero(self.live)
        return keep, scores[keep]

    def dense_top(self, q: np.ndarray, k: int, rows: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
        """Exact cosine top-k; ties broken by (path, chunk), so the order does not depend on the row layout."""
        cand, scores = self.dense_scores(q, rows)
        return top_k(cand, scores, k, self.path_chunk)

    # ---- ANN ------------------------------------------------------------------------------
    @property
    def has_ann(self) -> bool:
        return bool(self.state.get("ann"))

    def ann_top(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        from .ann import view

        if self._ann is None:
            self._ann = view(self.folder / self.state["ann"]["name"], self.state["ann"])
        k = min(k, self.live_rows)
        if k <= 0:
            return []
        keys, scores = self._ann.search(np.asarray(q, dtype=np.float32), k)
        return top_k(keys, scores, k, self.path_chunk)

    # ---- BM25 -----------------------------------------------------------------------------
    @property
    def bm25_loaded(self) -> bool:
        return self._bm25 is not None

    def load_bm25(self) -> None:
        """Map the BM25 arrays (first lexical search; bm25s loads with mmap)."""
        if self._bm25 is not None:
            return
        rec = self.state.get("bm25")
        if not rec:
            raise _damaged(self.folder, "it has no BM25 index")
        try:
            bm25 = load_bm25(self.folder / rec["name"], int(rec["docs"]))
        except Exception as exc:  # bm25s reading garbage fails in any of a dozen ways: all of them mean a damaged file
            raise _damaged(self.folder, f"{rec['name']} unreadable ({type(exc).__name__}: {str(exc)[:200]})") from exc
        rows = np.flatnonzero(self.live) if self.live is not None else np.arange(self.rows)
        if len(rows) != bm25.n:
            raise _damaged(self.folder, f"BM25 holds {bm25.n} documents for {len(rows)} live rows")
        self._bm25, self._bm25_rows = bm25, rows

    def bm25_scores(self, query: str, rows: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, BM25 score) over the live rows (IDF of the whole index), or restricted to the given rows."""
        self.load_bm25()
        try:
            scores = np.asarray(self._bm25.scores(query))
        except Exception as exc:  # arrays that load but disagree (indices past the vocabulary, ragged pointers)
            raise _damaged(self.folder, f"{self.state['bm25']['name']} unreadable ({type(exc).__name__}: {str(exc)[:200]})") from exc
        if scores.shape != (len(self._bm25_rows),) or not np.isfinite(scores).all():
            raise _damaged(self.folder, f"{self.state['bm25']['name']} gives {scores.shape[0] if scores.ndim else '?'} scores "
                                        f"for {len(self._bm25_rows)} live rows")
        if rows is None:
            return self._bm25_rows, scores
        pos = np.searchsorted(self._bm25_rows, rows)
        pos = np.minimum(pos, max(len(self._bm25_rows) - 1, 0))
        if len(rows) and not np.array_equal(self._bm25_rows[pos], rows):
            raise _damaged(self.folder, "a scoped row is not live")
        return rows, scores[pos] if len(rows) else np.zeros(0)

    def bm25_top(self, query: str, k: int, rows: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
        """Live rows matching at least one query term, best k first."""
        cand, scores = self.bm25_scores(query, rows)
        return top_k(cand, scores, k, self.path_chunk, positive=True)
