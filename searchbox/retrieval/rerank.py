"""Rerankers: a sentence-transformers CrossEncoder, a Jina-style HTTP API, or none (dense order passes through)."""

from __future__ import annotations

import os
from typing import Optional, Protocol

from ..config import RetrievalConfig
from ..errors import BackendError


class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: list[str]) -> Optional[list[float]]: ...


class NoReranker:
    """Keeps the first-stage order; `score` returns None so callers record that nothing was reranked."""

    name = "none"

    def score(self, query: str, documents: list[str]) -> Optional[list[float]]:
        return None


class CrossEncoderReranker:
    def __init__(self, model: str, device: str = "cpu", batch_size: int = 32):
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise BackendError(f"the cross-encoder reranker needs sentence-transformers ({exc})") from exc

        try:
            self.model = CrossEncoder(model, device=device, local_files_only=True)
        except OSError as exc:
            raise BackendError(f"cross-encoder {model!r} not found locally ({exc}); models cannot be downloaded here") from exc
        except (RuntimeError, ValueError) as exc:
            raise BackendError(f"cross-encoder {model!r} failed to load: {exc}") from exc
        self.name = f"cross-encoder:{model}"
        self.batch_size = batch_size

    def score(self, query: str, documents: list[str]) -> Optional[list[float]]:
        if not documents:
            return []
        try:
            scores = self.model.predict([(query, d) for d in documents], batch_size=self.batch_size, show_progress_bar=False)
            out = [float(s) for s in scores]
        except (RuntimeError, ValueError, TypeError, MemoryError) as exc:
            raise BackendError(f"{self.name} failed: {exc}") from exc
        if len(out) != len(documents):
            raise BackendError(f"{self.name} returned {len(out)} scores for {len(documents)} documents")
        return out


class ApiReranker:
    """POST {api_url}/rerank {model, query, documents} -> results [{index, relevance_score}]."""

    def __init__(self, cfg: RetrievalConfig, transport=None):
        import httpx

        self.cfg = cfg
        self.name = f"api:{cfg.rerank_model}"
        key = os.environ.get(cfg.api_key_env, "")
        self._http = httpx.Client(timeout=60.0, headers={"Authorization": f"Bearer {key}"} if key else {}, transport=transport)

    def score(self, query: str, documents: list[str]) -> Optional[list[float]]:
        import httpx

        if not documents:
            return []
        body = {"model": self.cfg.rerank_model, "query": query, "documents": documents, "top_n": len(documents)}
        try:
            resp = self._http.post(f"{self.cfg.api_url.rstrip('/')}/rerank", json=body)
            resp.raise_for_status()
            scores = [0.0] * len(documents)
            for item in resp.json()["results"]:
                scores[int(item["index"])] = float(item["relevance_score"])
        except (httpx.HTTPError, KeyError, ValueError, IndexError, TypeError) as exc:
            raise BackendError(f"rerank API failed: {exc}") from exc
        return scores


def make_reranker(cfg: RetrievalConfig, device: str = "cpu") -> Reranker:
    if cfg.reranker == "cross-encoder":
        return CrossEncoderReranker(cfg.rerank_model, device=device)
    if cfg.reranker == "api":
        return ApiReranker(cfg)
    return NoReranker()
