"""Retrieval over a dataroom: lazy chunking and embedding of scopes, dense/BM25/hybrid search, reranking."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..config import RetrievalConfig
from ..dataroom import chunk_text, list_files, read_text
from ..paths import cache_dir
from .cache import CachedEncoder, EmbeddingCache
from .embedder import make_embedder
from .lexical import BM25Index, rrf
from .rerank import make_reranker

__all__ = ["Retrieval", "Chunk"]


@dataclass(frozen=True)
class Chunk:
    path: str  # relative to the dataroom
    index: int  # chunk number within the file
    offset: int  # character offset
    text: str


@dataclass
class Scope:
    """A set of files, chunked; its matrix and BM25 index are built on first use."""

    files: tuple[str, ...]
    chunks: list[Chunk]
    matrix: Optional[np.ndarray] = None
    bm25: Optional[BM25Index] = None


@dataclass
class Timing:
    setup_s: float = 0.0  # time spent embedding or loading scopes
    scopes_built: int = 0
    searches: int = 0
    extra: dict = field(default_factory=dict)


class Retrieval:
    """One per run (or benchmark): holds the encoder, reranker and built scopes."""

    def __init__(self, cfg: RetrievalConfig, dataroom: Path, encoder: Optional[CachedEncoder] = None):
        self.cfg = cfg
        self.root = Path(dataroom)
        self._encoder = encoder
        self._reranker = None
        self._files: Optional[list[str]] = None
        self._chunks: dict[str, list[Chunk]] = {}
        self._scopes: dict[tuple[str, ...], Scope] = {}
        self.timing = Timing()

    # ---- lazy parts -----------------------------------------------------------------------
    @property
    def encoder(self) -> CachedEncoder:
        if self._encoder is None:
            disk = EmbeddingCache(cache_dir("embeddings") / "vectors.sqlite") if self.cfg.cache else None
            self._encoder = CachedEncoder(make_embedder(self.cfg), disk)
        return self._encoder

    @property
    def reranker(self):
        if self._reranker is None:
            self._reranker = make_reranker(self.cfg, getattr(self.encoder.embedder, "device", "cpu"))
        return self._reranker

    def encode(self, texts: list[str], role: str = "passage") -> np.ndarray:
        return self.encoder.encode(texts, role)

    # ---- scopes ---------------------------------------------------------------------------
    def files(self) -> list[str]:
        if self._files is None:
            self._files = list_files(self.root)
        return self._files

    def resolve_scope(self, paths: Optional[list[str]]) -> tuple[str, ...]:
        """All files, or those named (files or folders, with or without a dataroom/ prefix)."""
        files = self.files()
        if not paths:
            return tuple(files)
        chosen: list[str] = []
        for raw in paths:
            p = raw.strip().lstrip("./")
            p = p[len("dataroom/"):] if p.startswith("dataroom/") else ("" if p == "dataroom" else p)
            p = p.rstrip("/")
            hits = files if not p else [f for f in files if f == p or f.startswith(p + "/")]
            if not hits:
                raise ValueError(f"no file or folder {raw!r} in the dataroom")
            chosen.extend(hits)
        return tuple(dict.fromkeys(chosen))

    def chunks_of(self, path: str) -> list[Chunk]:
        if path not in self._chunks:
            with open(self.root / path, "rb") as fh:
                if b"\x00" in fh.read(8192):  # binary: nothing to embed
                    self._chunks[path] = []
                    return []
            text = read_text(self.root / path)
            self._chunks[path] = [Chunk(path, i, off, t) for i, (off, t) in enumerate(chunk_text(text, self.cfg.chunk_chars, self.cfg.chunk_overlap))]
        return self._chunks[path]

    def scope(self, paths: Optional[list[str]] = None) -> Scope:
        files = self.resolve_scope(paths)
        if files not in self._scopes:
            chunks = [c for f in files for c in self.chunks_of(f)]
            self._scopes[files] = Scope(files, chunks)
        return self._scopes[files]

    def dense_matrix(self, scope: Scope) -> np.ndarray:
        if scope.matrix is None:
            start = time.monotonic()
            scope.matrix = self.encode([c.text for c in scope.chunks], "passage") if scope.chunks else np.zeros((0, 1), np.float32)
            self.timing.setup_s += time.monotonic() - start
            self.timing.scopes_built += 1
        return scope.matrix

    def bm25(self, scope: Scope) -> BM25Index:
        if scope.bm25 is None:
            start = time.monotonic()
            scope.bm25 = BM25Index([c.text for c in scope.chunks])
            self.timing.setup_s += time.monotonic() - start
        return scope.bm25

    # ---- search ---------------------------------------------------------------------------
    def dense_top(self, scope: Scope, query: str, k: int) -> list[tuple[int, float]]:
        matrix = self.dense_matrix(scope)
        if not len(scope.chunks):
            return []
        q = self.encode([query], "query")[0]
        scores = matrix @ q
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in top]

    def search(self, query: str, k: int = 8, paths: Optional[list[str]] = None, retriever: Optional[str] = None) -> dict:
        """{results: [{path, chunk, score, text}], scope_files, scope_chunks, retriever}."""
        retriever = retriever or self.cfg.retriever
        scope = self.scope(paths)
        self.timing.searches += 1
        if retriever == "dense":
            ranked = self.dense_top(scope, query, k)
        elif retriever == "bm25":
            idx, scores = self.bm25(scope).top(query, k)
            ranked = [(int(i), float(s)) for i, s in zip(idx, scores)]
        else:
            wide = max(50, 4 * k)
            dense = [i for i, _ in self.dense_top(scope, query, wide)]
            lexical = [int(i) for i in self.bm25(scope).top(query, wide)[0]]
            ranked = rrf([dense, lexical])[:k]
        return {
            "results": [self._hit(scope.chunks[i], s) for i, s in ranked],
            "scope_files": len(scope.files), "scope_chunks": len(scope.chunks), "retriever": retriever,
        }

    def answer(self, question: str, k: int = 5) -> dict:
        """Dense-retrieve max(20, 6k) chunks, rerank them to the k best."""
        scope = self.scope(None)
        wide = self.dense_top(scope, question, max(20, 6 * k))
        scores = self.reranker.score(question, [scope.chunks[i].text for i, _ in wide])
        if scores is None:
            ranked = wide[:k]
        else:
            ranked = sorted(zip([i for i, _ in wide], scores), key=lambda x: -x[1])[:k]
        return {"results": [self._hit(scope.chunks[i], s) for i, s in ranked], "candidates": len(wide),
                "reranker": self.reranker.name, "reranked": scores is not None}

    @staticmethod
    def _hit(chunk: Chunk, score: float) -> dict:
        return {"path": f"dataroom/{chunk.path}", "chunk": chunk.index, "score": round(score, 4), "text": chunk.text}

    def stats(self) -> dict:
        """What run_meta records about retrieval."""
        out = {"setup_s": round(self.timing.setup_s, 3), "scopes_built": self.timing.scopes_built, "searches": self.timing.searches,
               "embedder": self.cfg.embedder, "embed_model": self.cfg.embed_model, "retriever": self.cfg.retriever,
               "reranker": self.cfg.reranker if self._reranker is None else self._reranker.name}
        if self._encoder is not None:
            out["cache"] = dict(self._encoder.stats)
            out["device"] = getattr(self._encoder.embedder, "device", None)
        return out
