"""The single-run CLI: `python -m searchbox.run QUESTION [DATAROOM]` and `--resume RUN_DIR`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional

from .. import harness as harnesses
from .. import knobs
from ..config import TOKEN_METRICS, RunConfig
from ..corpus.dataroom import packaged_corpus, remove_tree
from ..errors import SearchboxError, cli, sigterm_as_interrupt
from ..record import done
from ..record.artifacts import DamagedArtifact
from ..record.record import Gold
from ..tools import select
from .identity import dataroom_identity
from .runner import RunInfo, endpoint_for, execute, resume


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
    parser.add_argument("--token-metric", choices=TOKEN_METRICS, default="total", help="what a token budget counts (input: fresh prefill)")
    parser.add_argument("--force-budget", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--tools", default=None, help="a tier (none, high, low, all, grep_only, vector_only) or comma-separated tool names")
    parser.add_argument("--delivery", choices=["inline", "file"], default="inline", help="tool results in the message, or in work/results/")
    parser.add_argument("--protocol", choices=["auto", "native", "json"], default="auto")
    parser.add_argument("--harness", choices=harnesses.kinds(), default="native", help="what drives the model: native (searchbox's loop), pi (the reference agent, after `python -m searchbox setup`) or mini-swe-agent (its own loop over the run's boxed bash)")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: runs/<timestamp>); must be new or empty")
    parser.add_argument("--overwrite", action="store_true", help="clear a non-empty --out first")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", default=None, help="continue a stopped run from its last checkpoint")
    parser.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL (default: $LLAMA_URL, else the embedded llama-server)")
    parser.add_argument("--model", default=os.environ.get("MODEL_ID"), help="model id (default: $MODEL_ID)")
    parser.add_argument("--policy", choices=["keyword", "dense", "oracle"], default=None, help="a non-neural control instead of a model")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto")
    parser.add_argument("--run-ceiling", type=float, default=3600.0, help="seconds for the whole run")
    parser.add_argument("--retriever", choices=["dense", "bm25", "hybrid"], default=None, help="search_dataroom's retriever (default dense)")
    parser.add_argument("--noise", type=float, default=None, help="distractor bytes as a multiple of the dataroom's (noise axis)")
    parser.add_argument("--seed", type=int, default=None, help="the model's sampling seed")
    parser.add_argument("--temperature", type=float, default=None, help="the model's sampling temperature")
    # The gold, so that the run can be graded (python -m searchbox.grade RUN_DIR): never shown to a model.
    parser.add_argument("--gold", default=None, help="the gold answer the run is graded against")
    parser.add_argument("--alias", action="append", default=[], help="another accepted form of the gold (repeatable)")
    parser.add_argument("--gold-file", action="append", default=[], help="a dataroom file holding the answer (repeatable)")
    parser.add_argument("--question-id", default="", help="the question's id in its question file")
    parser.add_argument("--questions-path", default=None, help="the question file the question and gold come from")
    return parser


def _apply_thread_plan(cfg: RunConfig, endpoint: Optional[str]) -> None:
    """This process's torch and BLAS pools from the thread plan (the embedded server sizes its own)."""
    from ..model import threads

    from ..model import localserver

    embeds = any(s.tier != "builtin" for s in select(cfg.tools))
    url = endpoint or cfg.model.endpoint or os.environ.get("LLAMA_URL")
    local = not (url or cfg.model.policy)
    shared = threads.whole_machine()
    beside = localserver.find(url) if url and not cfg.model.policy else None  # a llama-server started by hand here
    threads.apply(threads.plan(threads.available_cores(), cfg.model.parallel, embeds, server_local=local, may_split=False,
                               shared=shared, load=threads.other_load()[0] if shared else 0.0, local_server=beside))


# The flags whose value a knob also sets: given on the command line, the flag wins (knobs.apply skips the field).
FLAG_FIELDS = {"--tools": "tools", "--budget": "harness.budget", "--token-metric": "harness.token_metric", "--model": "model.model"}


def _given(argv: list[str]) -> frozenset[str]:
    return frozenset(field for flag, field in FLAG_FIELDS.items() if any(a == flag or a.startswith(flag + "=") for a in argv))


