"""Domain errors: inner code raises these; `cli` is where they become one-line messages."""

import argparse
import errno
import functools
import os
import signal
import sys
from pathlib import Path
from typing import Iterator, Optional


class SearchboxError(Exception):
    """Base class for every error a person should see as a one-line reason."""


class DataroomError(SearchboxError):
    """A dataroom was refused (unsafe or oversized archive, missing path)."""


class ConfigError(SearchboxError):
    """A configuration value is invalid; raised before any run starts."""


class ModelError(SearchboxError):
    """The model endpoint failed past its retries, or answered with something unusable."""


class SandboxError(SearchboxError):
    """Network isolation for tools is unavailable and the user did not opt out."""


class SetupError(SearchboxError):
    """A required part (llama-server, model file, ripgrep) is missing or broken."""


class BackendError(SearchboxError):
    """A backend of the harness itself (embedder, reranker, embedding API, index) failed.

    Not the model's doing: the run stops as `tool_error` and a relaunch redoes it, instead of the
    model reading an error and the run being counted as if the tool did not exist.
    """


class DiskFull(SearchboxError):
    """A write failed because its file system is full or over quota: says which path and what to free."""

    @classmethod
    def of(cls, exc: BaseException, where: "os.PathLike | str") -> "DiskFull":
        """The one-line reason for an ENOSPC/EDQUOT found in exc (or its causes), while writing under `where`."""
        err = no_space(exc)
        path = (err.filename if err is not None and err.filename else None) or where
        mount, free = _free_space(Path(os.fsdecode(path)))
        return cls(f"disk full writing {os.fsdecode(path)} ({_size(free)} free on {mount}): free space on that file system "
                   f"(old sweeps or runs under it, caches under $SEARCHBOX_HOME), then run the same command again")


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def no_space(exc: Optional[BaseException]) -> Optional[OSError]:
    """The OSError saying the disk is full (ENOSPC) or over quota (EDQUOT) in exc or what caused it, else None."""
    return next((e for e in _chain(exc) if isinstance(e, OSError) and e.errno in NO_SPACE), None)


def _found(exc: Optional[BaseException], kind: type) -> Optional[BaseException]:
    """The first exception of `kind` in exc's chain (a DiskFull a later failure on the same full disk masked)."""
    return next((e for e in _chain(exc) if isinstance(e, kind)), None)


def _chain(exc: Optional[BaseException]) -> Iterator[BaseException]:
    """exc, then what caused it, and so on."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _free_space(path: Path) -> tuple[str, Optional[int]]:
    """(mount point of the file system holding path, bytes free there for this user)."""
    cur = path
    while not cur.exists() and cur != cur.parent:
        cur = cur.parent
    try:
        dev, mount = os.stat(cur).st_dev, cur.resolve()
        while mount != mount.parent and os.stat(mount.parent).st_dev == dev:
            mount = mount.parent
        st = os.statvfs(cur)
        return str(mount), st.f_bavail * st.f_frsize
    except OSError:
        return str(cur), None


def _size(n: Optional[int]) -> str:
    if n is None:
        return "? bytes"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _say(exc: SearchboxError) -> None:
    print(f"searchbox: {exc}", file=sys.stderr)


def cli(main):
    """Wrap a CLI's main: a SearchboxError (or a full disk) becomes `searchbox: <reason>` and exit 2, Ctrl-C exit 130."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except SearchboxError as exc:
            _say(exc)
            return 2
        except Exception as exc:  # a full disk anywhere in its causes; anything else as it was
            if no_space(exc) is None:
                raise
            _say(_found(exc, DiskFull) or DiskFull.of(exc, os.getcwd()))
            return 2
        except KeyboardInterrupt:
            print("searchbox: interrupted", file=sys.stderr)
            return 130

    return wrapper


class ArgParser(argparse.ArgumentParser):
    """argparse whose usage mistakes are bad input like any other: a one-line SearchboxError (exit 2 through `cli`), not a usage dump."""

    def error(self, message: str):
        raise SearchboxError(f"{self.prog}: {message}")


def task(fn):
    """Wrap a Hydra task: a SearchboxError (or a full disk) becomes `searchbox: <reason>` and SystemExit(2), Ctrl-C (or SIGTERM) exit 130.

    A task's return value is its job's result (Hydra keeps it), so unlike `cli` the error exits instead of returning.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SearchboxError as exc:
            _say(exc)
            raise SystemExit(2) from None
        except Exception as exc:  # a full disk anywhere in its causes; anything else as it was
            if no_space(exc) is None:
                raise
            _say(_found(exc, DiskFull) or DiskFull.of(exc, os.getcwd()))
            raise SystemExit(2) from None
        except KeyboardInterrupt:
            print("searchbox: interrupted: finished runs are kept; the same command again finishes the rest", file=sys.stderr)
            raise SystemExit(130) from None

    return wrapper


def sigterm_as_interrupt() -> None:
    """SIGTERM ends a run like Ctrl-C: stop reason `interrupted`, logs complete, server stopped."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def exit_process(main: "Callable[[], object]") -> None:
    """Run a command's main and end the process with its exit status, skipping the interpreter's final teardown.

    pyarrow's native thread pools can abort a process at that teardown (std::terminate on a still-joinable worker:
    "terminate called without an active exception", exit 134) after all its work is written; one control sweep in
    about ten did so here (apache/arrow#34314). So what a normal exit runs still runs, in its order (the threading
    hooks and joins, then the atexit handlers: logging, temporary folders, Ray's shutdown), the streams are flushed,
    and the process ends by os._exit: nothing that could still change a result is skipped, only the native
    destructors that race."""
    import atexit
    import os

    try:
        status = main()
    except SystemExit as exc:
        status = exc.code
    except KeyboardInterrupt:
        status = 130
    code = status if isinstance(status, int) else (0 if status is None else 1)
    if status is not None and not isinstance(status, int):
        print(status, file=sys.stderr)  # sys.exit("message") prints the message and exits 1
    try:
        import threading

        # As the interpreter's own exit does, in its order: first the threading exit hooks (concurrent.futures' and
        # joblib/loky's executors stop there) and the joins of non-daemon threads, then the atexit handlers. Without
        # the first, joblib's atexit waited on a loky executor that was never told to stop: 300 s, its idle timeout.
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
