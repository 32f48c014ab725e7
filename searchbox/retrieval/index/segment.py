"""One immutable segment being written: chunk manifest and text blob, then vectors (embedded in batches, or handed in)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Optional, Protocol

import numpy as np

from ...errors import BackendError
from .store import MANIFEST_DTYPE, describe

EMBED_BATCH = 256  # chunks per encoder call: large enough to batch well, small enough to report progress every few seconds on a CPU


class Encoder(Protocol):
    identity: str

    def encode(self, texts: list[str], role: str = "passage") -> np.ndarray: ...


Progress = Callable[[str, int, int], None]  # (stage, done, total)


def save_npy(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())


def write_bytes(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


class SegmentWriter:
    """Collects files' chunks (manifest rows + text blob), then embeds them into a float32 .npy."""

    def __init__(self, staging: Path, seg_id: str, precomputed: bool = False):
        self.staging, self.id = staging, seg_id
        self._given: Optional[list[np.ndarray]] = [] if precomputed else None  # vectors handed in (compaction)
        self.paths: list[str] = []
        self.records: list[tuple] = []
        self.texts: list[str] = []
        self._blob = open(staging / f"{seg_id}.txt", "wb")
        self._pos = 0

    def add(self, path: str, chunks: list[tuple[int, str]]) -> tuple[int, int]:
        """Append one file's chunks; returns (first local row, count)."""
        first = len(self.records)
        if not chunks:
            return first, 0
        pid = len(self.paths)
        self.paths.append(path)
        for number, (offset, text) in enumerate(chunks):
            raw = text.encode("utf-8", errors="surrogatepass")
            self._blob.write(raw)
            self.records.append((pid, number, offset, len(text), self._pos, self._pos + len(raw)))
            self._pos += len(raw)
            self.texts.append(text)
        return first, len(chunks)

    def add_rows(self, path: str, chunks: list[tuple[int, int, int, str]], vectors: np.ndarray) -> tuple[int, int]:
        """Append chunks that already have vectors (compaction): [(chunk, offset, length, text)]."""
        first = len(self.records)
        pid = len(self.paths)
        self.paths.append(path)
        for number, offset, length, text in chunks:
            raw = text.encode("utf-8", errors="surrogatepass")
            self._blob.write(raw)
            self.records.append((pid, number, offset, length, self._pos, self._pos + len(raw)))
            self._pos += len(raw)
            self.texts.append(text)
        self._given.append(np.asarray(vectors, dtype=np.float32))
        return first, len(chunks)

    def finish(self, encoder: Optional[Encoder], dim: Optional[int], progress: Optional[Progress] = None) -> tuple[dict, int]:
        """Write vectors (embedding what has none), manifest and paths; returns (segment meta, dim)."""
        self._blob.flush()
        os.fsync(self._blob.fileno())
        self._blob.close()
        n = len(self.records)
        vec_path = self.staging / f"{self.id}.vec.npy"
        if self._given is not None:
            vectors = np.concatenate(self._given) if self._given else np.zeros((0, dim or 0), np.float32)
            dim = int(vectors.shape[1]) if n else int(dim or 0)
            save_npy(vec_path, vectors.reshape(n, dim))
        else:
            dim = self._embed_into(vec_path, encoder, dim, progress)
        manifest = np.array(self.records, dtype=MANIFEST_DTYPE) if n else np.zeros(0, dtype=MANIFEST_DTYPE)
        save_npy(self.staging / f"{self.id}.man.npy", manifest)
        write_bytes(self.staging / f"{self.id}.paths.json", json.dumps(self.paths).encode())
        files = {key: describe(self.staging / name) for key, name in (
            ("vectors", f"{self.id}.vec.npy"), ("manifest", f"{self.id}.man.npy"), ("text", f"{self.id}.txt"), ("paths", f"{self.id}.paths.json"))}
        return {"id": self.id, "rows": n, "files": files}, dim

    def _embed_into(self, path: Path, encoder: Encoder, dim: Optional[int], progress: Optional[Progress]) -> int:
        n = len(self.texts)
        out = None
        if progress:
            progress("embed", 0, n)  # the total is known before the first batch
        for start in range(0, n, EMBED_BATCH):
            batch = self.texts[start : start + EMBED_BATCH]
            vecs = check_vectors(encoder.encode(batch, "passage"), len(batch), dim)
            if out is None:
                dim = int(vecs.shape[1])
                out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
            out[start : start + len(batch)] = vecs
            if progress:
                progress("embed", start + len(batch), n)
        if out is None:
            save_npy(path, np.zeros((0, int(dim or 0)), dtype=np.float32))
            return int(dim or 0)
        out.flush()
        del out
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
        return int(dim)


def check_vectors(vecs, n: int, dim: Optional[int]) -> np.ndarray:
    """The encoder's answer as float32 [n, dim], or BackendError: garbage must never reach the index."""
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[0] != n or vecs.shape[1] == 0 or (dim and vecs.shape[1] != dim):
        raise BackendError(f"embedder returned shape {vecs.shape} for {n} texts" + (f" of dimension {dim}" if dim else ""))
    if not np.isfinite(vecs).all():
        raise BackendError("embedder returned non-finite vectors")
    return vecs
