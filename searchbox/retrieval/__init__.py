"""Retrieval over a dataroom: the persistent index of its content (or in-memory scopes), dense/BM25/hybrid search, reranking."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..config import IndexConfig, RetrievalConfig
from ..corpus.dataroom import list_files
from ..paths import cache_dir
from .cache import CachedEncoder, EmbeddingCache
from .corpus import Chunk, IndexCorpus, MemoryCorpus, rank
from .embedder import config_of, embedder_identity, identity_key, make_embedder
from .rerank import make_reranker

__all__ = ["Retrieval", "Chunk", "Timing", "ScopeError"]


class ScopeError(ValueError):
    """A `paths` entry names nothing in the dataroom: the model's mistake, shown to it."""


@dataclass
class Timing:
    """setup_s only grows, and only while something is being set up (embedder or reranker loading,
    index open or build, a scope's first embedding, BM25 building): a tool call's duration minus the
    growth of setup_s during it is the call's own time."""

    setup_s: float = 0.0
    scopes_built: int = 0
    searches: int = 0
    extra: dict = field(default_factory=dict)


class Retrieval:
    """One per run (or benchmark): holds the encoder, the reranker and the dataroom's corpus.

    Retrieval(cfg.retrieval, ws.dataroom) serves from the persistent index of the dataroom
    (IndexConfig() defaults: exact backend, under $SEARCHBOX_HOME/indexes); pass index=cfg.index to
    follow a run's config, content_hash=ws.sha256 to skip hashing the dataroom, encoder= to share one.
    """

    def __init__(self, cfg: RetrievalConfig, dataroom: Path, encoder: Optional[CachedEncoder] = None, *,
                 index: Optional[IndexConfig] = None, content_hash: Optional[str] = None):
        self.cfg = cfg
        self.root = Path(dataroom)
        self.index_cfg = index or IndexConfig()
        self.content_hash = content_hash
        self._encoder = encoder
        self._reranker = None
        self._corpus = None
        self._files: Optional[list[str]] = None
        self._setup_depth = 0
        self.index_info: dict = {}
        self.timing = Timing()

    # ---- setup accounting -----------------------------------------------------------------
    @contextlib.contextmanager
    def setup(self) -> Iterator[None]:
        """Time spent inside counts as setup; nested sections count once."""
        self._setup_depth += 1
        start = time.monotonic()
        try:
            yield
        finally:
            self._setup_depth -= 1
            if self._setup_depth == 0:
                self.timing.setup_s += time.monotonic() - start

    # ---- lazy parts -----------------------------------------------------------------------
    @property
    def encoder(self) -> CachedEncoder:
        if self._encoder is None:
            with self.setup():
                disk = EmbeddingCache(cache_dir("embeddings") / "vectors.sqlite") if self.cfg.cache else None
                embedder = make_embedder(self.cfg)
                if self.cfg.embedder == "local":
                    embedder.embed(["warm-up"], "query")  # first forward pass is slow: setup, not the first call's time
                self._encoder = CachedEncoder(embedder, disk)
        return self._encoder

    @property
    def reranker(self):
        if self._reranker is None:
            with self.setup():
                device = getattr(self.encoder.embedder, "device", "cpu") if self.cfg.reranker == "cross-encoder" else "cpu"
                self._reranker = make_reranker(self.cfg, device)
        return self._reranker

    @property
    def corpus(self):
        if self._corpus is None:
            with self.setup():
                self._corpus = self._open_index() if self.index_cfg.persistent else self._memory_corpus()
        return self._corpus

    def _chunking(self):
        from .index.source import Chunking

        return Chunking(self.cfg.chunk_chars, self.cfg.chunk_overlap)

    def _memory_corpus(self) -> MemoryCorpus:
        return MemoryCorpus(self.root, self._chunking(), lambda texts: self.encode(texts, "passage"), self.setup)

    def _open_index(self) -> IndexCorpus:
        from .index.encoders import record
        from .index.registry import open_index

        if self._encoder is not None:  # a shared encoder decides the vectors, whatever the config says
            key = self._encoder.identity
            rec = record(getattr(self._encoder.embedder, "config", config_of(self.cfg)), key)
        else:  # no model loading just to find the index: the identity comes from the config and model files
            key = identity_key(embedder_identity(self.cfg))
            rec = record(config_of(self.cfg), key)
        idx, self.index_info = open_index(self.root, key, rec, self._chunking(), lambda: self.encoder, root=self.index_cfg.root,
                                          content_hash=self.content_hash, ann=self.index_cfg.backend == "ann")
        return IndexCorpus(idx, use_ann=self.index_cfg.backend == "ann", on_setup=self.setup)

    def encode(self, texts: list[str], role: str = "passage") -> np.ndarray:
        return self.encoder.encode(texts, role)

    # ---- scopes ---------------------------------------------------------------------------
    def files(self) -> list[str]:
        """The dataroom's files (the corpus holds the same set): listed without building anything, so a
        `paths` mistake costs the model nothing but its error message."""
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
            p = str(raw).strip().lstrip("./")
            p = p[len("dataroom/"):] if p.startswith("dataroom/") else ("" if p == "dataroom" else p)
            p = p.rstrip("/")
            hits = files if not p else [f for f in files if f == p or f.startswith(p + "/")]
            if not hits:
                raise ScopeError(f"no file or folder {raw!r} in the dataroom")
            chosen.extend(hits)
        return tuple(dict.fromkeys(chosen))

    def _rows(self, paths: Optional[list[str]]) -> tuple[tuple[str, ...], Optional[np.ndarray]]:
        files = self.resolve_scope(paths)
        if not paths or len(files) == len(self.files()):
            return files, None  # the whole corpus: no mask
        return files, self.corpus.rows_of(files)

    # ---- search ---------------------------------------------------------------------------
    def dense_top(self, query: str, k: int, rows: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
        corpus = self.corpus
        q = self.encode([query], "query")[0]
        return corpus.dense_top(q, k, rows)

    def search(self, query: str, k: int = 8, paths: Optional[list[str]] = None, retriever: Optional[str] = None) -> dict:
        """{results: [{path, chunk, score, text}], scope_files, scope_chunks, retriever}."""
        retriever = retriever or self.cfg.retriever
        files, rows = self._rows(paths)
        corpus = self.corpus
        self.timing.searches += 1
        ranked = rank(corpus, query, k, retriever, lambda q: self.encode([q], "query")[0], rows)
        return {"results": [self._hit(corpus.chunk(i), s) for i, s in ranked],
                "scope_files": len(files), "scope_chunks": corpus.count(rows), "retriever": retriever}

    def answer(self, question: str, k: int = 5) -> dict:
        """Dense-retrieve max(20, 6k) chunks, rerank them to the k best."""
        corpus = self.corpus
        self.timing.searches += 1
        wide = self.dense_top(question, max(20, 6 * k))
        scores = self.reranker.score(question, [corpus.chunk(i).text for i, _ in wide])
        if scores is None:
            ranked = wide[:k]
        else:
            ranked = sorted(zip([i for i, _ in wide], scores), key=lambda x: -x[1])[:k]
        return {"results": [self._hit(corpus.chunk(i), s) for i, s in ranked], "candidates": len(wide),
                "reranker": self.reranker.name, "reranked": scores is not None}

    @staticmethod
    def _hit(chunk: Chunk, score: float) -> dict:
        return {"path": f"dataroom/{chunk.path}", "chunk": chunk.index, "score": round(score, 4), "text": chunk.text}

    def stats(self, before: Optional[dict] = None) -> dict:
        """What run_meta records about retrieval; `before`: what earlier processes of the same run recorded (a resumed
        run adds to it, so a search or an index build before a pause is still counted)."""
        before = before or {}
        scopes = self._corpus.scopes_built if isinstance(self._corpus, MemoryCorpus) else int(bool(self.index_info.get("built")))
        out = {"setup_s": round(self.timing.setup_s + float(before.get("setup_s") or 0), 3),
               "scopes_built": scopes + int(before.get("scopes_built") or 0), "searches": self.timing.searches + int(before.get("searches") or 0),
               "embedder": self.cfg.embedder, "embed_model": self.cfg.embed_model, "retriever": self.cfg.retriever,
               "reranker": self.cfg.reranker if self._reranker is None else self._reranker.name,
               "index": {**(before.get("index") or {}), "persistent": self.index_cfg.persistent, "backend": self.index_cfg.backend,
                         **self.index_info}}
        if (before.get("index") or {}).get("built") and not self.index_info.get("built"):  # built by an earlier process
            out["index"].update(built=True, embedded_chunks=before["index"].get("embedded_chunks"))
        if self._encoder is not None:
            earlier = before.get("cache") or {}
            out["cache"] = {k: v + int(earlier.get(k) or 0) if isinstance(v, int) else v for k, v in self._encoder.stats.items()}
            out["device"] = getattr(self._encoder.embedder, "device", None)
        return out
