"""BM25 built from streamed texts (retrieval.lexical.build_bm25, issue 37): the scores of bm25s's own index, score for
score, in memory that holds one batch of token lists; the index build reports it, and its ANN graph, as steps."""

from __future__ import annotations

import io
import random
import shutil

import numpy as np

from searchbox.retrieval import lexical
from searchbox.retrieval.index.ann import AnnParams
from searchbox.retrieval.index.console import Console
from searchbox.retrieval.index.progress import reporting
from searchbox.retrieval.index.store import Index
from tests.retrieval.test_index import _build, corpus_dir  # noqa: F401 (a fixture)

QUERIES = ["alpha beta", "pi3 rho", "nothing here", "the", "kappa kappa lambda7", "", "ALPHA, Beta!"]


def _texts(n: int) -> list[str]:
    rng = random.Random(7)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau the of and".split()
    out = [" ".join(rng.choice(words) + (str(rng.randint(0, 50)) if rng.random() < 0.3 else "") for _ in range(rng.randint(0, 40)))
           for _ in range(n)]
    out[3], out[4] = "", "the of and"  # a document with no tokens, one with stopwords only
    return out


def test_streamed_bm25_scores_as_bm25s_does_across_batches(monkeypatch, tmp_path):
    monkeypatch.setattr(lexical, "BATCH_TEXTS", 97)  # many batches, one cut mid-vocabulary
    texts = _texts(2000)
    whole, seen = lexical.BM25Index(texts), []
    streamed = lexical.build_bm25(iter(texts), progress=seen.append)
    assert streamed.n == whole.n == 2000
    for query in QUERIES:
        assert np.array_equal(streamed.scores(query), whole.scores(query)), query  # bit for bit, not merely close
        assert streamed.top(query, 10) == whole.top(query, 10)
    assert seen[-1] == 2000 and seen == sorted(seen) and len(seen) == -(-2000 // 97)
    streamed.save(tmp_path / "bm25")
    loaded = lexical.load_bm25(tmp_path / "bm25", streamed.n)  # bm25s reads what build_bm25 wrote
    assert np.array_equal(loaded.scores("alpha beta"), whole.scores("alpha beta"))
    assert lexical.build_bm25(iter([])).n == 0 and len(lexical.build_bm25(iter([])).scores("x")) == 0


def test_an_index_build_reports_bm25_and_ann_as_steps(tmp_path, corpus_dir):  # noqa: F811
    heard, log = [], io.StringIO()
    ticks = iter(range(0, 10**6, 2))  # a slow machine: every report 2 s after the last, so each step earns its line
    console = Console("the test corpus", stream=log, tty=False, every_s=0.0, clock=lambda: float(next(ticks)))
    with reporting(lambda *event: heard.append(event)), reporting(console):
        report, _ = _build(corpus_dir, tmp_path / "idx", ann=AnnParams())
    rows = Index.open(tmp_path / "idx").live_rows
    stages = [stage for stage, _, _ in heard]
    assert stages.index("bm25") > max(i for i, s in enumerate(stages) if s == "embed")  # after the embedding
    assert [e for e in heard if e[0] == "bm25"][-1] == ("bm25", rows, rows)
    assert [e for e in heard if e[0] == "ann"][-1] == ("ann", rows, rows)
    said = log.getvalue()
    assert f"BM25 of the test corpus: {rows:,} chunks in" in said and f"the ANN graph of the test corpus: {rows:,} chunks in" in said
