"""One run end to end (dataroom -> agent -> artifacts), its resume, and the CLI: `python -m searchbox.run QUESTION [DATAROOM]`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from . import __version__
from . import harness as harnesses
from .agent import read_answer
from .config import RunConfig
from .dataroom import Workspace, make_read_only, make_writable, open_workspace, packaged_corpus, remove_tree, rescan
from .errors import SearchboxError, cli
from .harness.base import RunContext
from .identity import dataroom_identity, resolved_protocol, run_key, served_identity
from .llm import ChatClient, parse_metrics
from .record import DataroomInfo, Gold, Recorder, RunRecord, read_record, read_state
from .tools import ToolContext, Toolset, select
from .tools.sandbox import quota_record, resolve_mode

DEFAULT_CONTEXT = 8192
TERMINAL_STOPS = ("budget_spent", "first_turn_done", "token_budget_spent")  # a resume needs a larger budget


@dataclass
class RunInfo:
    """What a caller (a sweep, the web app) knows about a run besides its config and question."""

    run_id: Optional[str] = None  # null: derived from the run's identity
    question_id: str = ""
    question_type: str = ""
    questions_path: Optional[str] = None
    gold: Optional[Gold] = None
    axes: dict = field(default_factory=dict)
    sweep: str = ""
    slot: Optional[int] = None  # the llama-server slot the sweep's pool gave the run (None: slot 0 of a one-slot server)


@contextlib.contextmanager
def endpoint_for(cfg: RunConfig, endpoint: Optional[str] = None) -> Iterator[Optional[str]]:
    """An explicit endpoint (argument, config, LLAMA_URL) as is; none for a control policy; else the embedded llama-server."""
    if cfg.model.policy:
        yield None
        return
    url = endpoint or cfg.model.endpoint or os.environ.get("LLAMA_URL")
    if url:
        yield url
        return
    from .llama import LlamaServer

    with LlamaServer.from_config(cfg.model) as server:
        yield server.url


def make_client(cfg: RunConfig, endpoint: Optional[str], question: str, gold_files: list[str], run_dir: Optional[Path] = None):
    """The model behind the run: an OpenAI-compatible endpoint, or a non-neural control policy (which reads the tools'
    results as data from the run's trace)."""
    if cfg.model.policy:
        from .controls import make_control

        return make_control(cfg.model.policy, cfg.model, question, gold_files, run_dir / "trace.jsonl" if run_dir else None)
    if not endpoint:
        raise SearchboxError("no model endpoint: give --endpoint, set LLAMA_URL, or leave both unset for the embedded server")
    return ChatClient(cfg.model, endpoint)


def _add_noise(cfg: RunConfig, ws: Workspace) -> list[dict]:
    """Mix distractors into the freshly extracted dataroom (noise axis); returns what was added."""
    if cfg.noise.ratio <= 0:
        return []
    from . import noise

    plan = noise.plan(cfg.noise, [(rel, (ws.dataroom / rel).stat().st_size) for rel in ws.files])
    make_writable(ws.dataroom)
    try:
        added = noise.apply(ws.dataroom, plan)
    finally:
        make_read_only(ws.dataroom)
    rescan(ws, cfg.limits)
    return added


def _tools(cfg: RunConfig, ws: Workspace, sandbox_mode: str, specs) -> tuple[Toolset, ToolContext]:
    ctx = ToolContext(work=ws.work, harness=cfg.harness, sandbox_mode=sandbox_mode)
    if any(s.tier != "builtin" for s in specs):
        from .retrieval import Retrieval

        ctx.retrieval = Retrieval(cfg.retrieval, ws.dataroom, index=cfg.index, content_hash=ws.sha256)
    return Toolset(specs, ctx, delivery=cfg.harness.delivery), ctx


def _finish(record: RunRecord, recorder: Recorder, ws: Workspace, client, ctx: ToolContext) -> dict:
    """The run record's last fields, written once the agent stopped (whatever stopped it)."""
    answer, _ = read_answer(ws)
    answer = answer or ""
    record.answer_present, record.answer_chars, record.answer = bool(answer.strip()), len(answer), answer[:4000]
    if record.answer_source == "none" and answer.strip():
        record.answer_source = "model"
    with contextlib.suppress(Exception):  # metrics are a nicety; a dead server must not cost the record
        record.server = parse_metrics(client.get_text("/metrics"))
    if ctx.retrieval is not None:
        with contextlib.suppress(Exception):
            record.retrieval = ctx.retrieval.stats(record.retrieval)  # a resumed run adds to what it had
    record.finished_at = dt.datetime.now(dt.timezone.utc).isoformat()
    record.status = "complete"
    recorder.close()
    recorder.write_record()
    with contextlib.suppress(Exception):
        client.close()
    return record.to_dict()


def _context(cfg: RunConfig, question: str, ws: Workspace, client, toolset: Toolset, recorder: Recorder, window: int,
             started: float, should_pause: Optional[Callable[[], bool]]) -> RunContext:
    """The one way a harness gets its run, new or resumed."""
    return RunContext(config=cfg, question=question, workspace=ws, client=client, toolset=toolset, recorder=recorder,
                      context_window=window, started=started, should_pause=should_pause or (ws.run_dir / "PAUSE").exists)


def execute(cfg: RunConfig, question: str, dataroom: Optional[str | Path], run_dir: Path, endpoint: Optional[str],
            info: Optional[RunInfo] = None, should_pause: Optional[Callable[[], bool]] = None,
            extra_meta: Optional[dict] = None) -> dict:
    """Run one question in run_dir and return its record as a dict. Raises only for refused input or setup errors."""
    t0 = time.monotonic()
    cfg.validate()
    info = info or RunInfo(**{k: v for k, v in (extra_meta or {}).items() if k in {f.name for f in dataclasses.fields(RunInfo)}})
    harness = harnesses.load(cfg.harness.kind)
    harness.check(cfg)  # a harness that cannot run here fails before anything is written
    specs = select(cfg.tools)  # unknown tools fail before anything is written
    sandbox_mode = resolve_mode(cfg.harness.sandbox)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ws: Workspace = open_workspace(run_dir, dataroom, cfg.limits)
    identity = ws.sha256
    noise_added = _add_noise(cfg, ws)
    gold_files = list(info.gold.gold_files) if info.gold else []
    client = make_client(cfg, endpoint, question, gold_files, run_dir)
    if cfg.harness.run_ceiling_s:
        client.deadline = t0 + cfg.harness.run_ceiling_s
    started = dt.datetime.now(dt.timezone.utc)
    record = RunRecord(
        run_id=info.run_id or "", question=question, status="running", question_id=info.question_id, question_type=info.question_type,
        questions_path=info.questions_path, gold=info.gold, sweep=info.sweep, axes=dict(info.axes), model=cfg.model.name,
        budget=cfg.harness.budget, budget_unit=cfg.harness.budget_unit, token_metric=cfg.harness.token_metric,
        force_budget=cfg.harness.force_budget, sandbox=sandbox_mode, sandbox_quota=quota_record(cfg.harness, sandbox_mode),
        delivery=cfg.harness.delivery, config=cfg.to_dict(),
        dataroom=DataroomInfo(source=ws.source, identity=identity, sha256=ws.sha256, files=len(ws.files), bytes=ws.total_bytes, noise=noise_added),
        searchbox_version=__version__, started_at=started.isoformat(),
    )
    recorder = None
    ctx = ToolContext(work=ws.work, harness=cfg.harness, sandbox_mode=sandbox_mode)
    try:
        if isinstance(client, ChatClient):  # its own llama-server slot, erased: a run never continues another's cache
            client.start_clean(info.slot)
        record.served = served_identity(client, cfg, endpoint)
        record.run_id = record.run_id or run_key(cfg, info.question_id, question, identity, record.served,
                                                 protocol=resolved_protocol(cfg, client), gold=info.gold)
        recorder = Recorder(run_dir, record)
        toolset, ctx = _tools(cfg, ws, sandbox_mode, specs)
        record.tools = toolset.names
        recorder.write_record()
        window = cfg.model.context_window or client.context_window() or DEFAULT_CONTEXT
        record.context_window = window
        harness.run(_context(cfg, question, ws, client, toolset, recorder, window, t0, should_pause))  # t0: the ceiling counts setup
    except BaseException as exc:
        if recorder is None:  # failed before the loop could start: still leave a record that says why
            recorder = Recorder(run_dir, record)
        if not record.stop_reason:
            record.stop_reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "model_error"
            record.stop_detail = f"run did not start: {type(exc).__name__}: {exc}"
        if not isinstance(exc, (SearchboxError, KeyboardInterrupt)):
            _finish(record, recorder, ws, client, ctx)
            raise
    return _finish(record, recorder, ws, client, ctx)


def resume(run_dir: Path, endpoint: Optional[str], budget: Optional[int] = None, should_pause: Optional[Callable[[], bool]] = None) -> dict:
    """Continue a stopped run from its last checkpoint (a finished step or turn), same run_id, accounting continuous."""
    run_dir = Path(run_dir)
    if not (run_dir / "run_meta.json").exists():
        raise SearchboxError(f"{run_dir}: not a run directory (no run_meta.json)")
    record = read_record(run_dir)
    state = read_state(run_dir)
    if state is None:
        raise SearchboxError(f"{run_dir}: no checkpoint to resume from (state.json missing)")
    cfg = RunConfig.from_dict(record.config)
    if budget is not None:
        cfg.harness.budget = budget
    cfg.validate()
    kind = state.get("harness", "native")  # checkpoints from before the harness seam are the native loop's
    if kind != cfg.harness.kind:
        raise SearchboxError(f"{run_dir}: its checkpoint is the {kind} harness's, its config says {cfg.harness.kind}")
    harness = harnesses.load(kind)
    harness.check(cfg)
    if record.stop_reason in TERMINAL_STOPS and cfg.harness.budget_unit == "turns" and cfg.harness.budget <= record.turns:
        raise SearchboxError(f"{run_dir}: finished ({record.stop_reason}, {record.turns} turns); pass a budget above {record.turns} to continue")
    with contextlib.suppress(FileNotFoundError):
        (run_dir / "PAUSE").unlink()
    ws = Workspace(run_dir=run_dir, source=record.dataroom.source, sha256=record.dataroom.sha256, total_bytes=record.dataroom.bytes)
    if not ws.dataroom.is_dir() or ws.dataroom.is_symlink():
        raise SearchboxError(f"{run_dir}: its dataroom is gone; cannot resume")
    specs = select(record.tools or cfg.tools)
    sandbox_mode = resolve_mode(cfg.harness.sandbox)
    gold_files = list(record.gold.gold_files) if record.gold else []
    client = make_client(cfg, endpoint, record.question, gold_files, run_dir)
    if cfg.harness.run_ceiling_s:
        client.deadline = time.monotonic() + cfg.harness.run_ceiling_s - record.elapsed_s
    if isinstance(client, ChatClient):  # the resumed part starts from a cold slot too: its first request is prefilled fresh
        client.start_clean()
        record.served.slot, record.served.slot_start = client.slot, client.slot_start
    record.config, record.budget, record.status, record.resumes = cfg.to_dict(), cfg.harness.budget, "running", record.resumes + 1
    record.stop_reason = record.stop_detail = ""
    recorder = Recorder(run_dir, record, resume=True)
    toolset, ctx = _tools(cfg, ws, sandbox_mode, specs)
    try:
        recorder.write_record()
        harness.resume(_context(cfg, record.question, ws, client, toolset, recorder, record.context_window or DEFAULT_CONTEXT,
                                time.monotonic(), should_pause), state)
    except BaseException:
        _finish(record, recorder, ws, client, ctx)
        raise
    return _finish(record, recorder, ws, client, ctx)


def prepare_out(out: Path, overwrite: bool) -> None:
    """--out must be new or empty, unless --overwrite says to clear it (links inside are removed, never followed)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SearchboxError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise SearchboxError(f"--out {out} is not empty: pass --resume to continue that run or --overwrite to replace it")
        remove_tree(out)  # any depth, any modes, no link followed (the model may have built it)


def sigterm_as_interrupt() -> None:
    """SIGTERM ends a run like Ctrl-C: stop reason `interrupted`, logs complete, server stopped."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


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
    from . import threads

    embeds = any(s.tier != "builtin" for s in select(cfg.tools))
    local = not (endpoint or cfg.model.endpoint or os.environ.get("LLAMA_URL") or cfg.model.policy)
    shared = threads.whole_machine()
    threads.apply(threads.plan(threads.available_cores(), cfg.model.parallel, embeds, server_local=local, may_split=False,
                               shared=shared, load=threads.other_load()[0] if shared else 0.0))


@cli
def main(argv: Optional[list[str]] = None) -> int:
    from .index.console import showing
    from .threads import preset_blas_env

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
        dataroom_identity(dataroom)  # refuse an unreadable input before starting a server
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


if __name__ == "__main__":
    sys.exit(main())
