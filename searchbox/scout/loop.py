"""One scout run: rounds of up to three actions chosen by a model (or the keyword control), executed, recorded.

Statuses: `completed` (a finish was accepted), `abstained` (not_found), `budget_exhausted` (rounds
spent without either, or the search's deadline `timeout_s` reached), `model_error` (the endpoint failed past its retries or the context could
not hold the search). The run leaves the same artifacts as a dataroom run: run_meta.json,
turns.parquet, tool_calls.parquet and trace.jsonl, plus scout.json (the result as the CLI prints it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .. import __version__
from ..record import record
from ..config import stable_hash
from ..errors import ModelError, SearchboxError
from ..model.llm import ChatClient, DeadlineExceeded, Usage
from ..paths import atomic_write
from ..model.protocol import _call_id
from .actions import ACTIONS
from .config import ScoutConfig, loopback_only
from .executor import ActionError, Executor, Reference, Result
from .keyword import KeywordPolicy
from .protocol import Call, ScoutJsonProtocol, ScoutNativeProtocol, calls_of, choose, kept

STATUSES = ("completed", "abstained", "budget_exhausted", "model_error")
DEFAULT_CONTEXT = 8192
RESULT_FILE = "scout.json"

SYSTEM_PROMPT = """You search a code repository to find where something is implemented. You cannot run code.
Work in rounds. In each round send up to {max_actions} actions; they run in order and you see all their results in the next message.
Narrow down with files and grep, read the lines that implement what is asked, then finish with that file and line range.
finish only cites lines you have read; a finish outside them is refused. If the repository does not contain it, call not_found.
You have {budget} rounds in all."""


@dataclass
class ScoutResult:
    """What a scout run returns (and the CLI prints with --json)."""

    status: str
    references: list[Reference] = field(default_factory=list)
    rounds: int = 0
    tokens: dict = field(default_factory=lambda: {"prompt": 0, "completion": 0, "cached": 0, "total": 0})
    detail: str = ""
    run_dir: str = ""

    def to_dict(self) -> dict:
        return {"status": self.status, "references": [r.to_dict() for r in self.references], "rounds": self.rounds,
                "tokens": dict(self.tokens), "detail": self.detail, "run_dir": self.run_dir}


@dataclass
class Proposal:
    """One round's response: the calls, the canonical assistant message, and what it cost."""

    calls: list[Call]
    message: dict
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    malformed: Optional[str] = None
    info: dict = field(default_factory=dict)


IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")  # hidden, never shown, but they decide what files and grep find


def repo_identity(root: Path, cap_files: int = 50_000) -> dict:
    """Content hash of what the scout can see (non-hidden regular files, links skipped) and of the ignore rules that
    decide what its discovery shows (.gitignore, .ignore, .rgignore at any depth, .git/info/exclude), with counts."""
    digest = hashlib.sha256()
    files = size = 0
    exclude = Path(root) / ".git" / "info" / "exclude"
    if exclude.is_file() and not exclude.is_symlink():
        digest.update(b".git/info/exclude\0" + hashlib.sha256(exclude.read_bytes()[:2_000_000]).digest())
    for dirpath, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") and name not in IGNORE_FILES:
                continue
            full = Path(dirpath) / name
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = full.relative_to(root).as_posix()
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0" + str(st.st_size).encode() + b"\0")
            with open(full, "rb") as fh:
                digest.update(hashlib.sha256(fh.read(2_000_000)).digest())
            files += 1
            size += st.st_size
            if files >= cap_files:
                return {"sha256": digest.hexdigest(), "files": files, "bytes": size, "capped": True}
    return {"sha256": digest.hexdigest(), "files": files, "bytes": size}


def top_level(root: Path, limit: int = 40) -> str:
    names = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def rounds_note(done: int, budget: int) -> str:
    left = budget - done
    if left == 1:
        return "[1 round left: finish now with lines you have read, or call not_found]"
    return f"[round {done} of {budget} done; {left} left]"


