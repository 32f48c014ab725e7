"""Where searchbox keeps state (one root, SEARCHBOX_HOME) and how it writes files atomically."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path


def home() -> Path:
    """The state root: $SEARCHBOX_HOME, else ~/.cache/searchbox (read at call time, never import)."""
    env = os.environ.get("SEARCHBOX_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "searchbox"


def cache_dir(*parts: str) -> Path:
    """A sub-directory of the state root, created on demand."""
    path = home().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write a file under a temporary name and rename it, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk (or anything else) leaves no half-written temporary behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sha256_file(path: Path, digest=None) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (or fed into a running `digest`, whose hex is returned)."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
