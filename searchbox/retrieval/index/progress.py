"""Index-build progress: one hook the builder calls, set by whoever shows it (a CLI bar, a sweep line, a web job).

The builder reports `(stage, done, total)`: stage "read" while it reads files (done = files read, total 0:
not known yet), then "embed" after each batch of chunks (done and total in chunks), then "bm25" and (when the
index gets a graph) "ann" as those steps go over the live chunks (done and total in chunks). Whoever wants to show a
build wraps the work that may build an index in `with reporting(hook): ...`; hooks nest and all of them hear
every report of this process. A hook must be quick and must not raise (a display never fails a build).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Optional

Progress = Callable[[str, int, int], None]  # (stage, done, total)

_hooks: list[Progress] = []
_lock = threading.Lock()


@contextlib.contextmanager
def reporting(hook: Progress) -> Iterator[None]:
    """Call `hook` with every index-build report made in this process while inside."""
    with _lock:
        _hooks.append(hook)
    try:
        yield
    finally:
        with _lock:
            _hooks.remove(hook)


def report(stage: str, done: int, total: int) -> None:
    """What the builder calls: every hook set by `reporting` hears it; a failing hook is ignored."""
    with _lock:
        hooks = list(_hooks)
    for hook in hooks:
        with contextlib.suppress(Exception):
            hook(stage, done, total)


def also(explicit: Optional[Progress]) -> Progress:
    """A progress callback that reports to `explicit` (a caller's own) and to the hooks."""
    if explicit is None:
        return report

    def both(stage: str, done: int, total: int) -> None:
        explicit(stage, done, total)
        report(stage, done, total)

    return both
