"""Lexical retrieval (BM25 via bm25s) and reciprocal-rank fusion with a dense ranking."""

from __future__ import annotations

import numpy as np


class BM25Index:
    """BM25 over a fixed list of texts; `top` returns (indices, scores) best first."""

    def __init__(self, texts: list[str]):
        import bm25s

        self._bm25s = bm25s
        self.n = len(texts)
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def top(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.n)
        if k == 0:
            return np.array([], dtype=int), np.array([])
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:  # nothing in the query survives tokenisation
            return np.arange(k), np.zeros(k)
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return docs[0].astype(int), scores[0]


def rrf(rankings: list[list[int]], k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: sum of 1/(k + rank) over the rankings, best first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, idx in enumerate(ranking):
            scores[idx] = scores.get(idx, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
