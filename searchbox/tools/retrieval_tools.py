"""The dataroom tools of the `tools` axis: high tier (search_dataroom, answer_question) and low-tier primitives."""

from __future__ import annotations

import json
from typing import Optional

import numpy as np

from .builtins import rel, resolve
from .context import ToolContext, ToolError, ToolResult

MAX_TEXTS = 512
MAX_K = 100  # results per search: more would only be cut by the output cap

# Errors of the model's arguments are ToolErrors (it reads them and can retry); a failing backend
# (embedder, reranker, API, index) raises searchbox.errors.BackendError, which these tools let
# through so that the run stops as tool_error instead of the model carrying on without the tool.


def _retrieval(ctx: ToolContext):
    if ctx.retrieval is None:
        raise ToolError("retrieval is not configured for this run")
    return ctx.retrieval


def _texts(texts: list[str], what: str = "texts") -> list[str]:
    if not texts:
        raise ToolError(f"{what} must not be empty")
    if len(texts) > MAX_TEXTS:
        raise ToolError(f"at most {MAX_TEXTS} {what} per call")
    return [str(t) for t in texts]


def _query(text, what: str = "query") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ToolError(f"{what} must be a non-empty string")
    return text


def _k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ToolError(f"k must be a positive integer, got {k!r}")
    return min(k, MAX_K)


def render_results(out: dict) -> str:
    """The text the model reads of a search: the result as JSON."""
    return json.dumps(out, ensure_ascii=False)


def _with_shown(ctx: ToolContext, out: dict) -> ToolResult:
    """The search result as text, and as data with `shown`: how many results the model saw whole under the output cap."""
    text, cap = render_results(out), ctx.harness.output_cap_chars
    whole = len(out["results"])
    if len(text) > cap:
        whole = next(i for i in range(len(out["results"]) + 1)
                     if i == len(out["results"]) or len(render_results({**out, "results": out["results"][: i + 1]})) > cap)
    return ToolResult(text, {**out, "shown": whole})


def search_dataroom(ctx: ToolContext, query: str, k: int = 8, paths: Optional[list[str]] = None) -> ToolResult:
    """Dense search over the dataroom; data: {results: [{path, chunk, score, text}], scope_files, scope_chunks, shown}."""
    from ..retrieval import ScopeError

    fixed = _retrieval(ctx).cfg.search_k  # retrieval.search_k: the model is offered no k, and gets this many
    query, k = _query(query), (fixed if fixed is not None else _k(k))
    if paths is not None and (not isinstance(paths, list) or not all(isinstance(p, str) for p in paths)):
        raise ToolError("paths must be a list of file or folder names")
    try:
        out = _retrieval(ctx).search(query, k, paths)
    except ScopeError as exc:
        raise ToolError(str(exc)) from exc
    for hit in out["results"]:
        ctx.touch(hit["path"])
    return _with_shown(ctx, out)


def answer_question(ctx: ToolContext, question: str, k: int = 5) -> ToolResult:
    """Dense retrieval of a wide set, reranked to the k best; data as search_dataroom's."""
    out = _retrieval(ctx).answer(_query(question, "question"), _k(k))
    for hit in out["results"]:
        ctx.touch(hit["path"])
    return _with_shown(ctx, out)


def embed_texts(ctx: ToolContext, texts: list[str], role: str = "passage", out: str = "embeddings.jsonl") -> dict:
    texts = _texts(texts)
    target = resolve(ctx, out, writing=True)
    vectors = _retrieval(ctx).encode(texts, role)
    target.parent.mkdir(parents=True, exist_ok=True)
    start = 0
    if target.is_file():
        start = sum(1 for _ in target.open("rb"))
    with target.open("a", encoding="utf-8") as fh:
        for i, (text, vec) in enumerate(zip(texts, vectors)):
            fh.write(json.dumps({"i": start + i, "text": text, "role": role, "dim": int(vec.shape[0]),
                                 "embedding": [round(float(x), 6) for x in vec]}) + "\n")
    return {"path": rel(ctx, target), "count": len(texts), "dim": int(vectors.shape[1]), "role": role}


def rerank(ctx: ToolContext, query: str, documents: list[str], top_n: Optional[int] = None) -> dict:
    query, documents = _query(query), _texts(documents, "documents")
    r = _retrieval(ctx)
    scores = r.reranker.score(query, documents)
    scorer = r.reranker.name
    if scores is None:  # no cross-encoder configured: score with the embedder, and say so
        q = r.encode([query], "query")[0]
        scores = (r.encode(documents, "passage") @ q).tolist()
        scorer = "embedding-cosine"
    order = sorted(range(len(documents)), key=lambda i: -scores[i])[: top_n or len(documents)]
    return {"results": [{"index": i, "score": round(float(scores[i]), 4), "text": documents[i]} for i in order], "scorer": scorer}


def similarity(ctx: ToolContext, a: list[str], b: list[str]) -> dict:
    a, b = _texts(a, "a"), _texts(b, "b")
    r = _retrieval(ctx)
    if len(a) == len(b):
        va, vb = r.encode(a, "passage"), r.encode(b, "passage")
        return {"mode": "pairwise", "similarities": [round(float(x), 4) for x in np.sum(va * vb, axis=1)]}
    va, vb = r.encode(a, "query"), r.encode(b, "passage")
    return {"mode": "matrix", "matrix": [[round(float(x), 4) for x in row] for row in va @ vb.T]}


def classify(ctx: ToolContext, texts: list[str], labels: list[str]) -> dict:
    texts, labels = _texts(texts), _texts(labels, "labels")
    r = _retrieval(ctx)
    sims = r.encode(texts, "query") @ r.encode(labels, "passage").T
    best = sims.argmax(axis=1)
    return {"results": [{"text": t, "label": labels[j], "score": round(float(sims[i, j]), 4)} for i, (t, j) in enumerate(zip(texts, best))]}


def cluster(ctx: ToolContext, texts: list[str], threshold: float = 0.82) -> dict:
    texts = _texts(texts)
    vecs = _retrieval(ctx).encode(texts, "passage")
    members: list[list[int]] = []  # each cluster is represented by its first member
    for i, v in enumerate(vecs):
        if members:
            sims = vecs[[m[0] for m in members]] @ v
            j = int(sims.argmax())
            if sims[j] >= threshold:
                members[j].append(i)
                continue
        members.append([i])
    return {"n_clusters": len(members), "clusters": [{"id": c, "members": m, "texts": [texts[i] for i in m]} for c, m in enumerate(members)]}


def select_diverse(ctx: ToolContext, texts: list[str], k: Optional[int] = None) -> dict:
    texts = _texts(texts)
    k = min(k or max(1, len(texts) // 2), len(texts))
    vecs = _retrieval(ctx).encode(texts, "passage")
    kept = [0]
    nearest = vecs @ vecs[0]  # similarity of each text to its closest kept text
    while len(kept) < k:
        candidates = [(nearest[i], i) for i in range(len(texts)) if i not in kept]
        _, pick = min(candidates)
        kept.append(pick)
        nearest = np.maximum(nearest, vecs @ vecs[pick])
    return {"kept_indices": kept, "kept": [texts[i] for i in kept]}
