"""Index-build progress for people: a bar that redraws itself on a terminal, a line every few seconds in a log.

One listener of searchbox.retrieval.index.progress, used by `python -m searchbox setup`, `python -m searchbox.run`,
`python -m searchbox.index build|refresh` and a sweep's jobs (whose output is a log: lines, never a bar).
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator, Optional, TextIO

from ...humanize import duration

BAR_WIDTH = 24
REDRAW_S = 0.25  # a terminal bar is redrawn at most this often
LINE_EVERY_S = 10.0  # a log gets a line at most this often (and at the start and end of the embedding)
PHASES = {"bm25": "BM25", "ann": "the ANN graph"}  # the steps after the embedding, each over the live chunks


class Console:
    """A progress hook `(stage, done, total)` writing to `stream` (default stderr); `what` names the index being built."""

    def __init__(self, what: str = "", prefix: str = "[index]", stream: Optional[TextIO] = None, tty: Optional[bool] = None,
                 every_s: float = LINE_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = bool(tty if tty is not None else getattr(self.stream, "isatty", lambda: False)())
        self.what, self.prefix, self.every_s, self.clock = what, prefix, every_s, clock
        self.started = clock()
        self.active = False  # a build is under way (a process may build several: each is timed from its first report)
        self.embed_started: Optional[float] = None
        self.phase_started: dict[str, float] = {}
        self.step_ended: Optional[float] = None  # when the last step (the embedding, BM25) ended: the next one began then
        self.last = -float("inf")
        self.open_line = False  # a bar is on the screen without its newline

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if not self.active:
            self.active, self.started, self.embed_started = True, now, None
        if stage == "read":
            if self.tty and now - self.last >= REDRAW_S:
                self._draw(f"{self.prefix} reading {self.what or 'the files'}: {done:,} files", now)
            return
        if stage in PHASES:
            self._phase(stage, done, total, now)
            return
        if stage != "embed":
            return
        if done >= total:
            self._line(f"{self.prefix} embedded {total:,} chunks{self._of()} in {duration(now - self.started)}", now)
            self.active, self.step_ended = False, now
            return
        if self.embed_started is None:
            self.embed_started = now
            if not self.tty:  # a log says once what is being built and how big it is
                self._line(f"{self.prefix} building the index{self._of()}: {total:,} chunks to embed", now)
                return
        if self.tty:
            if now - self.last >= REDRAW_S:
                filled = int(BAR_WIDTH * done / max(1, total))
                self._draw(f"{self.prefix} embedding [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {self._count(done, total, now)}", now)
        elif now - self.last >= self.every_s:
            self._line(f"{self.prefix} building the index{self._of()}: {self._count(done, total, now)}", now)

    def _phase(self, stage: str, done: int, total: int, now: float) -> None:
        """BM25 and the ANN graph, after the embedding: a line (or bar) while they take a while, one when each is done."""
        started = self.phase_started.setdefault(stage, self.step_ended if self.step_ended is not None else now)
        if done >= total:
            self.phase_started.pop(stage, None)
            self.step_ended, self.active = now, False  # the build may end here: the next report starts a new one
            if now - started >= 1 or self.tty:  # a step over in a blink needs no line of its own in a log
                self._line(f"{self.prefix} {PHASES[stage]}{self._of()}: {total:,} chunks in {duration(now - started)}", now)
            return
        if now - self.last >= (REDRAW_S if self.tty else self.every_s):
            text = f"{self.prefix} {PHASES[stage]}{self._of()}: {done:,} / {total:,} chunks ({100 * done // max(1, total)}%), {duration(now - started)}"
            if self.tty:
                self._draw(text, now)
            else:
                self._line(text, now)

    def _of(self) -> str:
        return f" of {self.what}" if self.what else ""

    def _count(self, done: int, total: int, now: float) -> str:
        text = f"{done:,} / {total:,} chunks ({100 * done // max(1, total)}%), {duration(now - self.started)}"
        spent = now - (self.embed_started or now)
        if done and spent > 1:
            text += f", about {duration(spent / done * (total - done))} left"
        return text

    def _draw(self, text: str, now: float) -> None:
        self.stream.write("\r" + text.ljust(100)[:140])
        self.stream.flush()
        self.last, self.open_line = now, True

    def _line(self, text: str, now: float) -> None:
        self.stream.write(("\r" + text.ljust(100) if self.open_line else text).rstrip() + "\n")
        self.stream.flush()
        self.last, self.open_line = now, False


@contextlib.contextmanager
def showing(what: str = "", prefix: str = "[index]", stream: Optional[TextIO] = None, tty: Optional[bool] = None) -> Iterator[Console]:
    """Show every index build of this process while inside (searchbox.retrieval.index.progress.reporting with a Console)."""
    from .progress import reporting

    console = Console(what, prefix, stream, tty)
    with reporting(console):
        yield console
