"""OpenAI-compatible chat client over httpx: hard deadlines, bounded retries, usage and llama.cpp timings per call."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import httpx

from .. import bounds
from ..config import ModelConfig
from ..errors import ModelError

RETRY_STATUS = {500, 502, 503, 504, 529}
PROBE_TIMEOUT_S = 10.0  # GETs of /props, /v1/models, /metrics
MAX_CALL_TOKENS = 10**9  # a count above this in one call's usage is nonsense, not a bill
TIMING_KEYS = 32  # llama.cpp timings kept per response (numbers only)


class DeadlineExceeded(ModelError):
    """The run's or the turn's deadline passed before the endpoint gave a complete answer."""


@dataclass
class Usage:
    """Tokens the server billed for one call (prompt includes the cached part)."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    estimated: bool = False  # the response had no usage: the harness filled in an estimate

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    @property
    def uncached_prompt(self) -> int:
        return max(0, self.prompt - self.cached)


@dataclass
class Response:
    """One completed /chat/completions call: the raw choice message, usage and latency."""

    message: dict
    usage: Usage
    latency_s: float
    finish_reason: Optional[str] = None
    timings: dict = field(default_factory=dict)
    attempts: int = 1
    malformed: Optional[str] = None  # the reply could not be taken (over the size limit, nested too deep): the model's doing
    body_chars: int = 0  # the body's size as read


def parse_usage(body: dict) -> tuple[Usage, dict]:
    """Usage from `usage` (OpenAI) with llama.cpp `timings` as fallback; parts found nowhere are marked missing.

    A missing count is never read as zero, and neither is nonsense (negative, fractional, not a number, past
    MAX_CALL_TOKENS): `Usage.estimated` tells the caller to fill in an estimate for the parts left at 0.
    """
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    timings = clean_timings(body.get("timings"))
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    doubtful = False

    def tokens(value: Any) -> Optional[int]:
        nonlocal doubtful
        n = bounds.count(value)
        if n is None or n > MAX_CALL_TOKENS:
            doubtful = True
            return None
        return n

    prompt = tokens(usage["prompt_tokens"]) if "prompt_tokens" in usage else None
    if prompt is None and "prompt_n" in timings:
        parts = [tokens(timings["prompt_n"]), tokens(timings.get("cache_n", 0))]
        prompt = None if None in parts else sum(parts)
    completion = tokens(usage["completion_tokens"]) if "completion_tokens" in usage else None
    if completion is None and "predicted_n" in timings:
        completion = tokens(timings["predicted_n"])
    cached = tokens(details["cached_tokens"]) if "cached_tokens" in details else tokens(timings.get("cache_n", 0))
    if cached is not None and prompt is not None and cached > prompt:
        cached, doubtful = prompt, True
    missing = prompt is None or completion is None or doubtful
    return Usage(prompt or 0, completion or 0, cached or 0, estimated=missing), timings


def clean_timings(timings: Any) -> dict:
    """llama.cpp's per-response timings, numbers only (a server's strings or nesting are dropped)."""
    if not isinstance(timings, dict):
        return {}
    out = {}
    for key, value in list(timings.items())[:TIMING_KEYS]:
        if isinstance(key, str) and len(key) <= 64 and isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                continue
            out[bounds.valid_text(key)] = value if isinstance(value, float) else bounds.clamp(value, bounds.INT64)
    return out


def error_reason(text: str) -> tuple[str, bool]:
    """(one line saying why, whether the server stated it): an OpenAI-style error body's message, else the body's start."""
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    if isinstance(message, str) and message.strip():
        return " ".join(bounds.valid_text(message).split())[:300], True
    return " ".join(bounds.valid_text(text[:300]).split()) or "(empty body)", False


def base_url(endpoint: str) -> str:
    """Normalise an endpoint to the server root (strip a trailing /v1 and slashes)."""
    url = endpoint.rstrip("/")
    return re.sub(r"/v1$", "", url)


