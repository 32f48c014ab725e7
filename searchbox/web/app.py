"""The FastAPI app: pages, the jobs API, a run's live events (SSE from its own trace), files, sweeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from .. import bounds
from ..config import UPLOAD_LIMITS
from ..corpus.dataroom import make_writable, open_workspace
from ..errors import ConfigError, SearchboxError
from ..harness import kinds as harness_kinds
from ..tools.catalog import CATALOG, NAMED_TIERS, TIERS, select, tier_members
from . import prepare, questionsets, runview, sweeps
from .endpoints import EndpointNotAllowed, EndpointPolicy
from .guard import Guard, error_page
from .jobs import JobRunner, new_job_id
from .scheduler import PAUSING, TERMINAL, Job, Scheduler, SchedulerError, UnknownJob

log = logging.getLogger("searchbox.web")

POLL_S = 0.4
MAX_QUESTION = 20_000
TIER_LABELS = {"builtin": "Built-in tools", "high": "High tier: dataroom-aware", "low": "Low tier: embedding primitives"}
MODEL_RX = re.compile(r"[\w.:/@+-]{1,200}")


@dataclass
class WebSettings:
    """What the server was started with (serve.py builds it from the command line)."""

    outputs: Path
    endpoint: str  # the model endpoint jobs use (the embedded llama-server's URL, or --endpoint)
    endpoint_label: str = ""  # what the home page says about it
    allowed_endpoints: tuple[str, ...] = ()  # other endpoints a job may name (--allow-endpoint); `endpoint` always may
    model: Optional[str] = None  # model id sent by jobs (None: the server's default)
    token: Optional[str] = None
    loopback: bool = True  # bound to loopback: refuse foreign Host headers (DNS rebinding)
    slots: int = 1
    preempt: bool = True  # a new job pauses a running one (serve --no-preempt, $PREEMPT_FOREGROUND=0)
    backfill: bool = True  # idle slots resume paused jobs (serve --no-backfill, $AUTO_BACKFILL=0)
    sandbox: str = "auto"
    max_upload_bytes: int = 200 * 1024**2
    max_budget: int = 1000  # turns; a token budget may be up to 10_000 times this
    poll_s: float = 0.25  # how often the job loop looks at its children


class BadInput(SearchboxError):
    """A request the app refuses, with the reason."""


class TooLarge(BadInput):
    """An upload past the limit."""


def create_app(settings: WebSettings) -> FastAPI:
    settings.outputs = Path(settings.outputs).resolve()
    web_root = settings.outputs / "web"
    endpoints = EndpointPolicy(settings.endpoint, settings.allowed_endpoints)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        web_root.mkdir(parents=True, exist_ok=True)
        sched = Scheduler(web_root / "jobs.sqlite", settings.slots, preempt=settings.preempt, backfill=settings.backfill)
        runner = JobRunner(sched, web_root, settings.endpoint, settings.sandbox, settings.poll_s, endpoints=endpoints).start()
        app.state.sched, app.state.runner, app.state.stopping = sched, runner, False
        try:
            yield
        finally:
            app.state.stopping = True
            await run_in_threadpool(runner.stop)
            sched.close()

    max_body = settings.max_upload_bytes + 1024**2  # the zip plus the form's other fields
    small = 64 * 1024
    # Body limits per route, so the Guard (a user middleware, inside any app-wide limit) answers first with the reason.
    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, token=settings.token, loopback=settings.loopback, max_body=max_body)
    static = Path(str(resources.files("searchbox.web") / "static"))
    app.mount("/static", StaticFiles(directory=static), name="static")
    templates = Path(str(resources.files("searchbox.web") / "templates"))

    def page(name: str) -> HTMLResponse:
        return HTMLResponse((templates / name).read_text(encoding="utf-8"))

    def fail(request: Request, status: int, message: str):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return HTMLResponse(error_page(status, message), status_code=status)

    # ---- errors: a reason, never a traceback ---------------------------------------------
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return fail(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
        return fail(request, 400, f"{where}: {first.get('msg', 'invalid input')}")

    def reason_with(status: int):
        async def handler(request: Request, exc: Exception):
            return fail(request, status, str(exc))
        return handler

    # Starlette picks the handler of the most specific class, so SearchboxError is the fallback of the others.
    for error, status in ((runview.NotFound, 404), (UnknownJob, 404), (SchedulerError, 409), (TooLarge, 413), (EndpointNotAllowed, 403),
                          (SearchboxError, 400)):
        app.add_exception_handler(error, reason_with(status))

    @app.exception_handler(MultiPartException)
    async def bad_form(request: Request, exc: MultiPartException):
        return fail(request, 400, f"bad form: {exc.message}")

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)
        return fail(request, 500, "internal error (the server log has the details)")

    # ---- pages ---------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    async def home():
        return page("index.html")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon():
        return FileResponse(static / "favicon.svg", media_type="image/svg+xml")

    @app.get("/runs/{ref:path}", response_class=HTMLResponse)
    async def run_page(ref: str):
        located(ref)
        return page("run.html")

    @app.get("/sweeps", response_class=HTMLResponse)
    async def sweeps_page():
        return page("sweeps.html")

    @app.get("/sweeps/{name}", response_class=HTMLResponse)
    async def sweep_page(name: str):
        sweeps.sweep_dir(settings.outputs, name)
        return page("sweep.html")

    @app.get("/compare", response_class=HTMLResponse)
    async def compare_page(a: str, b: str):
        located(a), located(b)
        return page("compare.html")

    @app.get("/sweeps/{name}/figures/{figure}")
    async def figure(name: str, figure: str):
        path = sweeps.figure_path(settings.outputs, name, figure)
        return FileResponse(path, media_type="image/svg+xml" if figure.endswith(".svg") else "image/png")

    # ---- config and jobs -----------------------------------------------------------------
    @app.get("/api/config")
    async def config():
        return {
            "tiers": [{"name": t, "label": TIER_LABELS.get(t, t),
                       "tools": [{"name": s.name, "default": s.default, "description": s.description,
                                  "args": list(s.parameters.get("properties", {}))} for s in CATALOG if s.tier == t]}
                      for t in TIERS],
            "named": [{"name": t.name, "members": tier_members(t.name), "description": t.description, "isolated": t.isolated} for t in NAMED_TIERS],
            "builtins": [s.name for s in CATALOG if s.tier == "builtin"],
            "endpoint": settings.endpoint_label or settings.endpoint, "allowed_endpoints": endpoints.allowed,
            "model": settings.model, "slots": settings.slots,
            "max_upload_mb": round(settings.max_upload_bytes / 1024**2, 1), "max_budget": settings.max_budget,
            "harnesses": list(harness_kinds()),
            "question_sets": [{"name": q.name, "label": q.label} for q in questionsets.sets().values()],
        }

    @app.get("/api/question_sets/{name}")
    async def question_set(name: str):
        if name not in questionsets.sets():
            raise runview.NotFound(f"no question set {name[:60]!r}")
        return {"name": name, "questions": await run_in_threadpool(questionsets.listing, name)}

    def job_view(job: Job, waiting: Optional[dict] = None) -> dict:
        """A job as the pages and scripts see it: its fields, why it waits and where it stands, what each action does."""
        if waiting is None:
            waiting = app.state.sched.waiting()
        progress = app.state.runner.progress(job.id) if job.state == "preparing" else None
        return {**job.public(), "ref": f"web/jobs/{job.id}", "url": f"/runs/web/jobs/{job.id}", "wait": waiting.get(job.id),
                "progress": progress, "actions": job_actions(job)}

    @app.get("/api/jobs")
    async def list_jobs():
        waiting = app.state.sched.waiting()
        return {"jobs": [job_view(j, waiting) for j in reversed(app.state.sched.jobs())]}

    @app.get("/api/jobs/{job_id}")
    async def get_job(job_id: str):
        return {"job": job_view(app.state.sched.get(job_id))}

    @app.get("/api/jobs/{job_id}/log")
    async def job_log(job_id: str):
        app.state.sched.get(job_id)  # a 404 for an unknown job
        return await run_in_threadpool(app.state.runner.log_tail, job_id)

    @app.post("/api/jobs", status_code=201, max_body_size=max_body)
    async def submit(request: Request):
        form = await request.form(max_files=1, max_fields=64, max_part_size=256 * 1024)
        spec = job_spec(form, settings, endpoints)
        job_id = new_job_id()
        upload = form.get("dataroom")
        runner: JobRunner = app.state.runner
        if upload is not None and not isinstance(upload, str) and upload.filename:
            dest = runner.upload_path(job_id)
            await save_upload(upload, dest, settings.max_upload_bytes)
            try:
                await run_in_threadpool(check_zip, dest, web_root / "tmp")
            except SearchboxError as exc:
                dest.unlink(missing_ok=True)
                raise BadInput(f"dataroom {upload.filename[:200]!r} refused: {str(exc).replace(str(dest), 'upload')}") from None
            except BaseException:
                dest.unlink(missing_ok=True)
                raise
            spec["dataroom"], spec["dataroom_name"] = str(dest), upload.filename[:200]
        try:  # an index its run would build on its first search is built first, outside the model slots
            needs_index = await run_in_threadpool(prepare.index_needed, spec) is not None
        except SearchboxError as exc:
            raise BadInput(f"dataroom: {exc}") from None
        return {"job": job_view(runner.submit(job_id, spec, needs_index=needs_index))}

    @app.post("/api/jobs/{job_id}/pause", max_body_size=small)
    async def pause(job_id: str):
        return {"job": job_view(app.state.runner.hold(job_id))}

    @app.post("/api/jobs/{job_id}/resume", max_body_size=small)
    async def resume(job_id: str, request: Request):
        fields = await body_fields(request)
        job = app.state.sched.get(job_id)
        update: dict[str, Any] = {}
        if fields.get("budget") not in (None, ""):
            update["budget"] = parse_budget(fields["budget"], job.spec.get("budget_unit", "turns"), settings)
        if job.state == "done" and update.get("budget", 0) <= (job.spec.get("budget") or 0):
            raise BadInput(f"job {job_id} finished its budget of {job.spec.get('budget')}: give a larger budget to continue it")
        return {"job": job_view(app.state.runner.resume(job_id, update))}

    @app.post("/api/jobs/{job_id}/cancel", max_body_size=small)
    async def cancel(job_id: str):
        return {"job": job_view(app.state.runner.cancel(job_id))}

    # ---- runs ----------------------------------------------------------------------------
    def job_of(ref: str):
        parts = ref.strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["web", "jobs"]:
            with contextlib.suppress(SchedulerError):
                return app.state.sched.get(parts[2])
        return None

    def located(ref: str) -> Path:
        """A dependency: a bad reference is a 404 before any streaming starts. A job's run may not exist yet."""
        job = job_of(ref)
        if job is not None:  # the job's own directory (made by its run; it may not hold a run yet)
            return web_root / "jobs" / job.id
        return runview.resolve_run(settings.outputs, ref)


    @app.get("/api/runs/{ref:path}/events", response_class=EventSourceResponse)
    async def events(ref: str, request: Request, run_dir: Path = Depends(located)):
        try:  # a reconnecting EventSource says where it was; a fresh one may ask to skip what it already has
            offset = max(0, int(request.headers.get("last-event-id") or request.query_params.get("offset") or 0))
        except ValueError:
            offset = 0
        tables = (("turns", run_dir / "turns.parquet", runview.table_rows), ("calls", run_dir / "tool_calls.parquet", runview.table_rows),
                  ("meta", run_dir / "run_meta.json", lambda p: runview.read_meta(p.parent)))
        seen: dict[str, Any] = {}
        while not app.state.stopping:
            got, offset = await run_in_threadpool(runview.read_trace, run_dir, offset)
            if got:
                yield ServerSentEvent(event="trace", data=got, id=str(offset))
                continue  # drain the trace before anything else (a replay arrives in a few big events)
            for name, path, load in tables:
                stamp = runview.mtime(path)
                if stamp != seen.get(name):
                    seen[name] = stamp
                    yield ServerSentEvent(event=name, data=await run_in_threadpool(load, path))
            job = job_of(ref)
            if job is not None:
                view = job_view(job)
                if view != seen.get("job"):
                    seen["job"] = view
                    yield ServerSentEvent(event="job", data=view)
            meta = runview.read_meta(run_dir) or {}
            # A job's stream lasts while the job can still run (a held job may be resumed); a plain run's until it completes.
            if (job is not None and job.state in TERMINAL) or (job is None and meta.get("status") == "complete"):
                yield ServerSentEvent(event="end", data={"stop_reason": meta.get("stop_reason"), "error": job.error if job else None})
                return
            await asyncio.sleep(POLL_S)

    @app.get("/api/runs/{ref:path}/files")
    async def files(ref: str, run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.file_tree, run_dir)

    @app.get("/api/runs/{ref:path}/file")
    async def file(ref: str, path: str, run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.read_file, run_dir, path)

    @app.get("/api/runs/{ref:path}/answer")
    async def answer(ref: str, run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.answer, run_dir)

    @app.get("/api/runs/{ref:path}/line")
    async def trace_line(ref: str, at: int, run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.trace_line, run_dir, at)

    @app.get("/api/runs/{ref:path}/search")
    async def trace_search(ref: str, q: str = "", run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.search_trace, run_dir, q[:500])

    @app.get("/api/runs/{ref:path}/result")
    async def run_result(ref: str, run_dir: Path = Depends(located)):
        return await run_in_threadpool(runview.result, run_dir)

    @app.get("/api/runs/{ref:path}/snapshot")
    async def snapshot(ref: str, run_dir: Path = Depends(located)):
        job = job_of(ref)
        return {**await run_in_threadpool(runview.snapshot, run_dir), "job": job_view(job) if job else None}

    # ---- sweeps --------------------------------------------------------------------------
    @app.get("/api/sweeps")
    async def list_sweeps():
        return {"sweeps": await run_in_threadpool(sweeps.list_sweeps, settings.outputs)}

    @app.get("/api/sweeps/{name}")
    async def sweep(name: str):
        return await run_in_threadpool(sweeps.sweep_detail, settings.outputs, name)

    report_locks: dict[str, asyncio.Lock] = {}

    @app.post("/api/sweeps/{name}/report", max_body_size=small)
    async def report(name: str):
        sweeps.sweep_dir(settings.outputs, name)
        lock = report_locks.setdefault(name, asyncio.Lock())
        async with lock:
            result = await sweeps.render_report(settings.outputs, name)
        if not result["ok"]:
            raise BadInput(f"report failed: {result['error']}")
        return result

    return app


