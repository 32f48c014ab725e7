"""Which jobs hold the model's slots: foreground FIFO, preemption, auto-backfill, sticky pause; state in SQLite.

Pure bookkeeping: no processes, no model. The job runner asks `step()` what to start and tells
`exited()` how each process ended; it pauses a running job by creating its PAUSE file while its
`pause_request` is one of PAUSING. The rules:

- A submitted job whose dataroom index is not built yet is `preparing`: the runner builds the index outside
  the model's slots (other jobs run meanwhile); once it is ready the job joins the queue like a new job.
- A submitted job joins the foreground queue, first in first out.
- Free slots go to, in order: the head of the foreground queue; preempted jobs, the most recently
  preempted first (a preempted job resumes ahead of backfill); then the oldest paused job
  (auto-backfill).
- A queued job that finds no free slot preempts a running job that started before it was queued
  (a new job preempts the running one, but jobs that waited together keep their FIFO order);
  backfilled jobs are preempted before foreground ones. A preempted job is paused between steps
  and returns to the pool.
- A user's pause is sticky: the job is `held` until an explicit resume, which puts it in the
  foreground queue (ahead of backfill, behind the jobs already queued). A held job is never backfilled.
- Both automatic moves can be switched off (`--no-preempt`, `--no-backfill`; $PREEMPT_FOREGROUND and
  $AUTO_BACKFILL): without preemption a queued job waits for a free slot; without backfill a paused job
  that was not preempted waits for an explicit resume.
- After a restart, jobs that were running return to the pool as preempted; a pending user pause
  makes them held, a pending cancel cancelled.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import SearchboxError

STATES = ("preparing", "queued", "running", "paused", "held", "done", "failed", "cancelled")
TERMINAL = ("done", "failed", "cancelled")  # nothing runs any more (done and failed ones may still be continued)
RESULT_STOPS = {"budget_spent", "first_turn_done", "token_budget_spent", "ceiling_seconds", "context_exhausted"}
RESUMABLE_STOPS = {"paused", "interrupted"}
PAUSING = ("preempt", "hold", "cancel")  # pause requests the runner turns into a PAUSE file

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,            -- submission order
    state TEXT NOT NULL,
    spec TEXT NOT NULL,              -- JSON: question, budget, tools, ... (what the runner needs)
    run_dir TEXT NOT NULL,
    queued_at INTEGER,               -- tick it joined the foreground queue (FIFO key)
    started_at INTEGER,              -- tick it last got a slot
    started_from TEXT,               -- queue | pool
    pooled_at INTEGER,               -- tick it entered the paused pool
    preempted INTEGER NOT NULL DEFAULT 0,
    pause_request TEXT,              -- preempt | hold | cancel (asked to stop), or resumed (a hold taken back)
    launches INTEGER NOT NULL DEFAULT 0,
    prepare TEXT,                    -- JSON: how preparing ended (seconds, chunks, built), once it has
    stop_reason TEXT,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS clock (id INTEGER PRIMARY KEY CHECK (id = 1), tick INTEGER NOT NULL);
INSERT OR IGNORE INTO clock VALUES (1, 0);
"""


class SchedulerError(SearchboxError):
    """An operation that does not apply to the job's state."""


class UnknownJob(SchedulerError):
    """No job by that id."""


