"""One run end to end (dataroom -> harness -> artifacts) and its resume; the CLI is searchbox.run.cli."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from .. import __version__
from .. import harness as harnesses
from ..harness.agent import read_answer
from ..config import RunConfig
from ..corpus.dataroom import RESERVE, Workspace, open_workspace, place
from ..errors import ConfigError, ModelError, SearchboxError
from ..harness.base import RunContext
from ..model.served import served_identity
from ..model.served import model_label, served_key
from ..record.spec import RunSpec
from .identity import resolve, resolved_protocol, with_limits
from ..model.limits import window_of
from ..model.llm import ChatClient, parse_metrics
from ..record import done
from ..record.artifacts import DamagedArtifact
from ..record.record import DataroomInfo, Gold, Recorder, RunRecord, read_spec, read_state
from ..tools import ToolContext, Toolset, offered
from ..tools.sandbox import quota_record, resolve_mode

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
    spec: Optional[RunSpec] = None  # the run as the caller resolved and keyed it (a sweep); null: resolved here


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
    from ..model.llama import LlamaServer

    with LlamaServer.from_config(cfg.model) as server:
        yield server.url


def make_client(cfg: RunConfig, endpoint: Optional[str], question: str, gold_files: list[str], run_dir: Optional[Path] = None):
    """The model behind the run: an OpenAI-compatible endpoint, or a non-neural control policy (which reads the tools'
    results as data from the run's trace)."""
    if cfg.model.policy:
        from ..model.controls import make_control

        return make_control(cfg.model.policy, cfg.model, question, gold_files, run_dir / "trace.jsonl" if run_dir else None)
    if not endpoint:
        raise SearchboxError("no model endpoint: give --endpoint, set LLAMA_URL, or leave both unset for the embedded server")
    return ChatClient(cfg.model, endpoint)


def _add_noise(cfg: RunConfig, ws: Workspace, link: bool) -> list[dict]:
    """Show the noise axis's distractor-mixed view of the dataroom (built once per corpus and plan, corpus.store);
    returns what was added."""
    if cfg.noise.ratio <= 0:
        return []
    from ..corpus import noise, store

    plan = noise.plan(cfg.noise, [(rel, size) for rel, size, _ in ws.copy.files])
    base = store.shared_copy(ws.source, cfg.limits)
    view, added = store.noise_view(base, plan, cfg.limits)
    place(ws, view, link)
    return added


def _tools(cfg: RunConfig, ws: Workspace, sandbox_mode: str, specs) -> tuple[Toolset, ToolContext]:
    ctx = ToolContext(work=ws.work, harness=cfg.harness, sandbox_mode=sandbox_mode, dataroom_source=ws.shared)
    if any(s.tier != "builtin" for s in specs):
        from ..retrieval import Retrieval

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
    with contextlib.suppress(OSError):  # the full-disk reserve (corpus.dataroom.RESERVE) is needed only while it runs
        (ws.run_dir / RESERVE).unlink()
    with contextlib.suppress(Exception):
        client.close()
    return record.to_dict()


def _context(cfg: RunConfig, spec: RunSpec, question: str, ws: Workspace, client, toolset: Toolset, recorder: Recorder,
             window: int, started: float, should_pause: Optional[Callable[[], bool]]) -> RunContext:
    """The one way a harness gets its run, new or resumed."""
    return RunContext(config=cfg, spec=spec, question=question, workspace=ws, client=client, toolset=toolset, recorder=recorder,
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
    specs = offered(cfg)  # unknown tools fail before anything is written
    sandbox_mode = resolve_mode(cfg.harness.sandbox)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    link = sandbox_mode == "none"  # commands run on the host: work/dataroom is a link to the shared copy
    ws: Workspace = open_workspace(run_dir, dataroom, cfg.limits, link=link)
    identity = ws.sha256
    noise_added = _add_noise(cfg, ws, link)
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
        dataroom=DataroomInfo(source=ws.source, identity=identity, sha256=ws.sha256, files=ws.count, bytes=ws.total_bytes, noise=noise_added),
        searchbox_version=__version__, started_at=started.isoformat(),
    )
    recorder = None
    ctx = ToolContext(work=ws.work, harness=cfg.harness, sandbox_mode=sandbox_mode, dataroom_source=ws.shared)
    try:
        if isinstance(client, ChatClient):  # its own llama-server slot, erased: a run never continues another's cache
            client.start_clean(info.slot)
        record.served = served_identity(client, cfg, endpoint)
        record.model = model_label(cfg, record.served)  # what served it, where the config's name is only a preset's
        # The server's window and reply cap where they beat the config's (model.limits): the key covers what it gets.
        cfg, record.limits = with_limits(cfg, client if isinstance(client, ChatClient) else None, DEFAULT_CONTEXT)
        record.config = cfg.to_dict()
        spec = info.spec or resolve(cfg, info.question_id, question, identity, record.served,
                                    protocol=resolved_protocol(cfg, client), gold=info.gold)
        if spec.served != served_key(record.served):  # the endpoint changed model since the caller keyed the run
            raise ModelError(f"the endpoint now serves {served_key(record.served)}; the run was keyed for {spec.served}")
        record.run_id = record.run_id or spec.key
        recorder = Recorder(run_dir, record)
        recorder.write_spec(spec)
        toolset, ctx = _tools(cfg, ws, sandbox_mode, specs)
        record.tools = toolset.names
        window = window_of(record.limits, cfg.model.context_window or client.context_window() or DEFAULT_CONTEXT)
        record.context_window, record.protocol = window, harness.protocol(spec)
        recorder.write_record()  # whole from the first write: a live dashboard reads the window and protocol before the first call
        harness.run(_context(cfg, spec, question, ws, client, toolset, recorder, window, t0, should_pause))  # t0: the ceiling counts setup
    except BaseException as exc:
        if recorder is None:  # failed before the loop could start: still leave a record that says why
            recorder = Recorder(run_dir, record)
        if not record.stop_reason:
            record.stop_reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "model_error"
            record.stop_detail = f"run did not start: {type(exc).__name__}: {exc}"
        # A bug, or a config this server cannot run (a native protocol on a tool-less template): the caller sees it.
        if not isinstance(exc, (SearchboxError, KeyboardInterrupt)) or isinstance(exc, ConfigError):
            _finish(record, recorder, ws, client, ctx)
            raise
    return _finish(record, recorder, ws, client, ctx)


def _spec_of(run_dir: Path, cfg: RunConfig, record: RunRecord) -> RunSpec:
    """The resolved run a resume continues: key.json as the run wrote it, else (a run from before key.json) resolved
    again from its record. A resume keeps the run's id whatever its budget: the spec says what it sends."""
    try:
        spec = read_spec(run_dir)
    except ValueError as exc:
        raise SearchboxError(f"{run_dir}: {exc}") from None
    if spec is not None:
        return spec
    return resolve(cfg, record.question_id, record.question, record.dataroom.identity, record.served,
                   protocol=record.protocol or "native", gold=record.gold)


def _reopen(run_dir: Path, record: RunRecord, cfg: RunConfig, link: bool) -> Workspace:
    """The resumed run's workspace, on the same shared copy (made again from the source if it was pruned): a copy
    whose content is not the run's is refused, never shown."""
    from ..corpus import store

    ws = Workspace(run_dir=run_dir, source=record.dataroom.source)
    found = store.find_copy(record.dataroom.sha256)
    if found is None and record.dataroom.source:
        with contextlib.suppress(SearchboxError, OSError):
            base = store.shared_copy(record.dataroom.source, cfg.limits)
            if record.dataroom.noise:
                from ..corpus import noise

                plan = noise.plan(cfg.noise, [(rel, size) for rel, size, _ in base.files])
                base, _ = store.noise_view(base, plan, cfg.limits)
            found = base if base.identity == record.dataroom.sha256 else None
    if found is None:
        raise SearchboxError(f"{run_dir}: its dataroom is gone (no copy with identity {record.dataroom.sha256[:12]}); cannot resume")
    place(ws, found, link)
    return ws


def resume(run_dir: Path, endpoint: Optional[str], budget: Optional[int] = None, should_pause: Optional[Callable[[], bool]] = None) -> dict:
    """Continue a stopped run from its last checkpoint (a finished step or turn), same run_id, accounting continuous."""
    run_dir = Path(run_dir)
    if not os.path.lexists(run_dir / "run_meta.json"):
        raise SearchboxError(f"{run_dir}: not a run directory (no run_meta.json)")
    # Everything a resume reads is checked before anything is written: a damaged run is named in one line and left as it is.
    try:
        record = done.read_record(run_dir)
        state = read_state(run_dir)
    except DamagedArtifact as exc:
        raise SearchboxError(f"{run_dir}: cannot resume: {exc}") from None
    if state is None:
        raise SearchboxError(f"{run_dir}: no checkpoint to resume from (state.json missing)")
    try:
        cfg = RunConfig.from_dict(record.config)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SearchboxError(f"{run_dir}: cannot resume: its config does not load ({str(exc)[:200]})") from None
    if budget is not None:
        cfg.harness.budget = budget
    cfg.validate()
    kind = state.get("harness", "native")  # checkpoints from before the harness seam are the native loop's
    if kind != cfg.harness.kind:
        raise SearchboxError(f"{run_dir}: its checkpoint is the {kind} harness's, its config says {cfg.harness.kind}")
    if kind not in harnesses.kinds():
        raise SearchboxError(f"{run_dir}: cannot resume: its checkpoint names no known harness")
    harness = harnesses.load(kind)
    harness.check(cfg)
    harness.restore(state)  # the checkpoint's shape and types, before the record is touched
    if record.stop_reason in TERMINAL_STOPS and cfg.harness.budget_unit == "turns" and cfg.harness.budget <= record.turns:
        raise SearchboxError(f"{run_dir}: finished ({record.stop_reason}, {record.turns} turns); pass a budget above {record.turns} to continue")
    with contextlib.suppress(FileNotFoundError):
        (run_dir / "PAUSE").unlink()
    sandbox_mode = resolve_mode(cfg.harness.sandbox)
    ws = _reopen(run_dir, record, cfg, sandbox_mode == "none")
    specs = offered(dataclasses.replace(cfg, tools=record.tools or cfg.tools))
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
        harness.resume(_context(cfg, _spec_of(run_dir, cfg, record), record.question, ws, client, toolset, recorder,
                                record.context_window or DEFAULT_CONTEXT,
                                time.monotonic(), should_pause), state)
    except BaseException:
        _finish(record, recorder, ws, client, ctx)
        raise
    return _finish(record, recorder, ws, client, ctx)
