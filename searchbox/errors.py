"""Domain errors: inner code raises these; `cli` is where they become one-line messages."""

import functools
import sys


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


def _say(exc: SearchboxError) -> None:
    print(f"searchbox: {exc}", file=sys.stderr)


def cli(main):
    """Wrap a CLI's main: a SearchboxError becomes `searchbox: <reason>` and exit 2, Ctrl-C exit 130."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except SearchboxError as exc:
            _say(exc)
            return 2
        except KeyboardInterrupt:
            print("searchbox: interrupted", file=sys.stderr)
            return 130

    return wrapper


def task(fn):
    """Wrap a Hydra task: a SearchboxError becomes `searchbox: <reason>` and SystemExit(2), Ctrl-C (or SIGTERM) exit 130.

    A task's return value is its job's result (Hydra keeps it), so unlike `cli` the error exits instead of returning.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SearchboxError as exc:
            _say(exc)
            raise SystemExit(2) from None
        except KeyboardInterrupt:
            print("searchbox: interrupted: finished runs are kept; the same command again finishes the rest", file=sys.stderr)
            raise SystemExit(130) from None

    return wrapper
