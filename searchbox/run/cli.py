"""The single-run CLI: `python -m searchbox.run QUESTION [DATAROOM]` and `--resume RUN_DIR`."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Optional

from .. import harness as harnesses
from ..config import RunConfig
from ..corpus.dataroom import packaged_corpus, remove_tree
from ..errors import SearchboxError, cli, sigterm_as_interrupt
from ..record.record import read_record
from ..tools import select
from .identity import dataroom_identity
from .runner import endpoint_for, execute, resume


def prepare_out(out: Path, overwrite: bool) -> None:
    """--out must be new or empty, unless --overwrite says to clear it (links inside are removed, never followed)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SearchboxError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise SearchboxError(f"--out {out} is not empty: pass --resume to continue that run or --overwrite to replace it")
        remove_tree(out)  # any depth, any modes, no link followed (the model may have built it)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m searchbox.run", description="Answer one question over a dataroom with a local agent.")
    parser.add_argument("question", nargs="?", help="the question (not with --resume)")
    parser.add_argument("dataroom", nargs="?", help="zip or folder (default: the packaged 207-document corpus)")
    parser.add_argument("--budget", type=int, default=None, help="turns (or tokens with --budget-unit tokens); default 1")
    parser.add_argument("--budget-unit", choices=["turns", "tokens"], default="turns")
    parser.add_argument("--token-metric", choices=["total", "prompt", "completion", "uncached_prompt"], default="total")
    parser.add_argument("--force-budget", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--tools", default=None, help="a tier (none, high, low, all, grep_only, vector_only) or comma-separated tool names")
    parser.add_argument("--delivery", choices=["inline", "file"], default="inline", help="tool results in the message, or in work/results/")
    parser.add_argument("--protocol", choices=["auto", "native", "json"], default="auto")
    parser.add_argument("--harness", choices=harnesses.kinds(), default="native", help="what drives the model: native (searchbox's loop) or pi (the reference agent, after `python -m searchbox setup`)")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<timestamp>); must be new or empty")
    parser.add_argument("--overwrite", action="store_true", help="clear a non-empty --out first")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", default=None, help="continue a stopped run from its last checkpoint")
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL (default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id (default: $MODEL_ID)")
    parser.add_argument("--policy", choices=["keyword", "dense", "oracle"], default=None, help="a non-neural control instead of a model")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto")
    parser.add_argument("--run-ceiling", type=float, default=3600.0, help="seconds for the whole run")
    return parser


def _apply_thread_plan(cfg: RunConfig, endpoint: Optional[str]) -> None:
    """This process's torch and BLAS pools from the thread plan (the embedded server sizes its own)."""
    from ..model import threads

    embeds = any(s.tier != "builtin" for s in select(cfg.tools))
    local = not (endpoint or cfg.model.endpoint or os.environ.get("LLAMA_URL") or cfg.model.policy)
    shared = threads.whole_machine()
    threads.apply(threads.plan(threads.available_cores(), cfg.model.parallel, embeds, server_local=local, may_split=False,
                               shared=shared, load=threads.other_load()[0] if shared else 0.0))


@cli
def main(argv: Optional[list[str]] = None) -> int:
    from ..retrieval.index.console import showing
    from ..model.threads import preset_blas_env

    preset_blas_env()  # before numpy and torch load their pools
    sigterm_as_interrupt()
    args = _parser().parse_args(argv)
    with showing():  # an index build inside the run (its first dense search, on a new dataroom) shows a progress bar
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    if args.resume is not None:
        record = read_record(args.resume) if (args.resume / "run_meta.json").exists() else None
        cfg = RunConfig.from_dict(record.config) if record else RunConfig()
        _apply_thread_plan(cfg, args.endpoint)
        with endpoint_for(cfg, args.endpoint) as url:
            meta = resume(args.resume, url, args.budget)
        out = args.resume
    else:
        if not args.question:
            raise SearchboxError("a question is required (or --resume RUN_DIR)")
        cfg = RunConfig(tools=args.tools)
        cfg.model.model, cfg.model.protocol, cfg.model.max_tokens, cfg.model.policy = args.model, args.protocol, args.max_tokens, args.policy
        h = cfg.harness
        h.budget, h.budget_unit, h.token_metric, h.force_budget = args.budget or 1, args.budget_unit, args.token_metric, args.force_budget
        h.sandbox, h.run_ceiling_s, h.delivery, h.kind = args.sandbox, args.run_ceiling, args.delivery, args.harness
        out = args.out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        cfg.validate()
        select(cfg.tools)
        dataroom = args.dataroom or packaged_corpus()
        dataroom_identity(dataroom, cfg.limits)  # refuse an unreadable input before starting a server
        prepare_out(out, args.overwrite)
        _apply_thread_plan(cfg, args.endpoint)
        with endpoint_for(cfg, args.endpoint) as url:
            meta = execute(cfg, args.question, dataroom, out, url)
    t = meta["tokens"]
    estimated = f", {t['estimated_calls']} calls estimated" if t["estimated_calls"] else ""
    print(f"{meta['stop_reason']}: {meta['turns']} turns, {meta['tool_calls']} tool calls, "
          f"{t['total']} tokens ({t['cached']} cached{estimated}), {meta['elapsed_s']:.1f}s, answer {meta['answer_chars']} chars ({meta['answer_source']})")
    print(out / "work" / "ANSWER.md")
    return 1 if meta["stop_reason"] in ("model_error", "tool_error") else 0
