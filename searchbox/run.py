"""One run end to end (dataroom -> agent -> artifacts), and its CLI: `python -m searchbox.run QUESTION [DATAROOM]`."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from . import __version__
from .agent import Agent
from .config import RunConfig, stable_hash
from .dataroom import Workspace, dataroom_hash, open_workspace
from .errors import SearchboxError
from .llm import ChatClient, parse_metrics
from .protocol import choose
from .record import Recorder
from .tools import ToolContext, Toolset, select
from .tools.sandbox import resolve_mode

DEFAULT_CONTEXT = 8192


def run_key(cfg: RunConfig, question: str, dataroom_sha: str) -> str:
    """The run's identity: its resolved config, question and dataroom content."""
    return stable_hash(cfg.to_dict(), question, dataroom_sha)


@contextlib.contextmanager
def endpoint_for(cfg: RunConfig, endpoint: Optional[str] = None) -> Iterator[str]:
    """An explicit endpoint (argument, config, LLAMA_URL) as is; else the embedded llama-server for the block."""
    url = endpoint or cfg.model.endpoint or os.environ.get("LLAMA_URL")
    if url:
        yield url
        return
    from .llama import LlamaServer

    with LlamaServer.from_config(cfg.model) as server:
        yield server.url


def execute(cfg: RunConfig, question: str, dataroom: Optional[str | Path], run_dir: Path, endpoint: str,
            extra_meta: Optional[dict] = None, should_pause: Optional[Callable[[], bool]] = None) -> dict:
    """Run one question in run_dir and return run_meta. Raises only for refused input or setup errors."""
    cfg.validate()
    specs = select(cfg.tools)  # unknown tools fail before anything is written
    sandbox_mode = resolve_mode(cfg.harness.sandbox)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ws: Workspace = open_workspace(run_dir, dataroom, cfg.limits)
    run_id = (extra_meta or {}).get("run_id") or run_key(cfg, question, ws.sha256)
    client = ChatClient(cfg.model, endpoint)
    recorder = Recorder(run_dir, run_id)
    ctx = ToolContext(work=ws.work, harness=cfg.harness, sandbox_mode=sandbox_mode)
    if any(s.tier != "builtin" for s in specs):
        from .retrieval import Retrieval

        ctx.retrieval = Retrieval(cfg.retrieval, ws.dataroom)
    toolset = Toolset(specs, ctx)
    started = dt.datetime.now(dt.timezone.utc)
    meta: dict = {
        "run_id": run_id, "question": question, "status": "running", "started_at": started.isoformat(),
        "searchbox_version": __version__, "model": cfg.model.model or cfg.model.name, "model_label": cfg.model.name,
        "endpoint": endpoint, "budget": cfg.harness.budget, "budget_unit": cfg.harness.budget_unit,
        "token_metric": cfg.harness.token_metric, "force_budget": cfg.harness.force_budget,
        "tools": toolset.names, "sandbox": sandbox_mode, "config": cfg.to_dict(),
        "dataroom": {"source": ws.source, "sha256": ws.sha256, "files": len(ws.files), "bytes": ws.total_bytes},
        **(extra_meta or {}),
    }
    recorder.meta(meta)
    pause_file = run_dir / "PAUSE"  # `touch <run>/PAUSE` stops the run cleanly between steps
    should_pause = should_pause or pause_file.exists
    agent = None
    try:
        protocol = choose(cfg.model.protocol, client)
        window = cfg.model.context_window or client.context_window() or DEFAULT_CONTEXT
        meta.update(protocol=protocol.name, context_window=window)
        agent = Agent(cfg.harness, ws, client, protocol, toolset, recorder, question, window, cfg.model.max_tokens, should_pause)
        meta.update(agent.run())
    finally:
        if agent is not None:
            meta.update(agent.summary())
        else:
            meta.update(stop_reason="model_error", stop_detail="agent did not start", turns=0)
        answer = ws.answer_path.read_text(encoding="utf-8", errors="replace") if ws.answer_path.is_file() else ""
        meta.update(answer_present=bool(answer.strip()), answer_chars=len(answer), answer=answer[:4000])
        meta["server"] = parse_metrics(client.get_text("/metrics"))
        if ctx.retrieval is not None:
            meta["retrieval"] = ctx.retrieval.stats()
        meta["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
        meta["status"] = "complete"
        recorder.close()
        recorder.meta(meta)
        client.close()
    return meta


def sigterm_as_interrupt() -> None:
    """SIGTERM ends a run like Ctrl-C: stop reason `interrupted`, logs complete, server stopped."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def main(argv: Optional[list[str]] = None) -> int:
    sigterm_as_interrupt()
    parser = argparse.ArgumentParser(prog="python -m searchbox.run", description="Answer one question over a dataroom with a local agent.")
    parser.add_argument("question")
    parser.add_argument("dataroom", nargs="?", help="zip or folder (default: the built-in dataroom)")
    parser.add_argument("--budget", type=int, default=1, help="turns (or tokens with --budget-unit tokens)")
    parser.add_argument("--budget-unit", choices=["turns", "tokens"], default="turns")
    parser.add_argument("--token-metric", choices=["total", "prompt", "completion", "uncached_prompt"], default="total")
    parser.add_argument("--force-budget", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--tools", default=None, help="none | high | low | all | comma-separated names (default: catalog defaults)")
    parser.add_argument("--protocol", choices=["auto", "native", "json"], default="auto")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<timestamp>)")
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL (default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id (default: $MODEL_ID)")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto")
    parser.add_argument("--run-ceiling", type=float, default=3600.0, help="seconds for the whole run")
    args = parser.parse_args(argv)
    cfg = RunConfig(tools=args.tools)
    cfg.model.model = args.model
    cfg.model.protocol = args.protocol
    cfg.model.max_tokens = args.max_tokens
    h = cfg.harness
    h.budget, h.budget_unit, h.token_metric, h.force_budget = args.budget, args.budget_unit, args.token_metric, args.force_budget
    h.sandbox, h.run_ceiling_s = args.sandbox, args.run_ceiling
    out = args.out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    try:
        cfg.validate()
        select(cfg.tools)
        dataroom_hash(args.dataroom)  # refuse an unreadable input before starting a server
        with endpoint_for(cfg, args.endpoint) as url:
            meta = execute(cfg, args.question, args.dataroom, out, url)
    except SearchboxError as exc:
        print(f"searchbox: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("searchbox: interrupted", file=sys.stderr)
        return 130
    t = meta["tokens"]
    print(f"{meta['stop_reason']}: {meta['turns']} turns, {meta['tool_calls']} tool calls, "
          f"{t['total']} tokens ({t['cached']} cached), {meta['elapsed_s']:.1f}s, answer {meta['answer_chars']} chars ({meta['answer_source']})")
    print(out / "work" / "ANSWER.md")
    return 0 if meta["stop_reason"] != "model_error" else 1


if __name__ == "__main__":
    sys.exit(main())