# ---- what a job's buttons do ---------------------------------------------------------------
def job_actions(job: Job) -> list[dict]:
    """The actions that apply to a job now, each with its button label and what it does (one source for every page)."""
    st, req = job.state, job.pause_request
    out: list[dict] = []

    def add(action: str, label: str, does: str, confirm: Optional[str] = None):
        out.append({"action": action, "label": label, "does": does, "confirm": confirm})

    if st == "running" and req not in PAUSING:
        add("pause", "Pause", "Pause after the current step; it stays paused (held) until you resume it.")
    elif st in ("queued", "paused") or (st == "preparing" and req != "hold"):
        add("pause", "Hold", {"queued": "Take it out of the queue: it will not start until you resume it.",
                              "paused": "Keep it paused: it will not resume by itself until you resume it.",
                              "preparing": "Hold it once its index is built: it will not queue until you resume it."}[st])
    if st == "held" or (st in ("running", "preparing") and req == "hold"):
        add("resume", "Resume", "Let it run again: it takes the next free model slot in its turn." if st == "held"
            else "Take the pause back: it carries on.")
    elif st == "failed":
        add("resume", "Retry", "Run it again from its last finished step (or from the start if it never began).")
    elif st == "done":
        add("resume", "Continue", "Give it a larger budget and go on from where it stopped.")
    if st not in TERMINAL or st == "failed":
        add("cancel", "Cancel", "Stop it for good" + (" after its current step" if st == "running" else "") + "; it cannot be resumed.",
            confirm="Cancel this job? It stops for good and cannot be resumed.")
    return out


