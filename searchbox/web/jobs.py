"""Job processes: one `python -m searchbox.run` child per job, started, paused (PAUSE file) and resumed as the scheduler says;
before it, for a job that needs its dataroom's index built, one `python -m searchbox.web.prepare` child outside the slots.

A run in its own process cannot take the server down, however it ends. All children are started
from the runner's one thread, so the parent-death signal they carry fires only when the server
itself goes away (then they stop as `interrupted`, logs complete, and return to the pool on restart).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from ..model.llama import die_with_parent
from .endpoints import EndpointPolicy
from . import prepare
from .scheduler import PAUSING, Job, Launch, Scheduler
from .sweeps import last_reason

SECRET_ENV = ("SEARCHBOX_TOKEN",)  # never handed to a run


def new_job_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class JobRunner:
    """Owns the job children; a loop thread reaps exits, asks the scheduler what to launch and keeps PAUSE files in sync."""

    def __init__(self, sched: Scheduler, root: Path, endpoint: str, sandbox: str = "auto", poll_s: float = 0.25,
                 python: str = sys.executable, grace_s: float = 5.0, endpoints: Optional[EndpointPolicy] = None):
        self.sched, self.root, self.endpoint, self.sandbox = sched, Path(root), endpoint, sandbox
        self.endpoints = endpoints or EndpointPolicy(endpoint)
        self.poll_s, self.python, self.grace_s = poll_s, python, grace_s
        self.procs: dict[str, subprocess.Popen] = {}
        self.preps: dict[str, subprocess.Popen] = {}  # index builds of preparing jobs (one at a time)
        self._paused: set[str] = set()  # jobs whose PAUSE file we made
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None
        for sub in ("jobs", "uploads", "logs", "tmp", "prepare"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    # ---- paths ---------------------------------------------------------------------------
    def run_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def log_path(self, job_id: str) -> Path:
        return self.root / "logs" / f"{job_id}.log"

    def upload_path(self, job_id: str) -> Path:
        return self.root / "uploads" / f"{job_id}.zip"

    def progress_path(self, job_id: str) -> Path:
        return self.root / "prepare" / f"{job_id}.json"

    def progress(self, job_id: str) -> Optional[dict]:
        """A preparing job's index build as its process last wrote it: {stage, done, total, seconds}."""
        return prepare.read_progress(self.progress_path(job_id))

    def log_tail(self, job_id: str, size: int = 64 * 1024) -> dict:
        """The end of the job's process log (its runs and its index build, each launch under a `===` line)."""
        path = self.log_path(job_id)
        try:
            total = path.stat().st_size
        except OSError:
            return {"text": "", "bytes": 0, "truncated": False}
        return {"text": _tail(path, size), "bytes": total, "truncated": total > size}

    # ---- user actions (any thread) --------------------------------------------------------
    def submit(self, job_id: str, spec: dict, needs_index: bool = False) -> Job:
        job = self.sched.submit(job_id, spec, self.run_dir(job_id), prepare=needs_index)
        self.wake()
        return job

    def hold(self, job_id: str) -> Job:
        job = self.sched.hold(job_id)
        self.wake()
        return job

    def resume(self, job_id: str, spec_update: Optional[dict] = None) -> Job:
        job = self.sched.resume(job_id, spec_update)
        self.wake()
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.sched.cancel(job_id)
        self.wake()
        return job

    def wake(self) -> None:
        self._wake.set()

    # ---- the loop ------------------------------------------------------------------------
    def start(self) -> "JobRunner":
        self._thread = threading.Thread(target=self._loop, name="searchbox-jobs", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Pause every running job (it returns to the pool), then stop the loop; children that will not stop are ended."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.grace_s + 15)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception as exc:  # the loop must outlive any one bad job; say why and go on
                print(f"searchbox: job loop: {type(exc).__name__}: {exc}", file=sys.stderr)
            self._wake.wait(self.poll_s)
            self._wake.clear()
        self._shutdown()

    def tick(self) -> None:
        for job_id, proc in list(self.procs.items()):
            if proc.poll() is not None:
                self._reap(job_id, proc)
        self._prepare()
        for launch in self.sched.step():
            self._launch(launch)
        for job in self.sched.jobs("running"):
            self._sync_pause(job)

    def _sync_pause(self, job: Job) -> None:
        pause = self.run_dir(job.id) / "PAUSE"
        if job.pause_request in PAUSING:
            # Only once the run exists: a PAUSE in a fresh --out would make the run refuse the directory.
            if job.id not in self._paused and (self.run_dir(job.id) / "run_meta.json").exists():
                pause.touch()
                self._paused.add(job.id)
        elif job.id in self._paused:
            with contextlib.suppress(FileNotFoundError):
                pause.unlink()
            self._paused.discard(job.id)

    # ---- preparing: index builds outside the slots ----------------------------------------
    def _prepare(self) -> None:
        """Reap finished builds, stop those of jobs no longer preparing (cancelled), start the next (one at a time)."""
        preparing = {j.id: j for j in self.sched.jobs("preparing")}
        for job_id, proc in list(self.preps.items()):
            if proc.poll() is not None:
                del self.preps[job_id]
                result = prepare.read_progress(self.progress_path(job_id)) or {}
                if proc.returncode == 0 and result.get("finished"):
                    info = {k: result.get(k) for k in ("seconds", "chunks", "built")}
                    self.sched.prepared(job_id, True, info)
                elif job_id in preparing and not self._stopping.is_set():
                    reason = last_reason(_tail(self.log_path(job_id)), proc.returncode)
                    self.sched.prepared(job_id, False, {"seconds": result.get("seconds")}, f"building the index failed: {reason}")
            elif job_id not in preparing:
                _stop_group(proc)
        preparing = {j.id: j for j in self.sched.jobs("preparing")}  # as the reaping above left them
        if not self.preps and preparing and not self._stopping.is_set():
            self._start_prepare(min(preparing.values(), key=lambda j: j.seq))

    def _start_prepare(self, job: Job) -> None:
        spec = job.spec
        self.progress_path(job.id).unlink(missing_ok=True)
        cmd = [self.python, "-m", "searchbox.web.prepare", "--progress", str(self.progress_path(job.id))]
        if spec.get("tools"):
            cmd += ["--tools", spec["tools"]]
        if spec.get("dataroom") or spec.get("set_dataroom"):
            cmd += ["--dataroom", spec.get("dataroom") or spec["set_dataroom"]]
        try:
            self.preps[job.id] = self._spawn(job.id, "prepare (index build)", cmd)
        except OSError as exc:
            self.sched.prepared(job.id, False, None, f"could not start the index build: {exc}")

    # ---- children ------------------------------------------------------------------------
    def _spawn(self, job_id: str, heading: str, cmd: list[str]) -> subprocess.Popen:
        """A child of the job, its output appended to the job's log under a heading; no secret of this server's
        environment passed on."""
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path(job_id), "ab") as log:
            log.write(f"\n=== {heading} {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            log.flush()
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, preexec_fn=die_with_parent)

    def command(self, launch: Launch) -> list[str]:
        job, spec = launch.job, launch.job.spec
        run_dir = self.run_dir(job.id)
        endpoint = spec.get("endpoint") or self.endpoint
        cmd = [self.python, "-m", "searchbox.run"]
        if launch.kind == "resume" and (run_dir / "state.json").exists():
            return cmd + ["--resume", str(run_dir), "--endpoint", endpoint, "--budget", str(spec["budget"])]
        # a first start (or a start that never got going: begin again in a clean directory)
        cmd += ["--out", str(run_dir), "--overwrite", "--endpoint", endpoint, "--budget", str(spec["budget"]),
                "--budget-unit", spec.get("budget_unit", "turns"), "--sandbox", self.sandbox,
                "--force-budget" if spec.get("force_budget", True) else "--no-force-budget"]
        if spec.get("tools"):
            cmd += ["--tools", spec["tools"]]
        if spec.get("model"):
            cmd += ["--model", spec["model"]]
        if spec.get("harness", "native") != "native":  # a resume keeps it: the run's config says which harness
            cmd += ["--harness", spec["harness"]]
        cmd += study_flags(spec)
        cmd += ["--", spec["question"]]
        dataroom = spec.get("dataroom") or spec.get("set_dataroom")  # an upload, else the question set's own
        if dataroom:
            cmd.append(dataroom)
        return cmd

    def _launch(self, launch: Launch) -> None:
        job = launch.job
        if not _wait_until_free(self.run_dir(job.id)):
            self.sched.exited(job.id, "interrupted", "an earlier process of this run is still alive; it will be retried")
            return
        endpoint = job.spec.get("endpoint")
        if endpoint and not self.endpoints.allows(endpoint):  # a job queued before a restart with a narrower allow-list
            self.sched.exited(job.id, None, f"endpoint {str(endpoint)[:200]} is not allowed by this server (--allow-endpoint)")
            return
        self._paused.discard(job.id)
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir(job.id) / "PAUSE").unlink()
        try:
            self.procs[job.id] = self._spawn(job.id, launch.kind, self.command(launch))
        except OSError as exc:
            self.sched.exited(job.id, None, f"could not start the run: {exc}")

    def _reap(self, job_id: str, proc: subprocess.Popen) -> None:
        del self.procs[job_id]
        self._paused.discard(job_id)
        meta = _read_json(self.run_dir(job_id) / "run_meta.json")
        stop = meta.get("stop_reason") if meta.get("status") == "complete" else None
        error = ""
        if not stop or proc.returncode not in (0, 1, 130):
            error = last_reason(_tail(self.log_path(job_id)), proc.returncode)
        elif stop in ("model_error", "tool_error"):
            error = meta.get("stop_detail") or stop
        self.sched.exited(job_id, stop or None, error)

    def _shutdown(self) -> None:
        for proc in self.preps.values():  # an index build commits atomically: stopped, it starts over after a restart
            _stop_group(proc)
        self.preps.clear()
        self.sched.preempt_all()
        for job in self.sched.jobs("running"):
            self._sync_pause(job)
        deadline = time.monotonic() + self.grace_s
        while self.procs and time.monotonic() < deadline:
            for job_id, proc in list(self.procs.items()):
                if proc.poll() is not None:
                    self._reap(job_id, proc)
            time.sleep(0.1)
        for proc in self.procs.values():  # SIGTERM: the run stops as `interrupted`, logs complete
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for job_id, proc in list(self.procs.items()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10.0)
                self._reap(job_id, proc)
        for proc in self.procs.values():  # still there: killed, and left `running` so a restart returns it to the pool
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)
        self.procs.clear()

