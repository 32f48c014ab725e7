"""The typed settings of a scout run: the round budget, the policy and the executor's limits.

The defaults are micro-scout's measured settings (its live-search documentation): 100 paths per `files`, 30 grep
matches in all and 8 per file, case-insensitive grep, reads of at most 120 lines and about 8,000 characters,
a 3 s ripgrep deadline, 512 tokens per response, seed 42, 6 rounds, 6,000 characters of cited source and a
90 s deadline for the whole search. Every one is a field here, so it is in the run's config and its key.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from ..config import ModelConfig
from ..errors import ConfigError

POLICIES = ("model", "keyword")
GREP_CASES = ("insensitive", "smart", "sensitive")


@dataclass
class ExecutorLimits:
    """What one action may cost and show; every cap is reported to the model when it bites."""

    max_file_bytes: int = 1_000_000  # larger files are refused by read/finish and skipped by grep/files
    grep_timeout_s: float = 3.0  # each ripgrep run is killed past this deadline (a regex that runs long is cut)
    grep_max_lines: int = 30  # matching lines shown per grep, in all
    grep_max_per_file: int = 8  # matching lines ripgrep reports per file
    grep_case: str = "insensitive"  # insensitive | smart (insensitive when the pattern is lowercase) | sensitive
    grep_output_bytes: int = 256 * 1024  # ripgrep output read before it is killed
    files_max: int = 100  # paths shown per files()
    read_max_lines: int = 120  # lines shown per read
    read_max_chars: int = 8000  # characters shown per read (whole lines: the read stops before the line that would pass it)
    line_max_chars: int = 300  # longer lines are cut in what the model sees (the reference is still to whole lines)
    ignore_rules: bool = True  # discovery (files, grep) follows the repository's .gitignore/.ignore/.rgignore; reads do not
    priority_dirs: list[str] = field(default_factory=lambda: ["src/", "lib/"])  # listed first by files and grep

    def validate(self) -> "ExecutorLimits":
        if self.grep_case not in GREP_CASES:
            raise ConfigError(f"limits.grep_case={self.grep_case!r}: expected one of {', '.join(GREP_CASES)}")
        for name in ("max_file_bytes", "grep_max_lines", "grep_max_per_file", "grep_output_bytes", "files_max", "read_max_lines",
                     "read_max_chars", "line_max_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(f"limits.{name}={getattr(self, name)}: must be >= 1")
        if not self.grep_timeout_s > 0:
            raise ConfigError(f"limits.grep_timeout_s={self.grep_timeout_s}: must be > 0")
        return self


def scout_model() -> ModelConfig:
    """The model settings scout starts from: micro-scout's 512-token generation limit and seed 42."""
    return ModelConfig(seed=42, max_tokens=512)


@dataclass
class ScoutConfig:
    """One scout run: who chooses the actions, under what budget and limits."""

    policy: str = "model"  # model | keyword (the non-neural control; no server, zero tokens)
    budget: int = 6  # rounds: one model response (up to max_actions actions) per round
    max_actions: int = 3  # actions executed per response; more are answered as ignored
    max_chars: int = 6000  # characters of source the references may cite in all (a finish past it is refused)
    timeout_s: Optional[float] = 90.0  # wall clock for the whole search; past it the search ends as budget_exhausted
    limits: ExecutorLimits = field(default_factory=ExecutorLimits)
    model: ModelConfig = field(default_factory=scout_model)
    compact_at: float = 0.8  # older results are dropped when the next request would pass this share of context

    def validate(self) -> "ScoutConfig":
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r}: expected one of {', '.join(POLICIES)}")
        if self.budget < 1:
            raise ConfigError(f"budget={self.budget}: must be >= 1")
        if not 1 <= self.max_actions <= 3:
            raise ConfigError(f"max_actions={self.max_actions}: must lie in 1..3")
        if self.max_chars < 1:
            raise ConfigError(f"max_chars={self.max_chars}: must be >= 1")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ConfigError(f"timeout_s={self.timeout_s}: must be > 0 (or null for no deadline)")
        if self.model.protocol not in ("auto", "native", "json"):
            raise ConfigError(f"model.protocol={self.model.protocol!r}: expected auto, native or json")
        if self.model.max_tokens < 1:
            raise ConfigError(f"model.max_tokens={self.model.max_tokens}: must be >= 1")
        if self.model.context_window is not None and self.model.context_window < 256:
            raise ConfigError(f"model.context_window={self.model.context_window}: at least 256 tokens")
        self.limits.validate()
        return self

    def to_dict(self) -> dict:
        return asdict(self)


LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def loopback_only(url: str, what: str = "--endpoint") -> str:
    """The endpoint URL when its host is this machine (127.0.0.0/8, ::1, localhost), else ConfigError in one line.

    Scout reads a repository and sends it to the model: a model elsewhere would carry the code off the machine."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise ConfigError(f"{what} {url!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{what} {url!r}: expected http://127.0.0.1:PORT (a model served on this machine)")
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host.lower().rstrip(".") in LOOPBACK_NAMES
    if not local:
        raise ConfigError(f"{what} {url}: scout only talks to a model on this machine (loopback: 127.0.0.1, ::1 or localhost), "
                          f"not {host}")
    return url
