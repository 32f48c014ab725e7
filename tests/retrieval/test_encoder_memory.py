"""An index build's encoder holds a bounded number of vectors in memory (issue 37.5): a 1M-chunk build used to keep
every passage's vector in CachedEncoder.memory (about 1.2 KB each, over 1 GB at 1M chunks)."""

import numpy as np

from searchbox.retrieval.cache import CachedEncoder
from searchbox.retrieval.embedder import HashEmbedder


def test_memory_of_the_encoder_is_bounded_and_answers_stay_the_same(monkeypatch):
    enc = CachedEncoder(HashEmbedder(16), None)
    monkeypatch.setattr(CachedEncoder, "MEMORY_MAX", 50)
    texts = [f"text number {i} about tides" for i in range(400)]
    first = np.concatenate([enc.encode(texts[i:i + 64]) for i in range(0, 400, 64)])
    assert len(enc.memory) <= 50 + 64
    again = enc.encode(texts[:100])
    assert np.array_equal(again, first[:100]) and np.array_equal(enc.encode(["q"], "query"), enc.encode(["q"], "query"))
