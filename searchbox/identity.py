"""Run identity, one source of truth: semantic config + question + dataroom content + what actually served the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from .config import RunConfig, stable_hash
from .dataroom import source_identity
from .errors import DataroomError
from .paths import cache_dir
from .record import Served

_HASH_CACHE: dict[tuple, str] = {}


def dataroom_identity(source: Path | str) -> str:
    """The content hash a run of this source would record (dataroom.source_identity).

    An archive's is cached per (path, size, mtime) for the process; a folder is read again each time,
    since a file inside can change without its folder's mtime moving.
    """
    src = Path(source)
    try:
        st = src.stat()
    except OSError as exc:
        raise DataroomError(f"dataroom not found: {src}") from exc
    if src.is_dir():
        return source_identity(src)
    key = (str(src.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        _HASH_CACHE[key] = source_identity(src)
    return _HASH_CACHE[key]


def gguf_sha256(path: Optional[str]) -> Optional[str]:
    """SHA-256 of a local GGUF, cached on disk by (path, size, mtime): big models take a minute to hash."""
    if not path or not Path(path).is_file():
        return None
    from .llama import SMOLLM2, cached_model_path
    from .paths import sha256_file

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
                  llama_cpp=info.get("llama_cpp"))


def served_key(served: Served) -> dict:
    """The part of the served identity that names a run: the weights when known, else the reported id (else the URL)."""
    if served.policy:
        return {"policy": served.policy}
    if served.gguf_sha256:
        return {"gguf_sha256": served.gguf_sha256, "llama_cpp": served.llama_cpp}
    if served.model_id:
        return {"model_id": served.model_id, "llama_cpp": served.llama_cpp}
    return {"endpoint": served.endpoint}


def run_key(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served) -> str:
    """The run's identity: what decides its result, and nothing that only changes how it was carried out."""
    return stable_hash(cfg.semantic(), question_id or "", question, dataroom_id, served_key(served))


def describe_key(cfg: RunConfig, question_id: str, question: str, dataroom_id: str, served: Served) -> str:
    """The run key's inputs as JSON (written beside a run so a key can be explained)."""
    return json.dumps({"config": cfg.semantic(), "question_id": question_id, "question": question,
                       "dataroom": dataroom_id, "served": served_key(served)}, indent=2, sort_keys=True, default=str)
