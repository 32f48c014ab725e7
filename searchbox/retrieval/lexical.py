"""Lexical retrieval (BM25 via bm25s, persisted with its save/load), top-k ranking, and reciprocal-rank fusion."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Hashable, Optional

import numpy as np

STOPWORDS = "en"


def _bm25s():
    import bm25s

    return bm25s


class BM25Index:
    """BM25 over a fixed list of texts: `scores(query)` for every text, `top(query, k, rows)` best first."""

    def __init__(self, texts: Optional[list[str]] = None, retriever=None, n: int = 0):
        bm25s = _bm25s()
        if retriever is None:
            texts = texts or []
            n = len(texts)
            retriever = bm25s.BM25()
            if texts:
                retriever.index(bm25s.tokenize(texts, stopwords=STOPWORDS, show_progress=False), show_progress=False)
        self.retriever = retriever
        self.n = n

    def save(self, folder: Path) -> None:
        if self.n:
            self.retriever.save(str(folder), show_progress=False)
        else:
            Path(folder).mkdir(parents=True, exist_ok=True)

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every text for the query; zeros when nothing in it survives tokenisation."""
        if not self.n:
            return np.zeros(0, dtype=np.float32)
        tokens = _bm25s().tokenize([query], stopwords=STOPWORDS, show_progress=False, return_ids=False)[0]
        if not tokens:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.retriever.get_scores(tokens), dtype=np.float32)

    def top(self, query: str, k: int, rows: Optional[np.ndarray] = None, key: Optional[Callable[[int], Hashable]] = None) -> list[tuple[int, float]]:
        """Texts matching at least one query term, best k first (optionally only among `rows`)."""
        scores = self.scores(query)
        cand = np.arange(self.n) if rows is None else np.asarray(rows, dtype=np.int64)
        return top_k(cand, scores[cand] if len(cand) else scores[:0], k, key, positive=True)


def load_bm25(folder: Path, n: int) -> BM25Index:
    """A saved BM25Index, its arrays memory-mapped."""
    if not n:
        return BM25Index([])
    retriever = _bm25s().BM25.load(str(folder), mmap=True, show_progress=False)
    return BM25Index(retriever=retriever, n=n)


def top_k(cand: np.ndarray, scores: np.ndarray, k: int, key: Optional[Callable[[int], Hashable]] = None,
          positive: bool = False) -> list[tuple[int, float]]:
    """[(candidate, score)] best k first. Ties at the cut are settled by key(candidate) (default: the
    candidate itself), so equal inputs give equal rankings whatever the storage order."""
    key = key or (lambda c: c)
    scores = np.asarray(scores)
    if positive:
        keep = np.flatnonzero(scores > 0)
        cand, scores = np.asarray(cand)[keep], scores[keep]
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return []
    if k < n:
        kth = np.partition(-scores, k - 1)[k - 1]
        sel = np.flatnonzero(-scores <= kth)  # everything tied with the k-th goes to the tie-break
        if len(sel) > 4 * k + 64:  # a degenerate flood of equal scores: keep the cost bounded
            sel = np.argpartition(-scores, k - 1)[:k]
    else:
        sel = np.arange(n)
    picked = [(int(cand[i]), float(scores[i])) for i in sel]
    return sorted(picked, key=lambda cs: (-cs[1], key(cs[0])))[:k]


def rrf(rankings: list[list[int]], k: int = 60, key: Optional[Callable[[int], Hashable]] = None) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: sum of 1/(k + rank) over the rankings, best first (ties by key(item))."""
    key = key or (lambda c: c)
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, idx in enumerate(ranking):
            scores[idx] = scores.get(idx, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], key(kv[0])))