# ---- input checks --------------------------------------------------------------------------
def job_spec(form, settings: WebSettings, endpoints: EndpointPolicy) -> dict:
    """A job's spec from the submitted form; BadInput names the first problem."""
    question = str(form.get("question") or "").strip()
    if not question and not str(form.get("question_set") or "").strip():  # a set's question brings its own text (gold_of)
        raise BadInput("question: required")
    if len(question) > MAX_QUESTION or "\x00" in question:
        raise BadInput(f"question: at most {MAX_QUESTION} characters of text")
    unit = str(form.get("budget_unit") or "turns")
    if unit not in ("turns", "tokens"):
        raise BadInput("budget_unit: turns or tokens")
    budget = parse_budget(form.get("budget") or "1", unit, settings)
    force = str(form.get("force_budget", "true")).lower() in ("1", "true", "on", "yes")
    tools = str(form.get("tools") or "").strip() or None
    if tools is not None:
        if len(tools) > 2000:
            raise BadInput("tools: too long")
        try:
            names = [s.name for s in select(tools)]
        except ConfigError as exc:
            raise BadInput(f"tools: {exc}") from exc
    else:
        names = [s.name for s in select(None)]
    model = str(form.get("model") or "").strip() or settings.model
    if model and not MODEL_RX.fullmatch(model):
        raise BadInput("model: an id of letters, digits and . : / @ + - _")
    endpoint = str(form.get("endpoint") or "").strip() or None
    if endpoint:  # only the server's own endpoint or one its operator allowed (EndpointRefused: 400, EndpointNotAllowed: 403)
        endpoint = endpoints.check(endpoint)
    harness = str(form.get("harness") or "native")
    if harness not in harness_kinds():
        raise BadInput(f"harness: one of {', '.join(harness_kinds())}")
    spec = {"question": question, "budget": budget, "budget_unit": unit, "force_budget": force, "tools": tools,
            "tool_names": names, "model": model, "endpoint": endpoint, "dataroom": None, "harness": harness}
    spec.update(study_axes(form))
    spec.update(gold_of(form, spec))
    return spec


