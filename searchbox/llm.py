"""OpenAI-compatible chat client over httpx: retries, usage and llama.cpp timings per call."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import httpx

from .config import ModelConfig
from .errors import ModelError

RETRY_STATUS = {500, 502, 503, 504, 529}


@dataclass
class Usage:
    """Tokens the server billed for one call (prompt includes the cached part)."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0

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


def parse_usage(body: dict) -> tuple[Usage, dict]:
    """Usage from `usage` (OpenAI) with llama.cpp `timings` as fallback for missing fields."""
    usage = body.get("usage") or {}
    timings = body.get("timings") or {}
    details = usage.get("prompt_tokens_details") or {}
    prompt = usage.get("prompt_tokens")
    cached = details.get("cached_tokens")
    if prompt is None and timings:
        prompt = int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0))
    if cached is None:
        cached = timings.get("cache_n", 0)
    completion = usage.get("completion_tokens")
    if completion is None:
        completion = timings.get("predicted_n", 0)
    return Usage(int(prompt or 0), int(completion or 0), int(cached or 0)), timings


def base_url(endpoint: str) -> str:
    """Normalise an endpoint to the server root (strip a trailing /v1 and slashes)."""
    url = endpoint.rstrip("/")
    return re.sub(r"/v1$", "", url)


class ChatClient:
    """Talks to one OpenAI-compatible server; every failure past the retries is a ModelError."""

    def __init__(self, cfg: ModelConfig, endpoint: str, transport: httpx.BaseTransport | None = None):
        self.cfg = cfg
        self.root = base_url(endpoint)
        headers = {}
        if cfg.api_key_env and os.environ.get(cfg.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[cfg.api_key_env]}"
        self._http = httpx.Client(timeout=httpx.Timeout(cfg.timeout_s, connect=10.0), headers=headers, transport=transport)

    def close(self) -> None:
        self._http.close()

    def chat(self, payload: dict[str, Any], timeout_s: float | None = None) -> Response:
        """POST /v1/chat/completions with bounded retries on connection errors and 5xx."""
        body = {"temperature": self.cfg.temperature, "max_tokens": self.cfg.max_tokens, **payload}
        if self.cfg.model:
            body["model"] = self.cfg.model
        if self.cfg.seed is not None:
            body.setdefault("seed", self.cfg.seed)
        last = "no attempt"
        for attempt in range(1, self.cfg.retries + 2):
            start = time.monotonic()
            try:
                resp = self._http.post(f"{self.root}/v1/chat/completions", json=body, timeout=timeout_s or self.cfg.timeout_s)
            except httpx.TimeoutException as exc:
                last = f"timeout after {timeout_s or self.cfg.timeout_s:.0f}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"connection error: {exc!r}"
            else:
                latency = time.monotonic() - start
                if resp.status_code == 200:
                    return self._parse(resp, latency, attempt)
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUS:
                    raise ModelError(f"model endpoint refused the request: {last}")
            if attempt <= self.cfg.retries:
                time.sleep(self.cfg.backoff_s * 2 ** (attempt - 1))
        raise ModelError(f"model endpoint failed after {self.cfg.retries + 1} attempts: {last}")

    def _parse(self, resp: httpx.Response, latency: float, attempt: int) -> Response:
        try:
            body = resp.json()
            choice = body["choices"][0]
            message = dict(choice["message"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"model endpoint sent an unusable response: {resp.text[:300]}") from exc
        usage, timings = parse_usage(body)
        return Response(message, usage, latency, choice.get("finish_reason"), timings, attempt)

    def get_json(self, path: str) -> Optional[dict]:
        """GET a server endpoint such as /props; None when it is absent, unreachable or not JSON."""
        text = self.get_text(path)
        try:
            return json.loads(text) if text is not None else None
        except ValueError:
            return None

    def get_text(self, path: str) -> Optional[str]:
        try:
            resp = self._http.get(f"{self.root}{path}", timeout=10.0)
            return resp.text if resp.status_code == 200 else None
        except httpx.HTTPError:
            return None

    def context_window(self) -> Optional[int]:
        """n_ctx per slot as llama-server reports it in /props."""
        props = self.get_json("/props") or {}
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        return int(n_ctx) if n_ctx else None


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
