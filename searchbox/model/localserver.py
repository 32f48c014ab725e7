"""A model server the user started on this very host (llama-server by hand): its process and the cores it keeps busy.

The thread plan counts those cores as taken. Without this, a sweep against 127.0.0.1 planned as if the model ran
elsewhere: its torch threads beside a hand-started `llama-server -t 2` on 2 cores decoded at 0.2-1 token/s, where
`-t 1` finished the same 13 runs in 2 min 19 s.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}
THREAD_FLAGS = ("-t", "--threads")
PORT_FLAGS = ("--port",)
DEFAULT_PORT = 8080  # llama-server's


@dataclass(frozen=True)
class LocalServer:
    """A llama-server process of this host serving the endpoint's port."""

    pid: int
    threads: int  # its -t, else its default (every core)
    port: int

    def describe(self) -> str:
        return f"llama-server pid {self.pid} on this host (port {self.port}, -t {self.threads})"


def is_local(url: str) -> bool:
    """Whether an endpoint's host is this machine (loopback, or this host's own name)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in LOOPBACK or host in {socket.gethostname().lower(), socket.getfqdn().lower()}


def _flag(argv: list[str], names: tuple[str, ...]) -> Optional[str]:
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in names:
            return value if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return None


def _int(value: Optional[str]) -> Optional[int]:
    try:
        n = int(value) if value is not None else None
    except ValueError:
        return None
    return n if n is not None and n > 0 else None


def find(url: str, proc: str = "/proc") -> Optional[LocalServer]:
    """The llama-server process serving `url` when that is this host; None for a remote endpoint or none found."""
    if not is_local(url):
        return None
    port = urlsplit(url).port or DEFAULT_PORT
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/cmdline", "rb") as fh:
                argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if not argv or not os.path.basename(argv[0]).startswith("llama-server"):
            continue
        if (_int(_flag(argv, PORT_FLAGS)) or DEFAULT_PORT) != port:
            continue
        threads = _int(_flag(argv, THREAD_FLAGS)) or (os.cpu_count() or 1)
        return LocalServer(int(entry), threads, port)
    return None
