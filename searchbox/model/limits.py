"""What the server says it can do, read rather than assumed: its context window, its reply cap, whether its chat
template renders tools, its slots and build (llama-server's /props, and /v1/models where that says n_ctx).

A preset's context_window and max_tokens are upper bounds: where the server reports less, the server wins, the
run is keyed by what it really gets, and the run record's `limits` says which source won for each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from .. import bounds
from ..config import ModelConfig
from ..errors import ConfigError

MAX_LIMIT = 10**9  # a window or reply cap above this is nonsense, not a limit
# A reply may take at most this share of the window: against SmolLM2 at -c 2048, a max_tokens of half the window
# (1024) left the first request no room by the loop's token estimate (context_exhausted before any call), a quarter ran.
REPLY_SHARE = 4


def _count(value: Any) -> Optional[int]:
    n = bounds.count(value)
    return n if n and n <= MAX_LIMIT else None


@dataclass(frozen=True)
class ServerLimits:
    """What one server reported (None: it did not say)."""

    n_ctx: Optional[int] = None  # tokens per slot
    n_predict: Optional[int] = None  # the server's own cap on generated tokens per request (llama-server -n)
    supports_tools: Optional[bool] = None  # the chat template renders tools (chat_template_caps)
    slots: Optional[int] = None
    build: Optional[str] = None
    source: str = ""  # where n_ctx came from: /props | /v1/models | ""


def template_caps(props: Optional[dict]) -> Optional[bool]:
    """Whether the template renders tool calls, as /props' chat_template_caps says it; None when it does not say."""
    caps = (props or {}).get("chat_template_caps")
    if isinstance(caps, dict) and ("supports_tool_calls" in caps or "supports_tools" in caps):
        return bool(caps.get("supports_tool_calls") or caps.get("supports_tools"))
    return None


def read_limits(client: Any) -> ServerLimits:
    """The limits a server reports through `client.get_json` (a ChatClient); a server that says nothing gives Nones."""
    props = client.get_json("/props") or {}
    settings = props.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    params = settings.get("params") if isinstance(settings.get("params"), dict) else {}
    n_ctx, source = _count(settings.get("n_ctx")), "/props"
    if n_ctx is None:  # vLLM and others: max_model_len; llama-server also says meta.n_ctx per model
        models = client.get_json("/v1/models") or {}
        for item in models.get("data") or []:
            if isinstance(item, dict):
                meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
                n_ctx = _count(item.get("max_model_len")) or _count(meta.get("n_ctx"))
                if n_ctx:
                    source = "/v1/models"
                    break
    slots = props.get("total_slots")
    build = props.get("build_info")
    return ServerLimits(
        n_ctx=n_ctx, source=source if n_ctx else "",
        n_predict=_count(params.get("n_predict", settings.get("n_predict"))),  # -1 (unlimited) reads as None
        supports_tools=template_caps(props),
        slots=slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None,
        build=bounds.valid_text(build)[:200] if isinstance(build, str) else None,
    )


def effective(model: ModelConfig, limits: ServerLimits, default_window: int) -> tuple[ModelConfig, dict]:
    """The model config the run really gets, and the record of each limit: {value, config, server, source}.

    context_window: the config's as an upper bound, the server's n_ctx where smaller (or where the config leaves it
    null). max_tokens: the config's, capped by the server's own -n and by a quarter of the window (REPLY_SHARE: a
    reply that could take more leaves the conversation too little room). A config value left null stays null in the config
    (its key does not move), and the window the run uses is the server's."""
    cfg_window = model.context_window
    if cfg_window and limits.n_ctx and limits.n_ctx < cfg_window:
        window, window_source = limits.n_ctx, "server"
    elif cfg_window:
        window, window_source = cfg_window, "config"
    elif limits.n_ctx:
        window, window_source = limits.n_ctx, "server"
    else:
        window, window_source = default_window, "default"
    caps = [("config", model.max_tokens)]
    if limits.n_predict:
        caps.append(("server", limits.n_predict))
    if window_source != "default":
        caps.append(("window", max(1, window // REPLY_SHARE)))
    tokens_source, max_tokens = min(caps, key=lambda c: (c[1], c[0] != "config"))
    changes: dict[str, Any] = {}
    if cfg_window and window != cfg_window:
        changes["context_window"] = window
    if max_tokens != model.max_tokens:
        changes["max_tokens"] = max_tokens
    record = {
        "context_window": {"value": window, "config": cfg_window, "server": limits.n_ctx, "source": window_source,
                           "server_source": limits.source},
        "max_tokens": {"value": max_tokens, "config": model.max_tokens, "server": limits.n_predict, "source": tokens_source},
        "supports_tools": limits.supports_tools, "slots": limits.slots, "build": limits.build,
    }
    return (dataclasses.replace(model, **changes) if changes else model), record


def window_of(limits_record: dict, fallback: int) -> int:
    """The context window a run's `limits` record says it used."""
    value = (limits_record.get("context_window") or {}).get("value") if isinstance(limits_record, dict) else None
    return value if isinstance(value, int) and value > 0 else fallback


def check_tools_reach(protocol: str, configured: str, limits: ServerLimits) -> None:
    """A native protocol whose tools the server's template cannot render would silently run tool-less: refuse it."""
    if protocol == "native" and configured == "native" and limits.supports_tools is False:
        raise ConfigError("model.protocol=native, but the server's chat template cannot render tools (/props "
                          "chat_template_caps.supports_tool_calls is false: llama-server would drop them); "
                          "use model.protocol=auto or json, or serve a tool-capable template (llama-server --jinja)")