@dataclass
class Job:
    id: str
    seq: int
    state: str
    spec: dict
    run_dir: str
    queued_at: Optional[int]
    started_at: Optional[int]
    started_from: Optional[str]
    pooled_at: Optional[int]
    preempted: bool
    pause_request: Optional[str]
    launches: int
    prepare: Optional[dict]
    stop_reason: Optional[str]
    error: Optional[str]
    created: float
    updated: float

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def public(self) -> dict[str, Any]:
        """What the API shows."""
        pausing = self.pause_request if self.pause_request in PAUSING else None
        return {"id": self.id, "state": self.state, "terminal": self.terminal, "pausing": pausing,
                "question": self.spec.get("question", ""), "budget": self.spec.get("budget"), "budget_unit": self.spec.get("budget_unit", "turns"),
                "tools": self.spec.get("tools"), "tool_names": self.spec.get("tool_names"), "model": self.spec.get("model"),
                "dataroom": self.spec.get("dataroom_name"), "launches": self.launches, "prepare": self.prepare,
                "stop_reason": self.stop_reason, "error": self.error,  # the run's (a cancelled one stopped as `paused`: pages show the state)
                "created": self.created, "updated": self.updated, "seq": self.seq, "preempted": self.preempted}


@dataclass(frozen=True)
class Launch:
    """A job that step() gave a slot: `resume` when it ran before, else `start`."""

    kind: str
    job: Job