@cli
def main(argv: Optional[list[str]] = None) -> int:
    from ..retrieval.index.console import showing
    from ..model.threads import preset_blas_env

    preset_blas_env()  # before numpy and torch load their pools
    sigterm_as_interrupt()
    args = _parser().parse_args(argv)
    args.given = _given(sys.argv[1:] if argv is None else argv)
    with showing():  # an index build inside the run (its first dense search, on a new dataroom) shows a progress bar
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    if args.resume is not None:
        try:  # the same strict read the resume does: a damaged record is one line, before any server starts
            record = done.read_record(args.resume) if os.path.lexists(args.resume / "run_meta.json") else None
            cfg = RunConfig.from_dict(record.config) if record else RunConfig()
        except DamagedArtifact as exc:
            raise SearchboxError(f"{args.resume}: cannot resume: {exc}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SearchboxError(f"{args.resume}: cannot resume: its config does not load ({str(exc)[:200]})") from None
        _apply_thread_plan(cfg, args.endpoint)
        with endpoint_for(cfg, args.endpoint) as url:
            meta = resume(args.resume, url, args.budget)
        out = args.resume
    else:
        if not args.question:
            raise SearchboxError("a question is required (or --resume RUN_DIR)")
        cfg = RunConfig(tools=args.tools)
        cfg.model.model, cfg.model.protocol, cfg.model.max_tokens, cfg.model.policy = args.model, args.protocol, args.max_tokens, args.policy
        if not args.policy and (args.endpoint or os.environ.get("LLAMA_URL")):
            cfg.model.name = ""  # not the embedded default: the run is labelled by what the endpoint serves (served.model_label)
        h = cfg.harness
        h.budget, h.budget_unit, h.token_metric, h.force_budget = args.budget or 1, args.budget_unit, args.token_metric, args.force_budget
        h.sandbox, h.run_ceiling_s, h.delivery, h.kind = args.sandbox, args.run_ceiling, args.delivery, args.harness
        if args.retriever:
            cfg.retrieval.retriever = args.retriever
        if args.noise is not None:
            cfg.noise.ratio = args.noise
        if args.seed is not None:
            cfg.model.seed = args.seed
        if args.temperature is not None:
            cfg.model.temperature = args.temperature
        gold = Gold(args.gold.strip(), [a for a in args.alias if a.strip()], list(args.gold_file)) if args.gold and args.gold.strip() else None
        if gold is None and (args.alias or args.gold_file):
            raise SearchboxError("--alias and --gold-file need --gold")
        info = RunInfo(question_id=args.question_id, gold=gold, questions_path=args.questions_path)
        knobs.apply(cfg, args.given)  # $SEARCHBOX_TOOLS, $TURN_BUDGET ...: into the config, so into key.json and the key
        out = args.out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
        cfg.validate()
        select(cfg.tools)
        dataroom = args.dataroom or packaged_corpus()
        dataroom_identity(dataroom, cfg.limits)  # refuse an unreadable input before starting a server
        prepare_out(out, args.overwrite)
        _apply_thread_plan(cfg, args.endpoint)
        with endpoint_for(cfg, args.endpoint) as url:
            meta = execute(cfg, args.question, dataroom, out, url, info=info)
    t = meta["tokens"]
    estimated = f", {t['estimated_calls']} calls estimated" if t["estimated_calls"] else ""
    print(f"{meta['stop_reason']}: {meta['turns']} turns, {meta['tool_calls']} tool calls, "
          f"{t['total']} tokens ({t['cached']} cached{estimated}), {meta['elapsed_s']:.1f}s, answer {meta['answer_chars']} chars ({meta['answer_source']})")
    failed = meta["stop_reason"] in ("model_error", "tool_error")
    if failed and meta.get("stop_detail"):  # the model's or server's own words, on one line (run_meta.json has them whole)
        print("reason: " + " ".join(str(meta["stop_detail"]).split())[:500])
    answer = out / "work" / "ANSWER.md"
    print(answer if answer.is_file() else f"no answer written (the run is in {out})")
    return 1 if failed else 0