def _choice(form, name: str, options: tuple[str, ...]) -> Optional[str]:
    value = str(form.get(name) or "").strip()
    if value and value not in options:
        raise BadInput(f"{name}: one of {', '.join(options)}")
    return value or None


def _number(form, name: str, kind: type, low: float, high: float) -> Optional[float]:
    text = str(form.get(name) or "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise BadInput(f"{name}: a {'whole ' if kind is int else ''}number, not {text[:40]!r}") from None
    if not low <= value <= high or value != value:
        raise BadInput(f"{name}: between {low:g} and {high:g}")
    return value


def study_axes(form) -> dict:
    """The axes a sweep has, for one web job: retriever, delivery, noise, control policy, seed, temperature, max_tokens."""
    return {"retriever": _choice(form, "retriever", ("dense", "bm25", "hybrid")),
            "delivery": _choice(form, "delivery", ("inline", "file")),
            "policy": _choice(form, "policy", ("keyword", "dense", "oracle")),
            "noise": _number(form, "noise", float, 0, 10), "seed": _number(form, "seed", int, 0, 2**31 - 1),
            "temperature": _number(form, "temperature", float, 0, 2), "max_tokens": _number(form, "max_tokens", int, 1, 131072)}


def gold_of(form, spec: dict) -> dict:
    """The job's gold, so that its run is graded: a question of a packaged set (its text, gold and dataroom), or a
    gold answer typed with the question (aliases one per line). Neither: the run is not graded."""
    from . import questionsets

    name = str(form.get("question_set") or "").strip()
    if name:
        q = questionsets.find(name, str(form.get("question_id") or "").strip())
        if q is None:
            raise BadInput(f"question_id: not a question of set {name[:60]!r}" if name in questionsets.sets()
                           else f"question_set: one of {', '.join(questionsets.sets())}")
        qs = questionsets.sets()[name]
        return {"question": q.question, "question_id": q.id, "questions_path": str(qs.path), "question_set": name,
                "set_dataroom": str(qs.dataroom), "gold": q.answer, "aliases": list(q.aliases), "gold_files": list(q.gold_files)}
    gold = str(form.get("gold") or "").strip()
    aliases = [a.strip() for a in str(form.get("aliases") or "").splitlines() if a.strip()]
    if len(gold) > 2000 or "\x00" in gold or len(aliases) > 50 or any(len(a) > 2000 for a in aliases):
        raise BadInput("gold: at most 2000 characters, and at most 50 aliases")
    if aliases and not gold:
        raise BadInput("aliases: need a gold answer")
    if spec.get("policy") == "oracle":
        raise BadInput("policy: the oracle reads the question's gold files: pick a question of a question set")
    return {"gold": gold or None, "aliases": aliases}


def parse_budget(value: Any, unit: str, settings: WebSettings) -> int:
    cap = settings.max_budget * (10_000 if unit == "tokens" else 1)
    try:
        budget = int(str(value).strip())
    except ValueError:
        raise BadInput(f"budget: a whole number, not {str(value)[:40]!r}") from None
    if not 1 <= budget <= cap:
        raise BadInput(f"budget: between 1 and {cap} {unit}")
    return budget


BODY_CAP = 64 * 1024  # bytes of a small request's body (a resume's new budget)
BODY_DEPTH = 8  # levels of JSON nesting it may have


async def body_fields(request: Request) -> dict:
    """A small request's fields: a JSON body is read to at most BODY_CAP bytes and BODY_DEPTH levels (else 413 or
    400 with the reason), never handed whole to a recursive parser."""
    ctype = request.headers.get("content-type", "")
    if "json" in ctype:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > BODY_CAP:
                raise TooLarge(f"body: larger than {BODY_CAP // 1024} KiB")
            chunks.append(chunk)
        raw = b"".join(chunks)
        if nesting(raw, BODY_DEPTH) > BODY_DEPTH:  # counted before parsing: a deep body never reaches the parser
            raise BadInput(f"body: nested deeper than {BODY_DEPTH} levels")
        try:
            data = bounds.loads(raw)
        except ValueError:
            raise BadInput("body: not valid JSON") from None
        return data if isinstance(data, dict) else {}
    if "form" in ctype:
        return dict(await request.form(max_files=0, max_fields=16))
    return dict(request.query_params)


def nesting(raw: bytes, limit: int) -> int:
    """How deep JSON text nests its arrays and objects (brackets inside strings not counted), stopping past limit."""
    level = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            level += 1
            if level > deepest:
                deepest = level
                if deepest > limit:
                    return deepest
        elif byte in (0x5D, 0x7D):
            level -= 1
    return deepest


async def save_upload(upload, dest: Path, cap: int) -> None:
    """Copy an uploaded file to dest in chunks, refusing it past `cap` bytes."""
    written = 0
    try:
        with open(dest, "wb") as out:
            while chunk := await upload.read(1024**2):
                written += len(chunk)
                if written > cap:
                    raise TooLarge(f"dataroom: larger than the upload limit of {cap / 1024**2:.0f} MiB")
                out.write(chunk)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


def check_zip(path: Path, scratch: Path) -> None:
    """The CLI's own checks: extract into a scratch workspace (traversal, links, bombs, limits), then discard it."""
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="check-", dir=scratch))
    try:
        open_workspace(tmp, path, UPLOAD_LIMITS)  # an upload is untrusted: the tight caps
    finally:
        make_writable(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
