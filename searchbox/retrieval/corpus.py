"""The chunks a Retrieval searches: a persistent index (mmap'd, shared by runs) or today's in-memory, lazily embedded scopes."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..corpus import safefs
from ..corpus.dataroom import list_files
from ..errors import BackendError
from .lexical import BM25Index, rrf, top_k

RETRIEVERS = ("dense", "bm25", "hybrid")


def rank(corpus, query: str, k: int, retriever: str, embed_query: Callable[[str], np.ndarray],
         rows: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
    """[(row, score)] best first: dense cosine, BM25, or their reciprocal-rank fusion over a wider pool."""
    if retriever == "dense":
        return corpus.dense_top(embed_query(query), k, rows)
    if retriever == "bm25":
        return corpus.bm25_top(query, k, rows)
    if retriever != "hybrid":
        raise ValueError(f"unknown retriever {retriever!r}; expected one of {', '.join(RETRIEVERS)}")
    wide = max(50, 4 * k)
    dense = [i for i, _ in corpus.dense_top(embed_query(query), wide, rows)]
    lexical = [i for i, _ in corpus.bm25_top(query, wide, rows)]
    return rrf([dense, lexical], key=corpus.key)[:k]


@dataclass(frozen=True)
class Chunk:
    path: str  # relative to the dataroom
    index: int  # chunk number within the file
    offset: int  # character offset
    text: str


class IndexCorpus:
    """Rows of a persistent index; exact search over mmap'd vectors, or the ANN graph for whole-corpus queries."""

    def __init__(self, index, use_ann: bool = False, on_setup: Optional[Callable] = None):
        self.index = index
        self.use_ann = use_ann and index.has_ann
        self._setup = on_setup or contextlib.nullcontext  # first loads of lazy tables count as setup

    def files(self) -> list[str]:
        return sorted(self.index.files)

    def rows_of(self, files: tuple[str, ...]) -> np.ndarray:
        if not self.index.files_loaded:
            with self._setup():
                self.index.files
        return self.index.rows_of(files)

    def count(self, rows: Optional[np.ndarray]) -> int:
        return self.index.live_rows if rows is None else len(rows)

    def dense_top(self, q: np.ndarray, k: int, rows: Optional[np.ndarray]) -> list[tuple[int, float]]:
        if rows is None and self.use_ann:
            return self.index.ann_top(q, k)
        return self.index.dense_top(q, k, rows)

    def bm25_top(self, query: str, k: int, rows: Optional[np.ndarray]) -> list[tuple[int, float]]:
        if not self.index.bm25_loaded:
            with self._setup():
                self.index.load_bm25()
        return self.index.bm25_top(query, k, rows)

    def key(self, row: int) -> tuple[str, int]:
        return self.index.path_chunk(row)

    def chunk(self, row: int) -> Chunk:
        ref = self.index.chunk(row)
        return Chunk(ref.path, ref.chunk, ref.offset, ref.text)


class MemoryCorpus:
    """Every file chunked on first use; vectors embedded per scope when a search first needs them."""

    def __init__(self, root: Path, chunking, encode: Callable[[list[str]], np.ndarray], on_setup: Callable):
        from .index.source import SourceFile

        self._setup = on_setup
        self._encode = encode
        self.chunks: list[Chunk] = []
        self._rows: dict[str, tuple[int, int]] = {}
        self._files = list_files(root)
        for path in self._files:
            data = safefs.read_bytes(root, path, cap=1 << 40)
            if data is None:
                raise BackendError(f"dataroom file {path} is no longer a readable regular file")
            pieces = SourceFile(path, len(data), "", data).chunks(chunking)
            self._rows[path] = (len(self.chunks), len(pieces))
            self.chunks.extend(Chunk(path, i, off, text) for i, (off, text) in enumerate(pieces))
        self._vectors: Optional[np.ndarray] = None
        self._have = np.zeros(len(self.chunks), dtype=bool)
        self._bm25: Optional[BM25Index] = None
        self.scopes_built = 0

    def files(self) -> list[str]:
        return list(self._files)

    def rows_of(self, files: tuple[str, ...]) -> np.ndarray:
        parts = [np.arange(first, first + n) for first, n in (self._rows[f] for f in files) if n]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def count(self, rows: Optional[np.ndarray]) -> int:
        return len(self.chunks) if rows is None else len(rows)

    def _ensure(self, rows: np.ndarray) -> None:
        missing = rows[~self._have[rows]]
        if not len(missing):
            return
        with self._setup():  # a scope's first embedding is setup, not tool time
            vecs = self._encode([self.chunks[int(r)].text for r in missing])
            if self._vectors is None:
                self._vectors = np.zeros((len(self.chunks), vecs.shape[1]), dtype=np.float32)
            self._vectors[missing] = vecs
            self._have[missing] = True
            self.scopes_built += 1

    def dense_top(self, q: np.ndarray, k: int, rows: Optional[np.ndarray]) -> list[tuple[int, float]]:
        cand = np.arange(len(self.chunks)) if rows is None else rows
        if not len(cand):
            return []
        self._ensure(cand)
        return top_k(cand, self._vectors[cand] @ q, k, self.key)

    def bm25_top(self, query: str, k: int, rows: Optional[np.ndarray]) -> list[tuple[int, float]]:
        if self._bm25 is None:
            with self._setup():
                self._bm25 = BM25Index([c.text for c in self.chunks])
        return self._bm25.top(query, k, rows, self.key)

    def key(self, row: int) -> tuple[str, int]:
        c = self.chunks[row]
        return c.path, c.index

    def chunk(self, row: int) -> Chunk:
        return self.chunks[row]
