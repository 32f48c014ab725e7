"""The embedder an index records (config, identity) and how to get it back for refresh, search, doctor and bench."""

from __future__ import annotations

from typing import Optional

from ...config import RetrievalConfig
from ...errors import BackendError
from ...paths import cache_dir
from ..cache import CachedEncoder, EmbeddingCache
from ..embedder import IDENTITY_FIELDS, HashEmbedder, embedder_identity, identity_key, make_embedder


def retrieval_config(config: dict, **overrides) -> RetrievalConfig:
    """A RetrievalConfig carrying a recorded embedder config (device, batch size from overrides)."""
    return RetrievalConfig(**{k: v for k, v in config.items() if k in IDENTITY_FIELDS}, **overrides)


def identity_of(config: dict) -> str:
    """The identity key a recorded config stands for today (model files rehashed): compare with the recorded key."""
    if config.get("embedder") == "hash":
        return HashEmbedder(int(config["dim"]), config.get("seed", "hash1")).identity
    return identity_key(embedder_identity(retrieval_config(config)))


def record(config: dict, key: str) -> dict:
    """What state.json keeps about the embedder."""
    return {"key": key, "model": config.get("embed_model") or f"{config.get('embedder')}-{config.get('dim')}", "config": config}


def encoder_for(config: dict, device: str = "cpu", batch_size: int = 64, cache: bool = True) -> CachedEncoder:
    """A cached encoder for a recorded (or command-line) embedder config."""
    if config.get("embedder") == "hash":
        embedder = HashEmbedder(int(config["dim"]), config.get("seed", "hash1"))
    elif config.get("embedder") in ("local", "api"):
        embedder = make_embedder(retrieval_config(config, device=device, batch_size=batch_size))
    else:
        raise BackendError(f"index records an unknown embedder {config.get('embedder')!r}")
    disk: Optional[EmbeddingCache] = EmbeddingCache(cache_dir("embeddings") / "vectors.sqlite") if cache else None
    return CachedEncoder(embedder, disk)
