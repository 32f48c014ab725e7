"""One read-only copy of each corpus under $SEARCHBOX_HOME/corpora/, shared by every run that reads it.

A run used to extract its own copy of the dataroom (5.9 MB per run for the packaged corpus, 76 MB and 3 s at 19K
files). Now a zip is extracted, or a folder copied, once per content identity: under a file lock that concurrent
jobs and launchers on one host share (joblib workers, Ray actors, Slurm jobs, two sweeps), into a partial folder
that is renamed into place only when whole. A job killed mid-extraction leaves only the partial folder, which the
next holder of the lock removes. Runs bind the copy read-only at dataroom/ (corpus.dataroom.open_workspace).

Layout, per content identity (the dataroom's sha256, dataroom.content_digest):

    corpora/<identity>/data/        the read-only tree (0555 folders, 0444 files)
    corpora/<identity>/manifest.json   identity, source, files [[rel, size, sha256]...], bytes
    corpora/<identity>/used         its mtime is the copy's last use
    corpora/<identity>/noise-<plan>/   a noise view: hard links to data/ plus the distractors (corpus.noise)
    corpora/stamps/<stamp>.json     a source's cheap stamp -> its identity (identity_of reuses it)
    corpora/locks/<name>.lock       flock files; never removed (removing one under a waiter would split the lock)

The stamp (stamp_of) proves cheaply that a source has not changed: for a zip its resolved path, size, mtime and
inode; for a folder the same of every file in it (a walk of stats, no reads). A corpus changed between launches
gets a new stamp, so it is hashed again, gets a new identity, a new copy, and new run keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from ..config import DataroomLimits
from ..errors import DataroomError
from ..paths import atomic_write, cache_dir

MANIFEST = "manifest.json"  # identity, source, count, bytes: small, read by every run
FILES = "files.json"  # [[rel, size, sha256]...]: read only by what needs the list (noise, a resume)
DATA = "data"


@dataclass
class Copy:
    """A corpus's shared read-only copy: where its tree is, and what it holds (the file list read on demand)."""

    root: Path  # corpora/<identity> (or the noise view's folder)
    identity: str
    count: int
    total_bytes: int
    source: str = ""
    _files: Optional[list] = field(default=None, repr=False)

    @property
    def data(self) -> Path:
        return self.root / DATA

    @property
    def files(self) -> list[tuple[str, int, str]]:
        """(relative path, size, sha256) of every file, sorted by path (FILES, beside the manifest)."""
        if self._files is None:
            self._files = [tuple(f) for f in json.loads((self.root / FILES).read_text())]
        return self._files


