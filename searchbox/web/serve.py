"""`python -m searchbox.serve`: the web app (submit jobs, watch runs live, browse sweeps) on one model endpoint."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Iterator, Optional

import httpx

from ..config import ModelConfig
from ..errors import SearchboxError, cli

LOOPBACK = {"localhost"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """Refuse early, with a reason, when the address cannot be bound (uvicorn would only log and exit)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
        except OSError as exc:
            raise SearchboxError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def server_slots(endpoint: str) -> Optional[int]:
    """The slots an OpenAI-compatible server runs in parallel (llama-server's /props total_slots), if it says."""
    base = endpoint.rstrip("/").removesuffix("/v1")
    with contextlib.suppress(httpx.HTTPError, ValueError, TypeError):
        slots = httpx.get(f"{base}/props", timeout=3.0).json().get("total_slots")
        if isinstance(slots, int) and slots > 0:
            return slots
    return None


@contextlib.contextmanager
def model_endpoint(endpoint: Optional[str], slots: Optional[int]) -> Iterator[tuple[str, str, int]]:
    """(url, label, slots): the given endpoint, or one embedded llama-server for the server's lifetime."""
    if endpoint:
        yield endpoint, endpoint, slots or server_slots(endpoint) or 1
        return
    from ..model.llama import LlamaServer

    cfg = ModelConfig(parallel=slots or 1)
    with LlamaServer.from_config(cfg) as server:
        yield server.url, f"embedded llama-server ({cfg.name}, {cfg.parallel} slot{'s' if cfg.parallel > 1 else ''})", cfg.parallel


@cli
def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.serve", description=__doc__.splitlines()[0].split(": ", 1)[-1])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--token", default=os.environ.get("SEARCHBOX_TOKEN"), help="required on every request (default: $SEARCHBOX_TOKEN)")
    parser.add_argument("--outputs", type=Path, default=Path("outputs"), help="jobs go to OUTPUTS/web/, sweeps are read from OUTPUTS/sweeps/")
    parser.add_argument("--endpoint", default=os.environ.get("LLAMA_URL"),
                        help="OpenAI-compatible base URL for every job (default: $LLAMA_URL, else one embedded llama-server)")
    parser.add_argument("--allow-endpoint", action="append", default=[], metavar="URL",
                        help="another endpoint a job may name in its form (repeatable; by default only the server's own)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id jobs send (default: $MODEL_ID, else the server's)")
    parser.add_argument("--slots", type=int, default=None, help="jobs run at once (default: the server's slots, else 1)")
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto", help="bash isolation for jobs")
    parser.add_argument("--max-upload-mb", type=float, default=200.0, help="largest dataroom zip accepted (default 200)")
    parser.add_argument("--max-budget", type=int, default=1000, help="largest turn budget a job may ask for")
    from .. import knobs

    switches = knobs.read()  # one line for a bad value, before anything starts
    parser.add_argument("--preempt", action=argparse.BooleanOptionalAction, default=switches.get("PREEMPT_FOREGROUND", True),
                        help="a new job pauses a running one (default: on, or $PREEMPT_FOREGROUND)")
    parser.add_argument("--backfill", action=argparse.BooleanOptionalAction, default=switches.get("AUTO_BACKFILL", True),
                        help="idle slots resume paused jobs (default: on, or $AUTO_BACKFILL)")
    args = parser.parse_args(argv)
    from ..errors import sigterm_as_interrupt

    sigterm_as_interrupt()  # after uvicorn's own graceful stop, SIGTERM unwinds like Ctrl-C: the embedded server stops too
    try:
        if not is_loopback(args.host) and not args.token:
            raise SearchboxError(f"--host {args.host} is reachable from other machines: set --token (or $SEARCHBOX_TOKEN); "
                                 f"for example --token {secrets.token_urlsafe(16)}")
        from .endpoints import EndpointRefused, parse_endpoint

        try:  # a malformed one is one line here, not a job's error later
            allowed = tuple(parse_endpoint(u) for u in args.allow_endpoint)
        except EndpointRefused as exc:
            raise SearchboxError(f"--allow-{exc}") from None
        if args.slots is not None and args.slots < 1:
            raise SearchboxError("--slots must be at least 1")
        if not 0 < args.max_upload_mb <= 100_000:
            raise SearchboxError("--max-upload-mb must be positive")
        if not 0 < args.port < 65536:
            raise SearchboxError(f"--port {args.port}: not a port")
        check_port(args.host, args.port)
        import uvicorn

        from .app import WebSettings, create_app

        with model_endpoint(args.endpoint, args.slots) as (url, label, slots):
            settings = WebSettings(outputs=args.outputs, endpoint=url, endpoint_label=label, allowed_endpoints=allowed,
                                   model=args.model, token=args.token,
                                   loopback=is_loopback(args.host), slots=slots, sandbox=args.sandbox,
                                   preempt=args.preempt, backfill=args.backfill,
                                   max_upload_bytes=int(args.max_upload_mb * 1024**2), max_budget=args.max_budget)
            app = create_app(settings)
            where = f"http://{args.host}:{args.port}/" + (f"?token={args.token}" if args.token else "")
            print(f"searchbox: serving {where} (model: {label}; {slots} slot{'s' if slots > 1 else ''}; outputs: {settings.outputs})",
                  file=sys.stderr, flush=True)
            server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=3))
            try:
                server.run()
            except SystemExit:  # uvicorn exits when it cannot start; its log line says why
                raise SearchboxError(f"could not serve on {args.host}:{args.port}") from None
    except KeyboardInterrupt:  # uvicorn re-raises the signal it stopped on, once it has shut down cleanly
        print("searchbox: stopped", file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