def estimate_tokens(chars: int, tokens_per_char: float) -> int:
    return int(math.ceil(chars * tokens_per_char))


def oversize_note(resp: httpx.Response, cap: int) -> str:
    declared = resp.headers.get("content-length")
    return f"a reply of {declared + ' bytes' if declared else 'more bytes'}, over the {cap}-byte limit (model.max_response_bytes)"


async def read_events(resp: httpx.Response, cap: int, watcher: Any) -> tuple[int, str, Optional[str]]:
    """A streamed chat completion (server-sent events) as (status, the body of the same reply unstreamed, oversize).

    The deltas' text is joined, and the last event's `usage` and llama.cpp `timings` are kept; the watcher sees the
    text as it grows, and once it says stop, no more is read (the caller's closing the connection ends the server's
    generation) and the reply's finish_reason is `loop`, its text cut where the watcher says (`kept`). An event that is not JSON, or a stream with no choices, comes
    back as its own text for _parse to refuse; an `error` event as HTTP 500 with that error."""
    text, reasoning, finish, usage, timings = [], [], None, None, None
    size, pending, seen = 0, b"", False

    def reply(reason: Optional[str]) -> tuple[int, str, Optional[str]]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if reasoning:
            message["reasoning_content"] = "".join(reasoning)
        out: dict[str, Any] = {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": reason}]}
        out.update({k: v for k, v in (("usage", usage), ("timings", timings)) if v is not None})
        return 200, json.dumps(out, ensure_ascii=False), None

    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > cap:
            return 200, "", oversize_note(resp, cap)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, `:` comments (keep-alives), event names
            data = line[5:].strip()
            if data == b"[DONE]":
                return reply(finish) if seen else (200, "", None)
            try:
                event = bounds.loads(data.decode("utf-8", "replace"))
            except ValueError:
                return 200, data.decode("utf-8", "replace"), None
            if not isinstance(event, dict):
                return 200, data.decode("utf-8", "replace"), None
            if "error" in event:  # only its message goes on (a server's error object may nest without end)
                error = event["error"]
                message = error.get("message") if isinstance(error, dict) else error
                return 500, json.dumps({"error": {"message": str(message)[:300] if message is not None else "an error event"}}), None
            usage = event["usage"] if isinstance(event.get("usage"), dict) else usage
            timings = event["timings"] if isinstance(event.get("timings"), dict) else timings
            choices = event.get("choices")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                continue
            seen = True
            choice = choices[0]
            finish = choice["finish_reason"] if isinstance(choice.get("finish_reason"), str) else finish
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("reasoning_content"), str):
                reasoning.append(delta["reasoning_content"])
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                text.append(piece)
                if watcher.feed(piece):
                    text[:] = ["".join(text)[:watcher.kept]]  # up to the last copy: never the last piece (loops.py)
                    return reply("loop")
    return reply(finish) if seen else (200, pending.decode("utf-8", "replace"), None)


