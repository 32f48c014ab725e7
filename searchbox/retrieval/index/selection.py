"""Which files of a source the command-line index reads: an extension allow-list and skipped folders (ragbox's).

`python -m searchbox.index build` skips `node_modules` and every dot folder (`.git`, `.venv`, `.cache`, ...) by
default and reads every text file; `--extensions py,md` keeps only those, `--skip-dirs` and `--include-dot-dirs`
change the folders. The selection is recorded in the index's state.json, so `refresh` reads the same files and an
index built with another selection is not "up to date". A run's own index (built with a content hash to match)
passes no selection: it covers the dataroom whole, as the run's content hash does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...errors import ConfigError


@dataclass(frozen=True)
class Selection:
    extensions: Optional[tuple[str, ...]] = None  # lower-case, with the dot ('.py'); None: every file
    skip_dirs: tuple[str, ...] = field(default=("node_modules",))  # folder names skipped at any depth
    skip_dot_dirs: bool = True  # folders whose name starts with '.' are skipped

    @classmethod
    def parse(cls, extensions: Optional[str], skip_dirs: Optional[str], include_dot_dirs: bool) -> "Selection":
        """From the CLI's comma lists: '--extensions py,.md' and '--skip-dirs node_modules,dist' ('' skips none)."""
        exts = None
        if extensions is not None:
            items = [e.strip().lower() for e in extensions.split(",") if e.strip()]
            if not items:
                raise ConfigError("--extensions: give at least one extension, such as py,md,txt")
            bad = [e for e in items if "/" in e or e.strip(".") == "" or " " in e]
            if bad:
                raise ConfigError(f"--extensions: {bad[0]!r} is not a file extension (such as py or .md)")
            exts = tuple(sorted({e if e.startswith(".") else "." + e for e in items}))
        dirs = cls.skip_dirs if skip_dirs is None else tuple(sorted({d.strip() for d in skip_dirs.split(",") if d.strip()}))
        bad = [d for d in dirs if "/" in d or d in (".", "..")]
        if bad:
            raise ConfigError(f"--skip-dirs: {bad[0]!r} is not a folder name (names, not paths: node_modules,dist)")
        return cls(exts, dirs, not include_dot_dirs)

    def skips_dir(self, name: str) -> bool:
        return name in self.skip_dirs or (self.skip_dot_dirs and name.startswith("."))

    def keeps(self, rel: str) -> bool:
        """Whether the file at this relative path is read: no skipped folder above it, an allowed extension."""
        parts = rel.split("/")
        if any(self.skips_dir(p) for p in parts[:-1]):
            return False
        if self.extensions is None:
            return True
        name = parts[-1].lower()
        return any(name.endswith(e) and len(name) > len(e) for e in self.extensions)

    def as_dict(self) -> dict:
        return {"extensions": list(self.extensions) if self.extensions is not None else None, "skip_dirs": list(self.skip_dirs),
                "skip_dot_dirs": self.skip_dot_dirs}

    @classmethod
    def from_dict(cls, data: Optional[dict]) -> Optional["Selection"]:
        if not data:
            return None
        exts = data.get("extensions")
        return cls(tuple(exts) if exts is not None else None, tuple(data.get("skip_dirs", ())), bool(data.get("skip_dot_dirs", True)))
