"""Pi's RPC mode from the harness's side: JSON lines to its stdin, its responses and events read from its stdout.

Records are split on LF only (Pi's framing: U+2028 inside a JSON string is not a line end). A reader thread
parses each line into the one queue the harness consumes in order, so a response and the events around it
keep their order; a line past MAX_LINE (Pi echoes the model's text in its events) is skipped whole, and the
end of Pi's output is a `{"type": "closed"}` record.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import threading
import time
from typing import IO, Any, Optional

MAX_LINE = 64 * 1024**2
CLOSED = {"type": "closed"}


class PiGone(Exception):
    """Pi's output ended (it exited, or its box was killed)."""


class Rpc:
    """Commands in, records out: `send` writes one command; `next` returns the next record (or None on timeout)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]):
        self.stdin, self.stdout = stdin, stdout
        self.records: "queue.Queue[dict]" = queue.Queue()
        self.skipped = 0  # lines that were not one JSON object, or over MAX_LINE
        self._ids = itertools.count(1)
        self._write = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                line = self.stdout.readline(MAX_LINE)
                if not line:
                    break
                if not line.endswith(b"\n") and len(line) >= MAX_LINE:
                    self.skipped += 1
                    while (rest := self.stdout.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                        pass
                    continue
                text = line.rstrip(b"\n").rstrip(b"\r")
                if not text:
                    continue
                try:
                    record = json.loads(text.decode("utf-8", "replace"))
                except (ValueError, RecursionError):
                    self.skipped += 1
                    continue
                if isinstance(record, dict):
                    self.records.put(record)
                else:
                    self.skipped += 1
        except (OSError, ValueError):
            pass
        finally:
            self.records.put(dict(CLOSED))

    def send(self, command: dict) -> str:
        """Write one command with a fresh id; returns the id (PiGone when Pi no longer reads)."""
        ident = f"sb-{next(self._ids)}"
        data = json.dumps({**command, "id": ident}, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        with self._write:
            try:
                self.stdin.write(data)
                self.stdin.flush()
            except (OSError, ValueError) as exc:
                raise PiGone(f"Pi no longer reads its commands: {exc}") from exc
        return ident

    def next(self, timeout: float) -> Optional[dict]:
        try:
            return self.records.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stdin.close()


def is_response(record: dict, ident: str) -> bool:
    return record.get("type") == "response" and record.get("id") == ident


def wait_for(rpc: Rpc, ident: str, timeout: float, on_other: Any) -> dict:
    """Records until the response to `ident`, each other one handed to on_other; PiGone at the end of the output,
    TimeoutError past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Pi did not answer within {timeout:.0f}s")
        record = rpc.next(min(left, 0.5))
        if record is None:
            continue
        if record.get("type") == "closed":
            raise PiGone("Pi's output ended")
        if is_response(record, ident):
            return record
        on_other(record)