def corpora_dir() -> Path:
    return cache_dir("corpora")


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive flock shared by every process on this host that names the same lock (released if the holder dies)."""
    path = cache_dir("corpora", "locks") / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


# ---- the stamp: has the source changed? -----------------------------------------------------------
def stamp_of(source: Path, limits: DataroomLimits) -> str:
    """A digest of what proves cheaply that `source` is as it was: stats only, never its bytes."""
    src = Path(source).resolve()
    st = src.stat()
    digest = hashlib.sha256(f"{src}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_dev}\n".encode("utf-8", "surrogateescape"))
    if src.is_dir():
        from .extract import _folder_members  # the same walk (and the same refusals) as extraction

        for path, rel, size in _folder_members(src, limits):
            fst = path.lstat()
            digest.update(f"{rel}\0{size}\0{fst.st_mtime_ns}\0{fst.st_ino}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:32]


def _stamp_file(stamp: str) -> Path:
    return cache_dir("corpora", "stamps") / f"{stamp}.json"


def known_identity(stamp: str) -> Optional[str]:
    """The identity recorded for this stamp, if its copy still exists whole."""
    try:
        identity = json.loads(_stamp_file(stamp).read_text())["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return identity if (corpora_dir() / identity / MANIFEST).is_file() else None


def identity_of(source: Path | str, limits: DataroomLimits | None = None) -> str:
    """The content identity of a zip or folder, computed once (by extracting it into the store) and then reused
    for as long as its stamp holds: no job or launch re-reads the corpus."""
    return shared_copy(source, limits).identity


# ---- the copy ------------------------------------------------------------------------------------
def read_manifest(root: Path) -> Copy:
    data = json.loads((root / MANIFEST).read_text())
    return Copy(root=root, identity=data["identity"], count=int(data["count"]), total_bytes=int(data["bytes"]),
                source=data.get("source", ""))


def _write_manifest(root: Path, identity: str, files: list, source: str) -> None:
    atomic_write(root / FILES, json.dumps(files, separators=(",", ":")))
    atomic_write(root / MANIFEST, json.dumps({"identity": identity, "source": source, "bytes": sum(f[1] for f in files),
                                              "count": len(files)}, separators=(",", ":")))


def _touch(root: Path) -> None:
    with contextlib.suppress(OSError):
        (root / "used").touch()


def shared_copy(source: Path | str | None, limits: DataroomLimits | None = None) -> Copy:
    """The read-only copy of `source` (a zip or folder; None: the built-in dataroom), made now if this is its first use."""
    from .extract import builtin_dataroom

    limits = limits or DataroomLimits()
    src = Path(source) if source else builtin_dataroom()
    if not src.exists():
        raise DataroomError(f"dataroom not found: {src}")
    if not src.is_dir() and not zipfile.is_zipfile(src):
        raise DataroomError(f"{src}: not a zip archive or a folder")
    stamp = stamp_of(src, limits)
    identity = known_identity(stamp)
    if identity is None:
        with locked(f"stamp-{stamp}"):  # two launches of one new corpus: the second waits, then finds the copy
            identity = known_identity(stamp) or _extract(src, stamp, limits)
    root = corpora_dir() / identity
    copy = read_manifest(root)
    _check_limits(copy, src, limits)  # a copy made under larger limits still answers to this run's
    _touch(root)
    copy.source = str(src)
    return copy


def _check_limits(copy: Copy, src: Path, limits: DataroomLimits) -> None:
    from .extract import hint

    if copy.count > limits.max_files:
        raise DataroomError(f"refused {src.name}: {copy.count} files exceeds max_files={limits.max_files}{hint('max_files')}")
    if copy.total_bytes > limits.max_bytes:
        raise DataroomError(f"refused {src.name}: {copy.total_bytes} bytes exceeds max_bytes={limits.max_bytes}{hint('max_bytes')}")


def _extract(src: Path, stamp: str, limits: DataroomLimits) -> str:
    """Extract (or copy) under the stamp's lock into a partial folder, then rename it to its identity."""
    from .extract import _copy_folder, _extract_zip, _remove_unfollowed, content_digest, make_read_only

    store = corpora_dir()
    partial = store / f".partial-{stamp}"
    _remove_unfollowed(partial)  # a killed extraction's leftovers (the lock says nobody is writing it now)
    (partial / DATA).mkdir(parents=True)
    try:
        entries = _copy_folder(src, partial / DATA, limits) if src.is_dir() else _extract_zip(src, partial / DATA, limits)
        identity = content_digest(entries)
        make_read_only(partial / DATA)
        _write_manifest(partial, identity, sorted(entries), str(src))
        final = store / identity
        with locked(f"copy-{identity}"):  # two sources with the same content: one copy
            if (final / MANIFEST).is_file():
                _remove_unfollowed(partial)
            else:
                _remove_unfollowed(final)  # a copy without its manifest is not whole
                os.rename(partial, final)
    except BaseException:
        _remove_unfollowed(partial)
        raise
    atomic_write(_stamp_file(stamp), json.dumps({"identity": identity, "source": str(src), "at": time.time()}) + "\n")
    return identity