class ChatClient:
    """Talks to one OpenAI-compatible server; every failure past the retries is a ModelError.

    Every request runs under a hard wall-clock budget (connect, headers and body together), so a
    stalled or byte-dripping server cannot hold a run past its deadline: httpx's own timeouts are
    per read and reset with every byte, so the request is awaited with asyncio.wait_for instead.
    """

    def __init__(self, cfg: ModelConfig, endpoint: str, transport: httpx.AsyncBaseTransport | None = None):
        self.cfg = cfg
        self.root = base_url(endpoint)
        self.headers: dict[str, str] = {}
        if cfg.api_key_env and os.environ.get(cfg.api_key_env):
            self.headers["Authorization"] = f"Bearer {os.environ[cfg.api_key_env]}"
        self._transport = transport
        self._ssl = httpx.create_ssl_context() if self.root.startswith("https") else None
        self.deadline: Optional[float] = None  # the run's: probes never outlive it either
        self._static: dict[str, Optional[str]] = {}  # /props and /v1/models do not change while a server runs
        self.failures: list[dict] = []  # requests that failed since the harness last took them (take_failures)

    def close(self) -> None:
        """Nothing is held between calls (each request has its own connection)."""

    # ---- one bounded request --------------------------------------------------------------
    async def _send(self, method: str, url: str, body: Optional[dict], budget: float,
                    watch: Optional[Callable[[], Any]] = None) -> tuple[int, str, Optional[str]]:
        timeout = httpx.Timeout(budget, connect=min(10.0, budget))
        # Plain http needs no certificates: httpx would load the CA bundle for every client (~0.1 s of CPU per request).
        kwargs: dict[str, Any] = {"timeout": timeout, "headers": self.headers, "transport": self._transport,
                                  "verify": self._ssl if self._ssl is not None else False}
        content, headers = None, {}
        if body is not None:
            # Text the model wrote goes back verbatim; a lone surrogate in it cannot be UTF-8 and is sent as "?".
            content = json.dumps(body, ensure_ascii=False).encode("utf-8", "replace")
            headers = {"Content-Type": "application/json"}
        cap = self.cfg.max_response_bytes
        async with httpx.AsyncClient(**kwargs) as http:
            async with http.stream(method, url, content=content, headers=headers) as resp:
                if watch is not None and resp.status_code == 200 and resp.headers.get("content-type", "").startswith("text/event-stream"):
                    return await read_events(resp, cap, watch())
                chunks, size = [], 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > cap:  # read no further: a reply this large is the model's doing, not ours to hold
                        return resp.status_code, "", oversize_note(resp, cap)
                    chunks.append(chunk)
                return resp.status_code, b"".join(chunks).decode("utf-8", "replace"), None

    def _request(self, method: str, path: str, body: Optional[dict], budget: float,
                 watch: Optional[Callable[[], Any]] = None) -> tuple[int, str, Optional[str]]:
        """(status, text, why the body was not read) within `budget` seconds or asyncio.TimeoutError / httpx errors.
        With `watch`, a streamed reply is read as it comes and handed back as one chat completion (read_events)."""
        coro = asyncio.wait_for(self._send(method, f"{self.root}{path}", body, budget, watch), timeout=budget)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        # Called from inside an event loop (a web app's thread): run on a private loop in a thread.
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = asyncio.run(coro)
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=target, daemon=True)
        worker.start()
        worker.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

    # ---- chat -----------------------------------------------------------------------------
    def chat(self, payload: dict[str, Any], deadline: Optional[float] = None, watch: Optional[Callable[[], Any]] = None) -> Response:
        """POST /v1/chat/completions with bounded retries; nothing outlives `deadline` (time.monotonic).

        watch: makes a fresh watcher per attempt (an object whose feed(text) says when to stop, loops.LoopWatch); the
        reply is then streamed and the connection closed as soon as the watcher says so, the Response's
        finish_reason `loop`. The tokens sent are the same either way: streaming changes no sampling."""
        body = {"temperature": self.cfg.temperature, "max_tokens": self.cfg.max_tokens, **(self.cfg.sampler or {}), **payload}
        if watch is not None:
            body.update(stream=True, stream_options={"include_usage": True})
            if self.is_llama_cpp():
                body["timings_per_token"] = True  # the counts so far in every event: a reply stopped early is billed exactly
        if self.cfg.model:
            body["model"] = self.cfg.model
        if self.cfg.seed is not None:
            body.setdefault("seed", self.cfg.seed)
        if self.slot is not None:
            body["id_slot"] = self.slot  # start_clean: the run's own slot, never one another run warmed
        last, previous = "no attempt", None
        for attempt in range(1, self.cfg.retries + 2):
            left = math.inf if deadline is None else deadline - time.monotonic()
            if left <= 0.05:
                raise DeadlineExceeded(f"deadline reached before attempt {attempt} ({last})")
            budget = min(self.cfg.timeout_s, left)
            start = time.monotonic()
            try:
                status, text, oversize = self._request("POST", "/v1/chat/completions", body, budget, watch)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                last = f"no complete response within {budget:.1f}s"
                self._failed(attempt, None, last, start)
                if deadline is not None and time.monotonic() >= deadline - 0.05:
                    raise DeadlineExceeded(f"deadline reached: {last}") from None
            except httpx.HTTPError as exc:
                last = f"connection error: {exc!r}"
                self._failed(attempt, None, last, start)
            else:
                latency = time.monotonic() - start
                if status == 200 and oversize:
                    return Response({}, Usage(estimated=True), latency, attempts=attempt, malformed=oversize,
                                    body_chars=self.cfg.max_response_bytes)
                if status == 200:
                    try:
                        return self._parse(text, latency, attempt)
                    except ModelError as exc:
                        self._failed(attempt, status, str(exc), start)
                        raise
                reason, stated = error_reason(text)
                last = f"HTTP {status}: {reason}"
                self._failed(attempt, status, reason, start)
                # A 4xx, a 500 the server explained (llama-server's answer to this very request, e.g. "tools param
                # requires --jinja flag"), or the same 500 twice is deterministic: asking again only costs time.
                # 502/503/504/529 (a gateway, overload, a model still loading) are passing states and are retried.
                if status not in RETRY_STATUS or (status == 500 and (stated or (status, text) == previous)):
                    raise ModelError(f"model endpoint refused the request: {last}")
                previous = (status, text)
            if attempt <= self.cfg.retries:
                pause = self.cfg.backoff_s * 2 ** (attempt - 1)
                if deadline is not None:
                    pause = min(pause, max(0.0, deadline - time.monotonic()))
                time.sleep(pause)
        raise ModelError(f"model endpoint failed after {self.cfg.retries + 1} attempts: {last}")

    def _failed(self, attempt: int, status: Optional[int], error: str, start: float) -> None:
        """One request that got no usable answer, kept for the harness to trace and bill (take_failures)."""
        self.failures.append({"attempt": attempt, "status": status, "error": error[:500],
                              "seconds": round(time.monotonic() - start, 4), "at": round(time.time(), 3)})

    def take_failures(self) -> list[dict]:
        """The failed requests since the last call, oldest first (and forget them)."""
        out, self.failures = self.failures, []
        return out

    @staticmethod
    def _parse(text: str, latency: float, attempt: int) -> Response:
        try:
            body = json.loads(text)
        except RecursionError:  # the body parses only as far as the model's nesting: its reply, not the server's fault
            return Response({}, Usage(estimated=True), latency, attempts=attempt, malformed="the reply is nested too deep to read",
                            body_chars=len(text))
        except ValueError as exc:
            raise ModelError(f"model endpoint sent an unusable response: {text[:300]!r}") from exc
        try:
            choice = body["choices"][0]
            message = dict(choice["message"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(f"model endpoint sent an unusable response: {text[:300]!r}") from exc
        usage, timings = parse_usage(body)
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        return Response(message, usage, latency, finish if isinstance(finish, str) else None, timings, attempt, body_chars=len(text))

    # ---- probes ---------------------------------------------------------------------------
    def get_text(self, path: str) -> Optional[str]:
        """GET a server endpoint such as /props; None when absent, unreachable, slow or failing."""
        if path in self._static:
            return self._static[path]
        budget = PROBE_TIMEOUT_S
        if self.deadline is not None:
            budget = min(budget, max(1.0, self.deadline - time.monotonic()))
        try:
            status, text, oversize = self._request("GET", path, None, budget)
            text = text if status == 200 and not oversize else None
        except (asyncio.TimeoutError, httpx.HTTPError):
            text = None
        if path in ("/props", "/v1/models"):
            self._static[path] = text
        return text

    def get_json(self, path: str) -> Optional[dict]:
        text = self.get_text(path)
        try:
            value = json.loads(text) if text is not None else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def is_llama_cpp(self) -> bool:
        """Whether the server is llama-server (its /props reports generation settings): it takes llama.cpp's own fields."""
        return isinstance((self.get_json("/props") or {}).get("default_generation_settings"), dict)

    def context_window(self) -> Optional[int]:
        """n_ctx per slot as llama-server reports it in /props."""
        props = self.get_json("/props") or {}
        settings = props.get("default_generation_settings")
        n_ctx = bounds.count(settings.get("n_ctx")) if isinstance(settings, dict) else None
        return n_ctx if n_ctx and n_ctx <= MAX_CALL_TOKENS else None

    # ---- a clean llama-server slot per run ------------------------------------------------
    slot: Optional[int] = None  # the llama-server slot every chat request is pinned to (id_slot); None: the server picks
    slot_start: str = ""  # how the run's slot started (start_clean): erased | not erased: why | unpinned: why

    def start_clean(self, slot: Optional[int] = None) -> str:
        """Pin every chat request to llama-server slot `slot` and erase what that slot has cached, so a run never
        continues from another run's cached prompt: a cached prefix and a fresh prefill differ in the last bits, and
        at temperature 0 that changed whole SmolLM2 trajectories. slot None: slot 0 of a one-slot server, else no pin.
        Returns (and keeps in slot_start) what was done; a server that refuses slot actions (HTTP 501: started
        without --slot-save-path) is still pinned, and the run goes on recorded as not erased."""
        props = self.get_json("/props") or {}
        total = props.get("total_slots")
        if not isinstance(total, int) or isinstance(total, bool) or total < 1:
            self.slot_start = "unpinned: no llama-server slots (/props has no total_slots)"
            return self.slot_start
        if slot is None and total == 1:
            slot = 0
        if slot is None or not 0 <= slot < total:
            self.slot_start = f"unpinned: {total} slots, {'none' if slot is None else f'slot {slot} not one of them'} assigned"
            return self.slot_start
        self.slot = slot
        budget = 3 * PROBE_TIMEOUT_S if self.deadline is None else min(3 * PROBE_TIMEOUT_S, max(1.0, self.deadline - time.monotonic()))
        try:
            status = self._request("POST", f"/slots/{slot}?action=erase", {}, budget)[0]
        except (asyncio.TimeoutError, httpx.HTTPError) as exc:
            self.slot_start = f"not erased: {type(exc).__name__}"
        else:
            why = " (started without --slot-save-path)" if status == 501 else ""
            self.slot_start = "erased" if status == 200 else f"not erased: HTTP {status}{why}"
        return self.slot_start

    def served_model(self) -> dict:
        """What the server says it serves: model id (/v1/models), and for llama-server its build and model file (/props)."""
        ids = []
        models = self.get_json("/v1/models") or {}
        for item in models.get("data") or []:
            if isinstance(item, dict) and item.get("id"):
                ids.append(str(item["id"]))
        wanted = self.cfg.model
        model_id = wanted if wanted and (wanted in ids or not ids) else (ids[0] if ids else None)
        props = self.get_json("/props") or {}
        return {"model_id": model_id, "model_ids": ids, "llama_cpp": props.get("build_info"), "model_path": props.get("model_path")}


def parse_metrics(text: str | None) -> dict[str, float]:
    """Prefill/decode throughput from llama-server's Prometheus /metrics, when exposed."""
    if not text:
        return {}
    out = {}
    wanted = {
        "llamacpp:prompt_tokens_seconds": "prefill_tokens_per_s",
        "llamacpp:predicted_tokens_seconds": "decode_tokens_per_s",
        "llamacpp:prompt_tokens_total": "server_prompt_tokens_total",
        "llamacpp:tokens_predicted_total": "server_predicted_tokens_total",
    }
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 2 and parts[0] in wanted:
            try:
                out[wanted[parts[0]]] = float(parts[1])
            except ValueError:
                pass
    return out
