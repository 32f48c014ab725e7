"""The endpoint pool of a sweep job: model slots across servers, one run per slot (pinned to its slot id on a
llama-server), dead endpoints taken out."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import httpx

from ..errors import ConfigError, SetupError

PROBE_TIMEOUT_S = 5.0


def _say(msg: str) -> None:
    print(f"[sweep] {msg}", file=sys.stderr, flush=True)


class PoolExhausted(SetupError):
    """Every endpoint of the pool was taken out."""


@dataclass
class Endpoint:
    url: Optional[str]  # None: a control policy (no server; the slots only bound the parallelism)
    slots: int
    busy: int = 0
    dead: Optional[str] = None  # why it was taken out
    runs: int = 0  # runs dispatched to it
    pinnable: bool = False  # a llama-server: each run is pinned to one of its slot ids (llm.ChatClient.start_clean)
    held: set[int] = field(default_factory=set)  # slot ids of the runs in flight


@dataclass(frozen=True)
class Lease:
    """One slot of an endpoint held by one run; `slot` is the llama-server slot id the run is pinned to (None when
    the server has no slot ids to pin to)."""

    endpoint: Endpoint
    slot: Optional[int]

    @property
    def url(self) -> Optional[str]:
        return self.endpoint.url


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> Optional[str]:
    """None when the endpoint answers like a server (any status below 500 on /v1/models), else why not."""
    from .llm import base_url

    try:
        resp = httpx.get(f"{base_url(url)}/v1/models", timeout=timeout_s)
    except httpx.TimeoutException:
        return f"no answer within {timeout_s:g}s"
    except httpx.HTTPError as exc:
        return f"unreachable ({type(exc).__name__}: {exc})"
    if resp.status_code >= 500:
        return f"/v1/models answered HTTP {resp.status_code}"
    return None


def server_slots(url: str, default: int) -> tuple[int, bool]:
    """(slots, pinnable): llama-server reports its slot count in /props, and its slots can be pinned by id; other
    servers get `default` (model.parallel) and no slot ids."""
    from .llm import base_url

    try:
        total = httpx.get(f"{base_url(url)}/props", timeout=PROBE_TIMEOUT_S).json().get("total_slots")
    except (httpx.HTTPError, ValueError, AttributeError):
        return default, False
    return (total, True) if isinstance(total, int) and not isinstance(total, bool) and total > 0 else (default, False)


class EndpointPool:
    """Free slots across endpoints: acquire() blocks until a live endpoint has one, the least busy first."""

    def __init__(self, endpoints: list[Endpoint], log: Callable[[str], None] = _say, probe_fn: Callable[[str], Optional[str]] = probe):
        if not endpoints:
            raise ConfigError("the endpoint pool is empty")
        self.endpoints = endpoints
        self.log = log
        self.probe = probe_fn
        self._cond = threading.Condition()

    @property
    def live(self) -> list[Endpoint]:
        return [e for e in self.endpoints if e.dead is None]

    @property
    def total_slots(self) -> int:
        return sum(e.slots for e in self.live)

    def acquire(self) -> Lease:
        """A free slot: on the least busy live endpoint, its lowest free slot id (so a run's slot is reproducible)."""
        with self._cond:
            while True:
                live = self.live
                if not live:
                    reasons = "; ".join(f"{e.url}: {e.dead}" for e in self.endpoints)
                    raise PoolExhausted(f"every endpoint of the pool was taken out ({reasons})")
                free = [e for e in live if e.busy < e.slots]
                if free:
                    ep = max(free, key=lambda e: (e.slots - e.busy, -e.runs))
                    ep.busy += 1
                    ep.runs += 1
                    slot = None
                    if ep.pinnable:
                        slot = min(set(range(ep.slots)) - ep.held)
                        ep.held.add(slot)
                    return Lease(ep, slot)
                self._cond.wait()

    def release(self, lease: Union[Lease, Endpoint]) -> None:
        with self._cond:
            ep = lease.endpoint if isinstance(lease, Lease) else lease
            ep.busy = max(0, ep.busy - 1)
            if isinstance(lease, Lease) and lease.slot is not None:
                ep.held.discard(lease.slot)
            self._cond.notify_all()

    def take_out(self, ep: Endpoint, reason: str) -> None:
        with self._cond:
            if ep.dead is None:
                ep.dead = reason
                self.log(f"endpoint {ep.url} taken out of the pool: {reason} ({len(self.live)} left)")
            self._cond.notify_all()

    def check(self, ep: Union[Lease, Endpoint]) -> bool:
        """After a run failed on `ep`: is it still alive? A dead one is taken out (with its reason)."""
        ep = ep.endpoint if isinstance(ep, Lease) else ep
        if ep.url is None or ep.dead is not None:
            return ep.dead is None
        reason = self.probe(ep.url)
        if reason is None:
            return True
        self.take_out(ep, reason)
        return False


def open_pool(urls: list[Optional[str]], cfg, slots_default: int, log: Callable[[str], None] = _say,
              probe_fn: Callable[[str], Optional[str]] = probe):
    """The pool for a job and what serves it: unreachable endpoints are taken out at once, and every live one
    must serve the same model (its served identity), else a one-line ConfigError. Returns (pool, served)."""
    from .served import served_identity, served_key
    from .llm import ChatClient

    if cfg.model.policy:
        return EndpointPool([Endpoint(None, slots_default)], log, probe_fn), served_identity(None, cfg, None)
    endpoints = [Endpoint(u, 1) for u in dict.fromkeys(urls)]  # the same URL twice is one server
    if not endpoints:
        raise ConfigError("no model endpoint")
    pool = EndpointPool(endpoints, log, probe_fn)
    served_by: dict[str, tuple] = {}
    first = None
    for ep in endpoints:
        reason = probe_fn(ep.url)
        if reason is not None:
            pool.take_out(ep, reason)
            continue
        ep.slots, ep.pinnable = server_slots(ep.url, slots_default)
        served = served_identity(ChatClient(cfg.model, ep.url), cfg, ep.url)
        served_by[ep.url] = (served, served_key(served))
        first = first or served
    if not served_by:
        reasons = "; ".join(f"{e.url}: {e.dead}" for e in endpoints)
        raise SetupError(f"no live model endpoint ({reasons})")
    keys = {repr(sorted(k.items())) for _, k in served_by.values()}
    if len(keys) > 1:
        what = ", ".join(f"{u} serves {s.model_id or '?'} ({s.llama_cpp or 'unknown build'})" for u, (s, _) in served_by.items())
        raise ConfigError(f"model.endpoints must all serve the same model: {what}")
    if len(endpoints) > 1:
        log(f"endpoint pool: {len(pool.live)} live of {len(endpoints)}, {pool.total_slots} slots ({first.model_id})")
    return pool, first
