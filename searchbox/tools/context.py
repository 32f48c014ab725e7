"""What a tool call can see: the run's directories, harness limits, retrieval, and what the call touched."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..config import HarnessConfig

PATH_RX = re.compile(r"dataroom/[^\s'\"|;&<>()`]+")


class ToolError(Exception):
    """A failure the model should read as the tool's result (never crashes the run)."""


class InvalidCall(ToolError):
    """The call cannot be carried out as the model sent it (bad arguments, or an argument exec or an encoding
    refuses later): the model reads it as the tool's result, and it counts as a malformed call."""


@dataclass
class ToolResult:
    """A tool's answer: the text the model reads, and the same result as data for programs (controls, analysis).

    A tool that returns a plain string has no data; one that returns a dict or list has itself as data."""

    text: str
    data: Any = None


@dataclass
class ToolContext:
    """Shared by every tool of one run; `programs`, `paths` and `opened` are reset per call."""

    work: Path
    harness: HarnessConfig
    sandbox_mode: str = "bwrap"
    inside: Optional[str] = None  # work/'s path in the box (and in the model's absolute paths); None: its own path
    retrieval: Optional[Any] = None  # searchbox.retrieval.Retrieval, built lazily by the toolset
    dataroom_source: Optional[Path] = None  # the shared read-only copy shown at work/dataroom (None: work/dataroom itself)
    programs: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    opened: Optional[list[str]] = None  # bash: work/-relative files the call's processes opened to read (tools.opens); None: not observed

    def __post_init__(self) -> None:
        if self.dataroom_source is None and (self.work.parent / "dataroom.json").is_file():
            from ..corpus.dataroom import run_dataroom  # the run's pointer to its shared copy (corpus.dataroom.place)

            self.dataroom_source = run_dataroom(self.work.parent)

    @property
    def dataroom(self) -> Path:
        """Where the dataroom is read on the host: the shared copy, or work/dataroom itself."""
        return Path(self.dataroom_source) if self.dataroom_source is not None else self.work / "dataroom"

    @property
    def bind(self) -> Path:
        """What the box binds read-only at dataroom/: work/dataroom, or a Mount of the shared copy there."""
        if self.dataroom_source is not None:
            from ..corpus.dataroom import Mount

            return Mount(self.work / "dataroom", Path(self.dataroom_source))  # type: ignore[return-value]
        return self.work / "dataroom"

    def touch(self, path: str) -> None:
        """Note a file this call read or returned (for retrieval grading)."""
        if path and path not in self.paths:
            self.paths.append(path)

    def touch_from_text(self, text: str) -> None:
        for match in PATH_RX.findall(text):
            self.touch(match.rstrip(".,:"))
