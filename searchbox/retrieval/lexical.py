"""Lexical retrieval (BM25 via bm25s, persisted with its save/load), top-k ranking, and reciprocal-rank fusion."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Hashable, Iterable, Optional

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


# bm25s's defaults (BM25(): the Lucene variant), which `build_bm25` reproduces score for score.
K1, B = 1.5, 0.75
BATCH_TEXTS = 4096  # texts tokenised at once by build_bm25: its memory holds one batch of token lists, not the corpus's


def build_bm25(texts: Iterable[str], progress: Optional[Callable[[int], None]] = None) -> BM25Index:
    """BM25 over texts that arrive one at a time (a million-chunk index's texts are never all in memory): the same
    scores as BM25Index(list(texts)) (bm25s's Lucene BM25, k1 1.5, b 0.75, float32), built in bounded memory.

    bm25s.index wants every document's token list at once (Python lists of ints: about 7 GB at a million chunks);
    this tokenises BATCH_TEXTS texts at a time with bm25s's own tokenizer and keeps one int32 (term, count) pair per
    distinct term of a document, then writes bm25s's score matrix (CSC: a column per term) itself, its scores
    computed a slice at a time. `progress(done)` hears the texts read so far."""
    bm25s = _bm25s()
    vocab: dict[str, int] = {}
    terms, counts, widths = [], [], []  # per batch: term ids and counts of each (document, term); distinct terms per document
    lengths: list[np.ndarray] = []  # per batch: tokens per document (BM25's document length)
    batch: list[str] = []
    done = 0

    def flush() -> None:
        nonlocal done
        ids_of, tf_of, width, length = [], [], [], []
        for tokens in bm25s.tokenize(batch, stopwords=STOPWORDS, show_progress=False, return_ids=False):
            ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.int32, count=len(tokens))
            uniq, tf = np.unique(ids, return_counts=True)
            ids_of.append(uniq)
            tf_of.append(tf.astype(np.int32))
            width.append(len(uniq))
            length.append(len(tokens))
        terms.append(np.concatenate(ids_of) if ids_of else np.zeros(0, np.int32))
        counts.append(np.concatenate(tf_of) if tf_of else np.zeros(0, np.int32))
        widths.append(np.asarray(width, dtype=np.int64))
        lengths.append(np.asarray(length, dtype=np.float64))
        done += len(batch)
        batch.clear()
        if progress is not None:
            progress(done)

    for text in texts:
        batch.append(text)
        if len(batch) >= BATCH_TEXTS:
            flush()
    if batch:
        flush()
    dl = np.concatenate(lengths) if lengths else np.zeros(0)
    n = len(dl)
    if not n:
        return BM25Index([])
    voc, tf = np.concatenate(terms), np.concatenate(counts)
    del terms, counts
    n_vocab = len(vocab)
    df = np.bincount(voc, minlength=n_vocab)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)  # bm25s: float32 of math.log's float64
    scale = K1 * ((1 - B) + B * dl / dl.mean())  # bm25s: k1 * ((1 - b) + b * l_d / l_avg), a float64 per document
    order = np.argsort(voc, kind="stable")  # column (term) order; documents stay ascending within a column
    docs = np.repeat(np.arange(n, dtype=np.int32), np.concatenate(widths))[order]
    data = np.empty(len(order), dtype=np.float32)
    step = 1 << 22  # entries scored at once: the float64 intermediates stay a few tens of MB
    for start in range(0, len(order), step):
        part = order[start : start + step]
        t = tf[part]
        # bm25s: idf (float32) * tf / (scale + tf), float64 until it is stored as float32
        data[start : start + step] = idf[voc[part]] * (t / (scale[docs[start : start + step]] + t))
    del order, voc, tf
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    retriever = bm25s.BM25()
    retriever.scores = {"data": data, "indices": docs, "indptr": indptr, "num_docs": n}
    vocab[""] = n_vocab  # bm25s adds the empty token past the matrix's columns, as index() does
    retriever.vocab_dict = vocab
    retriever.unique_token_ids_set = set(vocab.values())
    retriever.nonoccurrence_array = None
    return BM25Index(retriever=retriever, n=n)


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