# ---- noise views ---------------------------------------------------------------------------------
def noise_view(base: Copy, planned: list, limits: DataroomLimits) -> tuple[Copy, list[dict]]:
    """The distractor-mixed view of (corpus, noise plan), built once and shared by every run of that condition:
    hard links to the base copy's files (no byte copies; the gold files are the base's own, untouched) plus the
    distractors. Returns the view and what was added (noise.apply's list)."""
    from . import noise
    from .extract import _remove_unfollowed, content_digest, make_read_only

    plan_key = hashlib.sha256(json.dumps([(d.path, d.source_member, d.bytes, d.source) for d in planned]).encode()).hexdigest()[:24]
    root = base.root / f"noise-{plan_key}"
    added_file = root / "added.json"
    if not (root / MANIFEST).is_file():
        with locked(f"noise-{base.identity[:16]}-{plan_key}"):
            if not (root / MANIFEST).is_file():
                partial = base.root / f".partial-noise-{plan_key}"
                _remove_unfollowed(partial)
                try:
                    os.chmod(base.root, 0o755)
                    _link_tree(base.data, partial / DATA)
                    added = noise.apply(partial / DATA, planned)
                    extra = []
                    for a in added:
                        from ..paths import sha256_file

                        extra.append((a["path"], a["bytes"], sha256_file(partial / DATA / a["path"])))
                    files = sorted([*base.files, *extra])
                    make_read_only(partial / DATA)
                    atomic_write(partial / "added.json", json.dumps(added))
                    _write_manifest(partial, content_digest(files), files, base.source)
                    os.rename(partial, root)
                except BaseException:
                    _remove_unfollowed(partial)
                    raise
    view = read_manifest(root)
    _check_limits(view, Path(base.source or base.identity), limits)
    _touch(root)
    view.source = base.source
    return view, json.loads(added_file.read_text())


def _link_tree(src: Path, dest: Path) -> None:
    """dest mirrors src's folders, its files hard links to src's (a copy where links cannot cross file systems)."""
    import shutil

    for dirpath, dirs, names in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in names:
            s, d = Path(dirpath) / name, dest / rel / name
            try:
                os.link(s, d)
            except OSError:
                shutil.copyfile(s, d)


# ---- listing and pruning (python -m searchbox corpora list|prune) -------------------------------------
def _tree_bytes(root: Path) -> int:
    seen, total = set(), 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def list_copies() -> list[dict]:
    """Every whole copy: identity, source, files, bytes on disk (hard links counted once), last use (unix time)."""
    out = []
    for root in sorted(corpora_dir().iterdir()):
        if not (root / MANIFEST).is_file():
            continue
        data = json.loads((root / MANIFEST).read_text())
        used = root / "used"
        out.append({"identity": data["identity"], "source": data.get("source", ""), "files": data["count"],
                    "bytes": _tree_bytes(root), "last_used": used.stat().st_mtime if used.exists() else (root / MANIFEST).stat().st_mtime,
                    "path": str(root)})
    return out


def prune(older_than_s: float = 0.0, identity: Optional[str] = None) -> list[dict]:
    """Remove the copies unused for `older_than_s` seconds (or the one named); a run that still needs one makes it again."""
    from .extract import remove_tree

    removed = []
    now = time.time()
    for c in list_copies():
        if (identity and not c["identity"].startswith(identity)) or (not identity and now - c["last_used"] < older_than_s):
            continue
        with locked(f"copy-{c['identity']}"):
            remove_tree(Path(c["path"]))
        removed.append(c)
    return removed


def find_copy(identity: str) -> Optional[Copy]:
    """The whole copy (or noise view) with this content identity, if the store holds one."""
    if not identity or "/" in identity or identity.startswith("."):
        return None
    store = corpora_dir()
    candidates = [store / identity, *sorted(store.glob("*/noise-*"))]
    for root in candidates:
        manifest = root / MANIFEST
        try:
            with open(manifest, encoding="utf-8") as fh:
                head = fh.read(120)  # the manifest starts with its identity: no need to parse 100K file rows
        except OSError:
            continue
        if f'"identity":"{identity}"' in head:
            copy = read_manifest(root)
            _touch(root)
            return copy
    return None