class ModelPolicy:
    """A chat model behind an OpenAI-compatible endpoint, through the constrained-JSON or native protocol."""

    name = "model"

    def __init__(self, cfg: ScoutConfig, client: ChatClient, protocol: ScoutJsonProtocol | ScoutNativeProtocol, window: int):
        self.cfg, self.client, self.protocol, self.window = cfg, client, protocol, window
        self.messages: list[dict] = []
        self.tokens_per_char = 1 / 3.2  # recalibrated from every response's usage
        self.compactions = 0
        self.deadline: Optional[float] = None  # set by Scout.run: no request waits past the search's deadline

    def start(self, system: str, user: str) -> list[dict]:
        self.messages = [{"role": "system", "content": system + self.protocol.system_suffix()}, {"role": "user", "content": user}]
        return list(self.messages)

    def propose(self, rnd: int, budget: int) -> Proposal:
        self._fit()
        payload = self.protocol.request(self.messages)
        payload["max_tokens"] = self.cfg.model.max_tokens
        resp = self.client.chat(payload, deadline=self.deadline)
        sent = len(json.dumps(payload.get("messages", []))) + len(json.dumps(payload.get("tools") or payload.get("response_format") or ""))
        if resp.usage.prompt > 0 and sent:
            self.tokens_per_char = resp.usage.prompt / sent
        message, malformed = self.protocol.decode(resp.message)
        calls = [] if malformed else calls_of(message)
        message = kept(message, calls)  # what the model sent, as the history can hold and resend it
        self.messages.append(message)
        info = {"prompt": resp.usage.prompt, "completion": resp.usage.completion, "cached": resp.usage.cached,
                "latency_s": round(resp.latency_s, 4), "finish_reason": resp.finish_reason, "timings": resp.timings}
        return Proposal(calls, message, resp.usage, resp.latency_s, malformed, info)

    def observe(self, calls: list[Call], results: list[Result], note: str) -> list[dict]:
        added = [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": r.text} for c, r in zip(calls, results)]
        if added:
            added[-1] = {**added[-1], "content": added[-1]["content"] + "\n" + note}
        self.messages += added
        return added

    def feedback(self, error: str, note: str) -> list[dict]:
        msg = self.protocol.feedback(error)
        msg = {**msg, "content": msg["content"] + "\n" + note}
        self.messages.append(msg)
        return [msg]

    # ---- context ------------------------------------------------------------------------------
    def _estimate(self) -> int:
        return int(len(json.dumps(self.protocol.request(self.messages))) * self.tokens_per_char) + 16

    def _fit(self) -> None:
        """Drop older results (then cut the newest) until the request fits under compact_at of the window."""
        target = int(self.window * self.cfg.compact_at) - self.cfg.model.max_tokens
        if self._estimate() <= target:
            return
        last_assistant = max((i for i, m in enumerate(self.messages) if m["role"] == "assistant"), default=len(self.messages))
        for i, m in enumerate(self.messages[:last_assistant]):
            if m["role"] == "tool" and not m["content"].startswith("[removed"):
                self.messages[i] = {**m, "content": f"[removed to save context: {len(m['content'])} characters]"}
        self.compactions += 1
        if self._estimate() > target:
            for i in range(last_assistant, len(self.messages)):
                m = self.messages[i]
                if m["role"] == "tool" and len(m["content"]) > 1500:
                    self.messages[i] = {**m, "content": m["content"][:1500] + "\n[cut to save context]"}
        if self._estimate() > self.window - self.cfg.model.max_tokens:
            raise ModelError(f"context window of {self.window} tokens is too small for this search even after compaction")


class KeywordAdapter:
    """The keyword control behind the same interface as ModelPolicy (zero tokens, no server)."""

    name = "keyword"

    def __init__(self, cfg: ScoutConfig, query: str):
        self.policy = KeywordPolicy(query, cfg.max_actions, cfg.limits.read_max_lines)
        self.compactions = 0
        self._last: list[dict] = []

    def start(self, system: str, user: str) -> list[dict]:
        return [{"role": "user", "content": user}]

    def propose(self, rnd: int, budget: int) -> Proposal:
        t0 = time.monotonic()
        self._last = self.policy.propose(budget - rnd + 1)
        calls = [Call(_call_id(), a["action"], {k: v for k, v in a.items() if k != "action"}) for a in self._last]
        message = {"role": "assistant", "content": "", "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in calls]}
        return Proposal(calls, message, Usage(), time.monotonic() - t0)

    def observe(self, calls: list[Call], results: list[Result], note: str) -> list[dict]:
        self.policy.observe(self._last, results)
        return [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": r.text} for c, r in zip(calls, results)]

    def feedback(self, error: str, note: str) -> list[dict]:
        return []


class Scout:
    """Runs one query against one repository with a policy; `run()` always leaves complete logs."""

    def __init__(self, cfg: ScoutConfig, query: str, repo: Path, run_dir: Path, policy, executor: Executor,
                 extra_meta: Optional[dict] = None):
        self.cfg, self.query, self.repo, self.run_dir = cfg, query, Path(repo), Path(run_dir)
        self.policy, self.executor = policy, executor
        self.extra = dict(extra_meta or {})
        self.total = Usage()
        self.llm_s = self.tool_s = 0.0
        self.llm_calls = self.tool_calls = self.tool_errors = self.malformed = 0
        self.deadline: Optional[float] = None  # time.monotonic() past which no round starts and no request waits

    def run(self) -> ScoutResult:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        identity = repo_identity(self.executor.root)
        run_id = self.extra.pop("run_id", None) or stable_hash(cfg.to_dict(), self.query, identity["sha256"])
        started = dt.datetime.now(dt.timezone.utc)
        t_start = time.monotonic()
        self.deadline = t_start + cfg.timeout_s if cfg.timeout_s else None
        if hasattr(self.policy, "deadline"):
            self.policy.deadline = self.deadline
        meta = {
            "run_id": run_id, "question": self.query, "status": "running", "started_at": started.isoformat(),
            "searchbox_version": __version__, "model": cfg.model.name if self.policy.name == "model" else "keyword",
            "served": {"model_id": cfg.model.model if self.policy.name == "model" else "keyword",
                       "endpoint": getattr(getattr(self.policy, "client", None), "root", None),
                       "policy": None if self.policy.name == "model" else "keyword"},
            "protocol": getattr(getattr(self.policy, "protocol", None), "name", "none"),
            "context_window": getattr(self.policy, "window", 0), "budget": cfg.budget, "budget_unit": "rounds",
            "force_budget": False, "tools": [a.name for a in ACTIONS], "sandbox": "executor", "config": cfg.to_dict(),
            "dataroom": {"source": str(self.executor.root), "identity": identity["sha256"], "sha256": identity["sha256"],
                         "files": identity["files"], "bytes": identity["bytes"]},
            **self.extra,
        }
        rec = record.Recorder(self.run_dir, record.RunRecord.from_dict(meta))
        record.write_meta(self.run_dir, meta)
        result = ScoutResult("budget_exhausted", run_dir=str(self.run_dir))
        references: list[Reference] = []
        rnd = 0
        try:
            system = SYSTEM_PROMPT.format(max_actions=cfg.max_actions, budget=cfg.budget)
            user = f"Find: {self.query}\n\nRepository top level: {self._top_level()}"
            for m in self.policy.start(system, user):
                rec.event("message", 0, message=m)
            for rnd in range(1, cfg.budget + 1):
                if self._past_deadline():
                    rnd -= 1
                    result.detail = f"the search's deadline of {cfg.timeout_s:g} s was reached after {rnd} rounds"
                    break
                status = self._round(rec, rnd, references)
                if status:
                    result.status = status
                    break
            else:
                result.detail = f"{cfg.budget} rounds without finish or not_found"
        except DeadlineExceeded as exc:  # the model's reply did not come before the search's deadline
            result.status, result.detail = "budget_exhausted", f"the search's deadline of {cfg.timeout_s:g} s was reached ({exc})"
            rec.event("error", rnd, message=result.detail)
        except ModelError as exc:
            result.status, result.detail = "model_error", str(exc)
            rec.event("error", rnd, message=str(exc))
        except KeyboardInterrupt:
            result.status, result.detail = "interrupted", "KeyboardInterrupt"
            raise
        finally:
            result.references, result.rounds = references, rnd
            result.tokens = {"prompt": self.total.prompt, "completion": self.total.completion, "cached": self.total.cached,
                             "total": self.total.total}
            rec.event("stop", rnd, reason=result.status, detail=result.detail)
            rec.close()
            answer = json.dumps([r.to_dict() for r in references])
            meta.update({
                "status": "complete", "stop_reason": result.status, "stop_detail": result.detail, "turns": rnd,
                "compactions": self.policy.compactions, "llm_calls": self.llm_calls, "tool_calls": self.tool_calls,
                "tool_errors": self.tool_errors, "malformed_replies": self.malformed,
                "tokens": {**result.tokens, "uncached_prompt": self.total.uncached_prompt},
                "elapsed_s": round(time.monotonic() - t_start, 3), "llm_s": round(self.llm_s, 3), "tool_s": round(self.tool_s, 3),
                "answer_present": bool(references), "answer_chars": len(answer) if references else 0,
                "answer_source": "model" if references else "none", "answer": answer if references else "",
                "scout": result.to_dict(), "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            })
            record.write_meta(self.run_dir, meta)
            atomic_write(self.run_dir / RESULT_FILE, json.dumps(result.to_dict(), indent=2))
        return result

    def _top_level(self) -> str:
        try:
            return self.executor.top_level()
        except ActionError:  # ripgrep refused or timed out: the plain listing (the model can still call files)
            return top_level(self.executor.root)

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _round(self, rec, rnd: int, references: list[Reference]) -> Optional[str]:
        """One response and its actions; the status when the search ends here, else None."""
        t0 = time.monotonic()
        before = len(references)
        proposal = self.policy.propose(rnd, self.cfg.budget)
        llm = proposal.latency_s if self.policy.name == "model" else 0.0
        self.llm_s += llm
        self.llm_calls += 1 if self.policy.name == "model" else 0
        self.total.prompt += proposal.usage.prompt
        self.total.completion += proposal.usage.completion
        self.total.cached += proposal.usage.cached
        rec.event("message", rnd, message=proposal.message, **({"usage": proposal.info} if proposal.info else {}))
        note = rounds_note(rnd, self.cfg.budget)
        status, ended_by, tool_ms = None, "actions", 0.0
        if proposal.malformed or not proposal.calls:
            self.malformed += 1
            ended_by = "malformed"
            for m in self.policy.feedback(proposal.malformed or "no action in the response", note):
                rec.event("message", rnd, message=m)
        else:
            results = []
            for step, call in enumerate(proposal.calls, 1):
                if step > self.cfg.max_actions:
                    res = Result(call.name, call.arguments, False, "", f"ignored: at most {self.cfg.max_actions} actions per response")
                    res.text = f"Error: {res.error}"
                elif call.error:
                    res = Result(call.name, call.arguments, False, f"Error: {call.error}", call.error)
                elif self._past_deadline():
                    res = Result(call.name, call.arguments, False, "", "not run: the search's deadline was reached")
                    res.text = f"Error: {res.error}"
                else:
                    res = self.executor.execute(call.name, call.arguments)
                results.append(res)
                tool_ms += res.duration_ms
                self.tool_calls += 1
                self.tool_errors += 0 if res.ok else 1
                rec.tool_call({"turn": rnd, "step": step, "call_id": call.id, "tool": call.name, "arguments": json.dumps(call.arguments),
                               "programs": res.programs, "paths": res.paths, "duration_ms": res.duration_ms, "setup_ms": 0.0,
                               "ok": res.ok, "error": res.error, "output_chars": res.output_chars, "delivered": "",
                               "malformed": False})
                if res.ok and res.action == "finish":
                    references.append(res.data)
            for m in self.policy.observe(proposal.calls, results, note):
                rec.event("message", rnd, message=m)
            if len(references) > before:
                status, ended_by = "completed", "finish"
            elif any(r.ok and r.action == "not_found" for r in results):
                status, ended_by = "abstained", "not_found"
        self.tool_s += tool_ms / 1000
        answer = json.dumps([r.to_dict() for r in references]) if references else ""
        rec.turn({
            "turn": rnd, "prompt_tokens": proposal.usage.prompt, "completion_tokens": proposal.usage.completion,
            "cached_tokens": proposal.usage.cached, "prompt_tokens_cum": self.total.prompt,
            "completion_tokens_cum": self.total.completion, "cached_tokens_cum": self.total.cached,
            "context_tokens": proposal.usage.prompt + proposal.usage.completion, "llm_calls": 1 if self.policy.name == "model" else 0,
            "llm_ms": llm * 1000, "tool_ms": tool_ms, "setup_ms": 0.0, "tool_calls": len(proposal.calls),
            "malformed": 1 if ended_by == "malformed" else 0, "estimated_calls": 0, "compactions": self.policy.compactions,
            "answer_chars": len(answer), "answer_changed": len(references) > before,
            "elapsed_ms": (time.monotonic() - t0) * 1000, "ended_by": ended_by,
        })
        return status


def run_scout(cfg: ScoutConfig, query: str, repo: Path | str, run_dir: Path | str, endpoint: Optional[str] = None,
              extra_meta: Optional[dict] = None) -> ScoutResult:
    """One scout run in run_dir. `endpoint` is needed for policy=model. Raises only for refused input or setup errors."""
    cfg.validate()
    if not isinstance(query, str) or not query.strip():
        raise SearchboxError("the query is empty")
    repo = Path(repo)
    if not repo.is_dir():
        raise SearchboxError(f"repository not found or not a directory: {repo}")
    executor = Executor(repo, cfg.limits, max_chars=cfg.max_chars)
    if cfg.policy == "keyword":
        return Scout(cfg, query, repo, Path(run_dir), KeywordAdapter(cfg, query), executor, extra_meta).run()
    if not endpoint:
        raise SearchboxError("policy=model needs an endpoint (--endpoint, $LLAMA_URL, or the embedded llama-server)")
    loopback_only(endpoint, "endpoint")  # the repository's code goes to the model: only to one on this machine
    client = ChatClient(cfg.model, endpoint)
    try:
        protocol = choose(cfg.model.protocol, client, cfg.max_actions)  # probes never raise: an unreachable server fails in round 1
        window = cfg.model.context_window or client.context_window() or DEFAULT_CONTEXT
        policy = ModelPolicy(cfg, client, protocol, window)
        return Scout(cfg, query, repo, Path(run_dir), policy, executor, extra_meta).run()
    finally:
        client.close()


def write_trace(path: Path | str, run_dir: Path | str, cfg: ScoutConfig, query: str, result: ScoutResult) -> Path:
    """One JSON file with the whole search (micro-scout's --trace): the query, the settings, the result and every
    event of the run's trace.jsonl (messages, actions with their arguments and results, errors, the stop)."""
    events = []
    trace_file = Path(run_dir) / "trace.jsonl"
    if trace_file.exists():
        for line in trace_file.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:  # a line cut by a crash: the rest still tells the story
                continue
    doc = {"query": query, "settings": cfg.to_dict(), "result": result.to_dict(), "events": events}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(doc, indent=1, ensure_ascii=False))
    return path
