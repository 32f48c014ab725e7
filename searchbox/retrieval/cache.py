"""The one path every embedding takes: an in-process dict over a persistent SQLite cache keyed by (embedder identity, role, text)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import BackendError
from .embedder import Embedder


def text_key(identity: str, role: str, text: str) -> str:
    """identity is the embedder's (backend, API URL, model id, model files, prefixes): see embedder_identity."""
    return hashlib.sha256(f"{identity}\0{role}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Vectors on disk, shared by every process of a sweep.

    SQLite in WAL mode makes concurrent readers and writers safe; writes are one short transaction
    after the model call, so no lock is ever held while a model runs.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            with self._conn() as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, dim INTEGER, data BLOB)")
        except sqlite3.Error as exc:
            raise BackendError(f"embedding cache {self.path} unusable: {exc}") from exc

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get_many(self, keys: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        try:
            conn = self._conn()
            for start in range(0, len(keys), 900):
                batch = keys[start : start + 900]
                rows = conn.execute(f"SELECT key, data FROM vec WHERE key IN ({','.join('?' * len(batch))})", batch).fetchall()
                for key, data in rows:
                    out[key] = np.frombuffer(data, dtype=np.float32)
        except sqlite3.Error as exc:
            raise BackendError(f"embedding cache {self.path} unreadable: {exc}") from exc
        return out

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        rows = [(k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()]
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR IGNORE INTO vec (key, dim, data) VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise BackendError(f"embedding cache {self.path} unwritable: {exc}") from exc


class CachedEncoder:
    """encode(texts, role): memory, then disk, then the model for what is left; counts hits and misses."""

    MEMORY_MAX = 50_000  # vectors kept in memory (cleared when full): an index build of 1M chunks passes every one through

    def __init__(self, embedder: Embedder, disk: Optional[EmbeddingCache]):
        self.embedder = embedder
        self.identity = embedder.identity
        self.disk = disk
        self.memory: dict[str, np.ndarray] = {}
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "embedded": 0}

    def encode(self, texts: list[str], role: str = "passage") -> np.ndarray:
        keys = [text_key(self.identity, role, t) for t in texts]
        found: dict[str, np.ndarray] = {}
        need = []
        for k in dict.fromkeys(keys):
            if k in self.memory:
                found[k] = self.memory[k]
                self.stats["memory_hits"] += 1
            else:
                need.append(k)
        # Queries stay in memory: recomputing one is cheaper than a disk round trip on the search hot path.
        if need and self.disk is not None and role != "query":
            disk = self.disk.get_many(need)
            self.stats["disk_hits"] += len(disk)
            found.update(disk)
            if len(self.memory) + len(disk) > self.MEMORY_MAX:
                self.memory.clear()
            self.memory.update(disk)
            need = [k for k in need if k not in disk]
        if need:
            by_key = {k: t for k, t in zip(keys, texts)}
            vectors = self.embedder.embed([by_key[k] for k in need], role)
            fresh = dict(zip(need, vectors))
            self.stats["misses"] += len(need)
            self.stats["embedded"] += len(need)
            if self.disk is not None and role != "query":
                self.disk.put_many(fresh)
            if len(self.memory) + len(fresh) > self.MEMORY_MAX:
                self.memory.clear()
            self.memory.update(fresh)
            found.update(fresh)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])
