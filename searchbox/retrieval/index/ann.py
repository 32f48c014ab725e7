"""Approximate nearest neighbours over an index's rows with usearch (HNSW): built once, served memory-mapped.

Why usearch (see README): it serves a saved graph straight from disk (`view=True`, mmap, no load
time, pages shared by every process), removes keys in place (a refresh drops superseded rows and
adds a delta without a rebuild; faiss' HNSW cannot remove), stores f16 to halve memory, and is a
2 MB wheel for every platform; hnswlib has no wheel here and no mmap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...errors import BackendError


@dataclass(frozen=True)
class AnnParams:
    dtype: str = "f16"  # storage: f16 halves memory at no measured recall cost on normalised vectors
    connectivity: int = 16  # HNSW M
    expansion_add: int = 128  # efConstruction
    expansion_search: int = 64  # ef at query time


def _usearch():
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise BackendError(f"index.backend=ann needs usearch (pip install usearch): {exc}") from exc
    return Index


def new(dim: int, params: AnnParams):
    return _usearch()(ndim=dim, metric="cos", dtype=params.dtype, connectivity=params.connectivity,
                      expansion_add=params.expansion_add, expansion_search=params.expansion_search)


def add(graph, keys: np.ndarray, vectors: np.ndarray, threads: int = 0) -> None:
    if len(keys):
        graph.add(np.asarray(keys, dtype=np.uint64), np.ascontiguousarray(vectors, dtype=np.float32), threads=threads)


def build(vectors_by_rows, dim: int, params: AnnParams, batch: int = 65536):
    """A graph over (rows, vectors) batches: an iterable of (np.ndarray rows, np.ndarray vectors)."""
    graph = new(dim, params)
    for rows, vecs in vectors_by_rows:
        add(graph, rows, vecs)
    return graph


def load(path: Path, params: AnnParams):
    """A saved graph loaded into memory, to be modified (refresh)."""
    graph = new(0, params)
    graph.load(str(path))
    return graph


def save(graph, path: Path) -> dict:
    graph.save(str(path))
    return {"rows": len(graph), **asdict(AnnParams(dtype=str(graph.dtype).split(".")[-1].lower(), connectivity=graph.connectivity,
                                                   expansion_add=graph.expansion_add, expansion_search=graph.expansion_search))}


class View:
    """A saved graph served from disk (mmap): search(q, k) -> (rows, cosine)."""

    def __init__(self, path: Path, meta: dict):
        try:
            self.graph = _usearch().restore(str(path), view=True)
        except (RuntimeError, ValueError) as exc:
            raise BackendError(f"ANN graph {path} unreadable: {exc}") from exc
        if self.graph is None or len(self.graph) != int(meta["rows"]):
            raise BackendError(f"ANN graph {path} holds {len(self.graph) if self.graph is not None else 0} rows, state.json says {meta['rows']}")
        self.graph.expansion_search = int(meta.get("expansion_search", AnnParams.expansion_search))

    def search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        found = self.graph.search(q, k)
        return found.keys.astype(np.int64), (1.0 - found.distances).astype(np.float32)


def view(path: Path, meta: dict) -> View:
    return View(path, meta)
