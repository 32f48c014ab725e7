"""The scout CLIs: `python -m searchbox.scout "QUERY" REPO_DIR` and `python -m searchbox.scout eval TASKS.json --repos DIR`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

from ..errors import SearchboxError, cli
from ..paths import home
from .config import POLICIES, ScoutConfig, loopback_only

DEFAULTS = ScoutConfig()  # one source for the defaults the flags show


@contextlib.contextmanager
def endpoint(cfg: ScoutConfig, explicit: Optional[str]) -> Iterator[Optional[str]]:
    """None for the keyword control; else --endpoint, $LLAMA_URL (either on this machine only), or the embedded
    llama-server for the block."""
    if cfg.policy == "keyword":
        yield None
        return
    from ..run.runner import endpoint_for

    if explicit:
        loopback_only(explicit)
    elif os.environ.get("LLAMA_URL") and not cfg.model.endpoint:
        loopback_only(os.environ["LLAMA_URL"], "$LLAMA_URL")
    with endpoint_for(cfg, explicit) as url:  # reads only cfg.model (endpoint, GGUF, server args)
        yield url


def _common(parser: argparse.ArgumentParser) -> None:
    d, m = DEFAULTS, DEFAULTS.model
    parser.add_argument("--budget", "--max-rounds", dest="budget", type=int, default=d.budget,
                        help=f"rounds (one response of up to 3 actions each; default {d.budget})")
    parser.add_argument("--policy", choices=POLICIES, default="model", help="model, or the non-neural keyword control")
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL on this machine (loopback only; "
                        "default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id sent in requests (default: $MODEL_ID)")
    parser.add_argument("--label", default=None, help="model label in logs and tables (default: the embedded model's)")
    parser.add_argument("--protocol", choices=["auto", "native", "json"], default="auto")
    parser.add_argument("--max-tokens", type=int, default=m.max_tokens, help=f"generation limit per response (default {m.max_tokens})")
    parser.add_argument("--seed", type=int, default=m.seed, help=f"sampling seed sent with every request (default {m.seed})")
    parser.add_argument("--timeout", type=float, default=d.timeout_s, metavar="S",
                        help=f"wall-clock deadline of the whole search in seconds (default {d.timeout_s:g}); "
                             "past it the search ends as budget_exhausted")
    parser.add_argument("--context", type=int, default=None, metavar="TOKENS",
                        help="context window in tokens (default: the server's n_ctx; the embedded server is started with it)")
    parser.add_argument("--max-chars", type=int, default=d.max_chars,
                        help=f"characters of cited source returned in all (default {d.max_chars}); a longer finish is refused")


def _config(args) -> ScoutConfig:
    cfg = ScoutConfig(policy=args.policy, budget=args.budget, max_chars=args.max_chars, timeout_s=args.timeout)
    cfg.model.model = args.model
    cfg.model.protocol = args.protocol
    cfg.model.max_tokens = args.max_tokens
    cfg.model.seed = args.seed
    if args.context is not None:
        cfg.model.context_window = args.context
        cfg.model.ctx_size = args.context  # what the embedded llama-server is started with
    if args.label:
        cfg.model.name = args.label
    return cfg.validate()


def main_search(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.scout", description="Find where something is implemented in a repository; "
                                     "returns verified references. (`python -m searchbox.scout eval --help` for the evaluator.)")
    parser.add_argument("query")
    parser.add_argument("repo", type=Path, help="repository directory")
    parser.add_argument("--json", action="store_true", help="print {status, references, rounds, tokens} as JSON")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: runs/scout-<timestamp>)")
    parser.add_argument("--trace", type=Path, default=None, metavar="FILE",
                        help="also write the whole search as one JSON file: query, settings, result and every message and action")
    _common(parser)
    args = parser.parse_args(argv)
    from .loop import run_scout, write_trace

    out = args.out or Path("runs") / f"scout-{time.strftime('%Y%m%d-%H%M%S')}"
    cfg = _config(args)
    if not args.repo.is_dir():
        raise SearchboxError(f"repository not found or not a directory: {args.repo}")
    with endpoint(cfg, args.endpoint) as url:
        result = run_scout(cfg, args.query, args.repo, out, url)
    if args.trace:
        write_trace(args.trace, out, cfg, args.query, result)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        t = result.tokens
        print(f"{result.status}: {len(result.references)} reference(s), {result.rounds} rounds, {t['total']} tokens"
              + (f" ({result.detail})" if result.detail else ""))
        for r in result.references:
            print(f"{r.path}:{r.start_line}-{r.end_line}  sha256 {r.sha256}")
        print(out)
    return 1 if result.status == "model_error" else 0


def main_eval(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m searchbox.scout eval", description="Score scout references against a labelled task set.")
    parser.add_argument("tasks", type=Path, help="task file (JSON: name, repositories, tasks)")
    parser.add_argument("--repos", type=Path, default=None, help="one checkout per repository name, DIR/NAME (default: $SEARCHBOX_HOME/scout-repos)")
    parser.add_argument("--out", type=Path, default=None, help="write runs/, tasks.parquet, summary.json and summary.md here")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    _common(parser)
    args = parser.parse_args(argv)
    from .evaluate import evaluate, markdown
    from .tasks import load, verify

    cfg = _config(args)
    tasks = load(args.tasks)
    repos = args.repos or home() / "scout-repos"
    verify(tasks, repos, tasks.tasks[: args.limit] if args.limit else None)  # refuse a mismatched checkout before starting a server
    with endpoint(cfg, args.endpoint) as url:
        frame, summary = evaluate(cfg, tasks, repos, url, args.out, args.limit)
    print(markdown(frame, summary))
    if args.out:
        print(args.out / "summary.json")
    return 0


@cli
def main(argv: Optional[list[str]] = None) -> int:
    from ..errors import sigterm_as_interrupt

    argv = list(sys.argv[1:] if argv is None else argv)
    sigterm_as_interrupt()
    if argv and argv[0] == "eval":
        return main_eval(argv[1:])
    return main_search(argv)


if __name__ == "__main__":
    sys.exit(main())