class Scheduler:
    """The job table and its rules. Thread-safe; every method is one transaction."""

    def __init__(self, db_path: str | Path, slots: int = 1, preempt: bool = True, backfill: bool = True):
        """preempt=False: a queued job waits for a free slot (no running job is paused for it); backfill=False:
        a paused job the user did not resume (nor a newer job pushed out) waits for an explicit resume."""
        if slots < 1:
            raise SchedulerError(f"slots={slots}: need at least one")
        self.slots, self.preempt, self.backfill = slots, preempt, backfill
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(db_path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        if "prepare" not in {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}:  # a jobs.sqlite from before `preparing`
            self._db.execute("ALTER TABLE jobs ADD COLUMN prepare TEXT")
        self._recover()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- reading -------------------------------------------------------------------------
    def get(self, job_id: str) -> Job:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise UnknownJob(f"no such job: {job_id}")
        return _job(row)

    def jobs(self, state: Optional[str] = None) -> list[Job]:
        with self._lock:
            if state:
                rows = self._db.execute("SELECT * FROM jobs WHERE state = ? ORDER BY seq", (state,)).fetchall()
            else:
                rows = self._db.execute("SELECT * FROM jobs ORDER BY seq").fetchall()
        return [_job(r) for r in rows]

    # ---- user actions --------------------------------------------------------------------
    def submit(self, job_id: str, spec: dict, run_dir: str | Path, prepare: bool = False) -> Job:
        """A new foreground job at the tail of the queue; `prepare`: its index is built first, outside the slots."""
        with self._tx() as db:
            tick = None if prepare else self._tick(db)
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            now = time.time()
            db.execute("INSERT INTO jobs (id, seq, state, spec, run_dir, queued_at, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (job_id, seq, "preparing" if prepare else "queued", json.dumps(spec), str(run_dir), tick, now, now))
        return self.get(job_id)

    def prepared(self, job_id: str, ok: bool, info: Optional[dict] = None, error: str = "") -> Job:
        """The runner finished preparing a job: it joins the queue as a new arrival (held if the user held it meanwhile),
        or fails with the reason. A job cancelled meanwhile stays cancelled."""
        with self._tx() as db:
            job = self.get(job_id)
            if job.state != "preparing":
                return job
            note = json.dumps({**(info or {}), **({} if ok else {"failed": True})})
            if not ok:
                self._set(db, job_id, state="failed", pause_request=None, prepare=note, error=error or "preparing failed")
            elif job.pause_request == "hold":
                self._set(db, job_id, state="held", pause_request=None, prepare=note)
            else:
                self._set(db, job_id, state="queued", queued_at=self._tick(db), pause_request=None, prepare=note)
        return self.get(job_id)

    def hold(self, job_id: str) -> Job:
        """The user's pause: sticky until resume(). A running job is asked to pause between steps."""
        with self._tx() as db:
            job = self.get(job_id)
            if job.state in ("running", "preparing"):  # preparing: its index build goes on; it is held once ready
                if job.pause_request == "cancel":
                    raise SchedulerError(f"job {job_id} is being cancelled")
                self._set(db, job_id, pause_request="hold")
            elif job.state in ("queued", "paused"):
                self._set(db, job_id, state="held", queued_at=None, pooled_at=None, preempted=0)
            elif job.state != "held":
                raise SchedulerError(f"job {job_id} is {job.state}: only preparing, queued, running or paused jobs can be held")
        return self.get(job_id)

    def resume(self, job_id: str, spec_update: Optional[dict] = None) -> Job:
        """The user's resume: a held job (or a failed or finished one, to retry or continue) becomes resumable.

        It joins the foreground queue, behind the jobs already queued and ahead of backfill (the design's
        foreground FIFO: a user who asks for a job wants it next, not after every paused one). A running job
        whose pause is still pending simply keeps its slot.
        """
        with self._tx() as db:
            job = self.get(job_id)
            spec = {**job.spec, **(spec_update or {})}
            if job.state == "running":
                if job.pause_request == "hold":  # not stopped yet: let it go on (if it stops anyway, it comes right back)
                    self._set(db, job_id, pause_request="resumed", spec=json.dumps(spec))
                return self.get(job_id)
            if job.state == "preparing":  # the hold is taken back: it queues once its index is ready
                self._set(db, job_id, pause_request=None if job.pause_request == "hold" else job.pause_request, spec=json.dumps(spec))
                return self.get(job_id)
            if job.state not in ("held", "failed", "done"):
                raise SchedulerError(f"job {job_id} is {job.state}: only held, failed or finished jobs can be resumed")
            tick = self._tick(db)
            if job.launches == 0 and (job.prepare or {}).get("failed"):  # its index build failed: build it again
                self._set(db, job_id, state="preparing", spec=json.dumps(spec), error=None)
            else:  # started or not, it queues; step() launches a started one as a resume
                self._set(db, job_id, state="queued", queued_at=tick, pooled_at=None, preempted=0, spec=json.dumps(spec), error=None)
        return self.get(job_id)

    def cancel(self, job_id: str) -> Job:
        with self._tx() as db:
            job = self.get(job_id)
            if job.state == "running":
                self._set(db, job_id, pause_request="cancel")
            elif job.state in ("preparing", "queued", "paused", "held", "failed"):  # preparing: the runner stops its build
                self._set(db, job_id, state="cancelled", queued_at=None, pooled_at=None, pause_request=None)
            elif job.state != "cancelled":
                raise SchedulerError(f"job {job_id} is {job.state}: nothing to cancel")
        return self.get(job_id)

    # ---- the runner's side ---------------------------------------------------------------
    def step(self) -> list[Launch]:
        """Ask running jobs to make room for queued ones, then fill free slots. Returns what to launch."""
        with self._tx() as db:
            running = [_job(r) for r in db.execute("SELECT * FROM jobs WHERE state = 'running'")]
            queue = [_job(r) for r in db.execute("SELECT * FROM jobs WHERE state = 'queued' ORDER BY queued_at, seq")]
            free = self.slots - len(running)
            leaving = sum(1 for j in running if j.pause_request in PAUSING)  # slots that free up once those jobs stop
            # preemption: queued jobs beyond the slots that are (or are about to be) free
            victims = sorted((j for j in running if j.pause_request not in PAUSING),
                             key=lambda j: (j.started_from != "pool", -(j.started_at or 0)))
            for job in queue[max(free, 0) + leaving:] if self.preempt else []:
                eligible = [v for v in victims if (v.started_at or 0) < (job.queued_at or 0)]
                if not eligible:
                    break  # FIFO: no later job may jump ahead of this one
                victim = eligible[0]
                victims.remove(victim)
                self._set(db, victim.id, pause_request="preempt")
            launches: list[Launch] = []
            for _ in range(max(free, 0)):
                job, source = self._next(db)
                if job is None:
                    break
                tick = self._tick(db)
                self._set(db, job.id, state="running", started_at=tick, started_from=source, queued_at=None, pooled_at=None,
                          preempted=0, pause_request=None, launches=job.launches + 1, stop_reason=None, error=None)
                launches.append(Launch("resume" if job.launches else "start", self.get(job.id)))
        return launches

    def exited(self, job_id: str, stop_reason: Optional[str], error: str = "") -> Job:
        """A job's process ended with this run stop reason (None: no stop reason, it crashed or was refused)."""
        with self._tx() as db:
            job = self.get(job_id)
            if job.state != "running":
                return job
            req = job.pause_request
            common = dict(pause_request=None, stop_reason=stop_reason, error=error or None)
            if stop_reason in RESULT_STOPS:
                self._set(db, job_id, state="done", **common)
            elif req == "cancel":
                self._set(db, job_id, state="cancelled", **common)
            elif stop_reason in RESUMABLE_STOPS and req in ("preempt", "resumed"):
                self._set(db, job_id, state="paused", pooled_at=self._tick(db), preempted=1, **common)
            elif stop_reason in RESUMABLE_STOPS and (req == "hold" or stop_reason == "paused"):
                self._set(db, job_id, state="held", **common)  # a PAUSE made outside the scheduler is a user's pause too
            elif stop_reason == "interrupted":
                self._set(db, job_id, state="paused", pooled_at=self._tick(db), preempted=0, **common)
            else:
                self._set(db, job_id, state="failed", **{**common, "error": error or f"stopped: {stop_reason or 'no stop reason'}"})
        return self.get(job_id)

    def waiting(self) -> dict[str, dict]:
        """Why each job that is not simply running waits, and where it stands in line: {id: {reason, position, of, after}}.

        The line is step()'s own order: the queue (first in, first out), then preempted jobs (the most recently
        preempted first), then the rest of the pool (the oldest first). Preparing jobs build their indexes one at
        a time in submission order, beside the line. `after`: the ids of the running jobs it waits for."""
        jobs = self.jobs()
        running = [j for j in jobs if j.state == "running"]
        busy = [j.id for j in running]
        queue = sorted((j for j in jobs if j.state == "queued"), key=lambda j: (j.queued_at or 0, j.seq))
        preempted = sorted((j for j in jobs if j.state == "paused" and j.preempted), key=lambda j: -(j.pooled_at or 0))
        backfill = sorted((j for j in jobs if j.state == "paused" and not j.preempted), key=lambda j: j.seq)
        parked = [] if self.backfill else backfill  # auto-backfill off: out of line until resumed
        line = queue + preempted + (backfill if self.backfill else [])
        free = self.slots - len(running)
        leaving = [j for j in running if j.pause_request in PAUSING]
        slots = f"{len(running)} of {self.slots} model slot{'s' if self.slots > 1 else ''} in use"
        out: dict[str, dict] = {}
        for i, job in enumerate(line):
            where = "in line for a model slot"
            if i < free:
                why = "a slot is free: it starts at the next scheduling step"
            elif job.state == "queued":
                why = f"waiting for a model slot ({slots})" + ("; a running job is pausing to make room" if leaving else
                                                               ": it waits for those jobs to finish" + (
                                                                   " (preemption is off)" if not self.preempt else
                                                                   " (it came after they started)"))
            elif job.preempted:
                why = f"paused to make room for a newer job; it resumes by itself when a slot is free, before jobs paused longer ago ({slots})"
            else:
                why = f"paused (stopped from outside); it resumes by itself once nothing is queued ({slots})"
            out[job.id] = {"reason": why, "position": i + 1, "of": len(line), "where": where, "after": busy}
        preparing = sorted((j for j in jobs if j.state == "preparing"), key=lambda j: j.seq)
        for i, job in enumerate(preparing):
            then = "; then held (you paused it)" if job.pause_request == "hold" else "; then it queues for the model"
            why = ("building the index of its dataroom, outside the model slots (other jobs run meanwhile)" if i == 0 else
                   f"waiting to build its index: {_ordinal(i)} after the build in progress") + then
            out[job.id] = {"reason": why, "position": i + 1, "of": len(preparing), "where": "in line for an index build", "after": [p.id for p in preparing[:i]]}
        for job in parked:
            out[job.id] = {"reason": "paused (stopped from outside); auto-backfill is off, so it waits until you resume it",
                           "position": None, "of": None, "where": "", "after": []}
        for job in jobs:
            if job.state == "held":
                out[job.id] = {"reason": "held: it stays paused until you resume it (never resumed by itself)", "position": None, "of": None,
                               "where": "", "after": []}
            elif job.state == "running" and job.pause_request in PAUSING:
                why = {"preempt": "pausing after its current step to make room for a newer job; it resumes by itself later",
                       "hold": "pausing after its current step, as you asked; then held until you resume it",
                       "cancel": "stopping after its current step, then cancelled"}[job.pause_request]
                out[job.id] = {"reason": why, "position": None, "of": None, "where": "", "after": []}
        return out

    def preempt_all(self) -> list[Job]:
        """Before a shutdown: every running job is asked to pause and will return to the pool."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET pause_request = 'preempt', updated = ? WHERE state = 'running' "
                       "AND (pause_request IS NULL OR pause_request = 'resumed')", (time.time(),))
        return self.jobs("running")

    # ---- internals -----------------------------------------------------------------------
    def _next(self, db: sqlite3.Connection) -> tuple[Optional[Job], str]:
        row = db.execute("SELECT * FROM jobs WHERE state = 'queued' ORDER BY queued_at, seq LIMIT 1").fetchone()
        if row:
            return _job(row), "queue"
        row = db.execute("SELECT * FROM jobs WHERE state = 'paused' AND preempted = 1 ORDER BY pooled_at DESC LIMIT 1").fetchone()
        if row:
            return _job(row), "pool"
        if not self.backfill:
            return None, ""
        row = db.execute("SELECT * FROM jobs WHERE state = 'paused' ORDER BY seq LIMIT 1").fetchone()
        return (_job(row), "pool") if row else (None, "")

    def _recover(self) -> None:
        """After a restart no process of ours is alive: running jobs go back to the pool (or held, or cancelled)."""
        with self._tx() as db:
            for row in db.execute("SELECT * FROM jobs WHERE state = 'running' ORDER BY started_at").fetchall():
                job = _job(row)
                if job.pause_request == "hold":
                    self._set(db, job.id, state="held", pause_request=None, stop_reason="interrupted")
                elif job.pause_request == "cancel":
                    self._set(db, job.id, state="cancelled", pause_request=None)
                else:
                    self._set(db, job.id, state="paused", pooled_at=self._tick(db), preempted=1, pause_request=None)

    def _tick(self, db: sqlite3.Connection) -> int:
        db.execute("UPDATE clock SET tick = tick + 1 WHERE id = 1")
        return db.execute("SELECT tick FROM clock WHERE id = 1").fetchone()[0]

    def _set(self, db: sqlite3.Connection, job_id: str, **fields: Any) -> None:
        fields["updated"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        db.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))

    def _tx(self):
        return _Transaction(self)


class _Transaction:
    """The scheduler lock plus one SQLite transaction (committed on success, rolled back on error)."""

    def __init__(self, sched: Scheduler):
        self.sched = sched

    def __enter__(self) -> sqlite3.Connection:
        self.sched._lock.acquire()
        self.sched._db.execute("BEGIN IMMEDIATE")
        return self.sched._db

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.sched._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.sched._lock.release()


def _job(row: sqlite3.Row) -> Job:
    data = dict(row)
    data["spec"] = json.loads(data["spec"])
    data["preempted"] = bool(data["preempted"])
    data["prepare"] = json.loads(data["prepare"]) if data.get("prepare") else None
    return Job(**data)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