def _wait_until_free(run_dir: Path, timeout_s: float = 30.0) -> bool:
    """Wait for any process still running in this run directory (one left from before a crash of the server,
    stopping on its parent-death signal) to end, so two processes never write one run."""
    needle = str(run_dir).encode()
    deadline = time.monotonic() + timeout_s
    while True:
        busy = False
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if needle in argv and b"searchbox.run" in argv:
                    busy = True
                    break
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _stop_group(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """End a child started in its own session and everything it started (SIGTERM, then SIGKILL)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tail(path: Path, size: int = 8192) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - size))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


# The web form's study axes and gold (app.study_axes, app.gold_of) as the single-run CLI's flags.
AXIS_FLAGS = (("retriever", "--retriever"), ("delivery", "--delivery"), ("policy", "--policy"), ("noise", "--noise"),
              ("seed", "--seed"), ("temperature", "--temperature"), ("max_tokens", "--max-tokens"),
              ("gold", "--gold"), ("question_id", "--question-id"), ("questions_path", "--questions-path"))


def study_flags(spec: dict) -> list[str]:
    out: list[str] = []
    for key, flag in AXIS_FLAGS:
        if spec.get(key) not in (None, ""):
            out += [flag, str(spec[key])]
    if spec.get("gold"):
        for alias in spec.get("aliases") or []:
            out += ["--alias", alias]
        for path in spec.get("gold_files") or []:
            out += ["--gold-file", path]
    return out
