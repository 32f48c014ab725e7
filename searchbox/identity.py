"""Run identity, one source of truth: semantic config + question + dataroom content + what actually served the run."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import Optional

from .config import RunConfig, stable_hash
from .errors import DataroomError
from .paths import cache_dir
from .record import Served

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__"}  # never part of a dataroom (dataroom.py skips them too)
_HASH_CACHE: dict[tuple, str] = {}


def content_digest(entries) -> str:
    """The dataroom content hash: sorted (relative path, size, SHA-256) of every file (as open_workspace records it)."""
    digest = hashlib.sha256()
    for rel, size, file_hash in sorted(entries):
        digest.update(f"{rel}\0{size}\0{file_hash}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def dataroom_identity(source: Path | str) -> str:
    """The content hash of a zip or folder without extracting it; equal to the extracted Workspace.sha256.

    Cached per (path, size, mtime) for the process, since a sweep asks once per grid point.
    """
    src = Path(source)
    try:
        st = src.stat()
    except OSError as exc:
        raise DataroomError(f"dataroom not found: {src}") from exc
    key = (str(src.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        _HASH_CACHE[key] = content_digest(folder_entries(src) if src.is_dir() else _zip_entries(src))
    return _HASH_CACHE[key]


def folder_entries(src: Path) -> list[tuple[str, int, str]]:
    out = []
    for root, dirs, names in os.walk(src, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(root, d)))
        for name in names:
            path = Path(root) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                out.append((path.relative_to(src).as_posix(), st.st_size, _file_sha(path)))
    return out


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _zip_entries(src: Path) -> list[tuple[str, int, str]]:
    try:
        with zipfile.ZipFile(src) as zf:
            files = []
            for info in zf.infolist():
                parts = tuple(p for p in PurePosixPath(info.filename.replace("\\", "/")).parts if p not in ("", "."))
                if info.is_dir() or not parts:
                    continue
                files.append((info, parts))
            strip = 1 if files and all(len(p) >= 2 for _, p in files) and len({p[0] for _, p in files}) == 1 else 0
            out = []
            for info, parts in files:
                digest, size = hashlib.sha256(), 0
                with zf.open(info) as fh:
                    while block := fh.read(1 << 20):
                        digest.update(block)
                        size += len(block)
                out.append(("/".join(parts[strip:]), size, digest.hexdigest()))
            return out
    except (OSError, zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError) as exc:
        raise DataroomError(f"{src}: unreadable zip ({exc})") from exc


def gguf_sha256(path: Optional[str]) -> Optional[str]:
    """SHA-256 of a local GGUF, cached on disk by (path, size, mtime): big models take a minute to hash."""
    if not path or not Path(path).is_file():
        return None
    from .llama import SMOLLM2, cached_model_path, sha256_file

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
