"""What served a run: the server's own account of its model (weights, build), asked once per run or endpoint.

The run key holds this (served_key), not how the server was reached: the same weights behind another URL are the same run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..config import RunConfig, stable_hash
from ..paths import cache_dir
from ..record.record import Served


def gguf_sha256(path: Optional[str]) -> Optional[str]:
    """SHA-256 of a local GGUF, cached on disk by (path, size, mtime): big models take a minute to hash."""
    if not path or not Path(path).is_file():
        return None
    from .llama import SMOLLM2, cached_model_path
    from ..paths import sha256_file

    p = Path(path).resolve()
    if p == cached_model_path().resolve():
        return SMOLLM2.sha256  # checked against the pin when it was fetched
    st = p.stat()
    memo = cache_dir("hashes") / (stable_hash(str(p), st.st_size, st.st_mtime_ns, length=24) + ".sha256")
    if memo.exists():
        return memo.read_text().strip()
    digest = sha256_file(p)
    memo.write_text(digest)
    return digest


def served_identity(client, cfg: RunConfig, endpoint: str) -> Served:
    """Ask the server what it serves (control policies answer for themselves)."""
    if cfg.model.policy:
        return Served(model_id=f"control-{cfg.model.policy}", endpoint=None, policy=cfg.model.policy)
    info = client.served_model()
    return Served(model_id=info.get("model_id"), endpoint=endpoint, gguf_sha256=gguf_sha256(info.get("model_path")),
                  llama_cpp=info.get("llama_cpp"), slot=getattr(client, "slot", None), slot_start=getattr(client, "slot_start", ""))


def served_key(served: Served) -> dict:
    """The part of the served identity that names a run: the weights when known, else the reported id (else the URL)."""
    if served.policy:
        return {"policy": served.policy}
    if served.gguf_sha256:
        return {"gguf_sha256": served.gguf_sha256, "llama_cpp": served.llama_cpp}
    if served.model_id:
        return {"model_id": served.model_id, "llama_cpp": served.llama_cpp}
    return {"endpoint": served.endpoint}


# Config names that say nothing about the model behind an endpoint: the openai preset's, and none at all (the
# single-run CLI against an endpoint, which used to record the default preset's `smollm2-135m` for any model).
# A run under one of them is labelled by what the server says it serves.
GENERIC_LABELS = frozenset({"openai-compatible", ""})
LABEL_CHARS = 80


def label_of(model_id: str) -> str:
    """A figure label for a served model id: llama-server reports the GGUF's path, whose file stem names it."""
    name = model_id.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if name.lower().endswith(".gguf"):
        name = name[: -len(".gguf")]
    return (name or model_id)[:LABEL_CHARS]


def model_label(cfg: RunConfig, served: Served) -> str:
    """The model's label in the record and figures: the config's name, unless that is generic (GENERIC_LABELS) and
    the server says what it serves."""
    name = cfg.model.name
    if cfg.model.policy or name not in GENERIC_LABELS:
        return name
    return label_of(served.model_id) if served.model_id else (name or "unknown-model")
